"""Background processes that Lumber starts itself, and the ports they listen on.

A :class:`ProcessHandle` records a process's pid together with its start time (field 22 of
``/proc/<pid>/stat``), so that stopping it later never signals an unrelated process that reused the pid.
Processes are started in their own session, so they outlive the command that started them (``lumber dev up``)
and a terminal's Ctrl-C does not reach them. Nothing here ever signals a process it did not start.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import DevStackError

LOOPBACK = "127.0.0.1"


#: free_port's ports start here and end below the kernel's ephemeral range (see free_port).
FIRST_FREE_PORT = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing is bound to now, none handed out before by this process, and below the kernel's
    ephemeral range, from which the OS also takes outgoing connections' source ports: a port chosen there
    was once a client connection's before the Kafka node it was chosen for could bind it (a CI run). The
    OS's choice (bind to port 0) only where that range leaves fewer than 1,000 ports below it."""
    return free_ports(1, host)


def free_ports(count: int, host: str = LOOPBACK) -> int:
    """The first of ``count`` consecutive ports, each one :func:`free_port` could hand out (a stack whose
    brokers take port, port + 1, ...)."""
    try:
        ephemeral = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    with _handed_out_lock:
        for _ in range(500 if ephemeral - FIRST_FREE_PORT >= 1000 else 0):
            first = random.randrange(FIRST_FREE_PORT, ephemeral - count)  # noqa: S311 - spread, not secrecy
            if _free_to_hand_out(range(first, first + count), host):
                return first
        for _ in range(200):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                first = int(sock.getsockname()[1])
            if first + count <= 65536 and _free_to_hand_out(range(first, first + count), host):
                return first
    raise DevStackError(f"no {count} consecutive free ports on {host}")


def _free_to_hand_out(ports: range, host: str) -> bool:
    """Whether none of ``ports`` was handed out nor is bound or in TIME_WAIT; if so they are handed out now
    (under the lock)."""
    if not _handed_out.isdisjoint(ports) or any(port_in_use(p, host, time_wait_free=False) for p in ports):
        return False
    _handed_out.update(ports)
    return True


def port_in_use(port: int, host: str = LOOPBACK, *, time_wait_free: bool = True) -> bool:
    """True when a server could not listen on ``host:port`` now (something is bound to it); with
    ``time_wait_free`` false, also while a closed connection of that port waits out TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if time_wait_free:  # as servers do: TIME_WAIT is no owner
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.05) -> None:
    """Poll ``predicate`` until true; after ``timeout_s`` raise :class:`DevStackError` naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise DevStackError(f"timed out after {timeout_s:.1f} s waiting for {what}")
        time.sleep(interval_s)


def _proc_stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name (field 2) is in parentheses and may contain spaces: split after the last ')'
    tail = raw[raw.rindex(")") + 2 :].split()
    return [raw[: raw.index(" ")], raw[raw.index("(") + 1 : raw.rindex(")")], *tail]


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if there is no such process."""
    stat = _proc_stat(pid)
    return int(stat[21]) if stat else None


@dataclass(frozen=True)
class ProcessHandle:
    """A process Lumber started: enough to find it again, and only it, from another process."""

    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]
    log_path: str

    def is_running(self) -> bool:
        """True while this very process (not a later one with the same pid) is alive and not a zombie."""
        stat = _proc_stat(self.pid)
        return stat is not None and int(stat[21]) == self.start_ticks and stat[2] not in ("Z", "X")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessHandle:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=tuple(str(a) for a in data["argv"]),
            log_path=str(data["log_path"]),
        )


def spawn(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[ProcessHandle, subprocess.Popen[bytes]]:
    """Start ``argv`` in its own session with stdout and stderr appended to ``log_path``.

    Returns the handle (to store) and the Popen (for a caller that stays alive and can reap it).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    ticks = process_start_ticks(proc.pid)
    if ticks is None:  # it died at once; its exit code and log say why
        code = proc.wait()
        raise DevStackError(f"{name} exited at once with code {code}; see {log_path}")
    return ProcessHandle(name, proc.pid, ticks, tuple(argv), str(log_path)), proc


def start_and_wait(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    is_ready: Callable[[], bool],
    timeout_s: float,
    on_spawned: Callable[[ProcessHandle], None] = lambda _handle: None,
    env: Mapping[str, str] | None = None,
) -> tuple[ProcessHandle, subprocess.Popen[bytes]]:
    """Spawn a service, tell ``on_spawned`` its handle, and wait until ``is_ready``.

    If the process exits or does not become ready in time it is stopped, and :class:`DevStackError` names
    the service and its log.
    """
    handle, popen = spawn(name, argv, log_path, env=env)
    on_spawned(handle)

    def ready() -> bool:
        if popen.poll() is not None:
            raise DevStackError(f"{name} exited with code {popen.returncode} while starting; see {log_path}")
        return is_ready()

    try:
        wait_until(ready, timeout_s, f"{name} to answer (log: {log_path})")
    except BaseException:
        stop(handle, popen=popen)
        raise
    return handle, popen


def stop(
    handle: ProcessHandle, timeout_s: float = 15.0, popen: subprocess.Popen[bytes] | None = None
) -> bool:
    """SIGTERM the process, wait up to ``timeout_s``, then SIGKILL it. True if it was running.

    Only signals the pid while its start time still matches the handle's, so a recycled pid is left alone.
    """
    was_running = handle.is_running()
    if was_running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while handle.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        if handle.is_running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(handle.pid, signal.SIGKILL)
    if popen is not None:
        popen.wait(timeout=timeout_s)  # our own child: reap it, so no zombie (and no ResourceWarning) is left
    elif was_running:
        wait_until(lambda: not handle.is_running(), timeout_s, f"{handle.name} (pid {handle.pid}) to exit")
    return was_running


def kill(handle: ProcessHandle, popen: subprocess.Popen[bytes] | None = None) -> None:
    """SIGKILL the process at once (crash tests), if it is still this very process."""
    if handle.is_running():
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle.pid, signal.SIGKILL)
    if popen is not None:
        popen.wait(timeout=30)
    else:
        wait_until(lambda: not handle.is_running(), 30, f"{handle.name} (pid {handle.pid}) to die")
