"""The processes of the chaos run (:mod:`bench.chaos`): :class:`Proc`, one process that the run starts,
signals by pid only, kills and starts again; and the ``/proc`` reads that find a load's driver and Spark
workers among a process's descendants.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.chaos_common import wait_for
from lumber.dev.dev_stack import ServiceSpec
from lumber.dev.process import ProcessHandle, start_and_wait


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclasses.dataclass
class Proc:
    """One process of the run: how to start it again, and the running one (signalled by pid only)."""

    name: str
    argv: Callable[[], Sequence[str]]
    log_path: Path
    is_ready: Callable[[], bool]
    prepare: Callable[[], object] = lambda: None
    handle: ProcessHandle | None = None
    popen: subprocess.Popen[bytes] | None = None
    stopped: bool = False  # SIGSTOPped

    def start(self, timeout_s: float = 90.0) -> None:
        self.prepare()
        self.handle, self.popen = start_and_wait(
            self.name, self.argv(), self.log_path, self.is_ready, timeout_s
        )
        self.stopped = False

    def running(self) -> bool:
        return self.handle is not None and self.handle.is_running()

    def signal(self, signum: int) -> None:
        if self.handle is not None and self.handle.is_running():
            os.kill(self.handle.pid, signum)

    def kill9(self) -> None:
        if self.handle is None:
            return
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=30)
        else:
            wait_for(lambda: not self.handle.is_running(), 30)  # type: ignore[union-attr]
        self.handle = self.popen = None

    def terminate(self, timeout_s: float = 60.0) -> None:
        if self.handle is None:
            return
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not wait_for(lambda: not self.handle.is_running(), timeout_s, 0.1):  # type: ignore[union-attr]
            self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=30)
        self.handle = self.popen = None


def from_spec(spec: ServiceSpec, handle: ProcessHandle | None) -> Proc:
    return Proc(spec.name, spec.argv, spec.log_path, spec.is_ready, spec.prepare, handle)
