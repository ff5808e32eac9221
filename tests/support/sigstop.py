"""SIGSTOP that has taken effect when the call returns.

``kill(pid, SIGSTOP)`` returns once the signal is queued. The kernel wakes one of the process's threads,
and that thread stops the others (a group stop) when it next runs, so on a loaded machine the other threads
run on for milliseconds after the call: long enough for a paused follower to fetch and acknowledge one more
write, or a paused broker to answer one more request. A test that pauses a process and then acts on the
pause must wait until every thread is stopped: :func:`pause` sends the signal and waits until each thread's
state in ``/proc/<pid>/task/<tid>/stat`` is ``T`` (stopped; ``t`` under a tracer, and an exited thread
counts as stopped).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Thread states that run no more code: stopped, traced-stopped, zombie, dead.
_STOPPED = frozenset("TtZX")


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (empty when the process is gone)."""
    states = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            raw = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited meanwhile
        # the command name (field 2) is in parentheses and may hold spaces: the state follows the last ')'
        states.append(raw[raw.rindex(")") + 2])
    return states


def pause(pid: int, timeout_s: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until every one of its threads is stopped (AssertionError after
    ``timeout_s``, naming the threads' states)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while True:
        states = thread_states(pid)
        if all(state in _STOPPED for state in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid} not stopped {timeout_s} s after SIGSTOP: thread states {states}")
        time.sleep(0.001)


def resume(pid: int) -> None:
    """SIGCONT ``pid``."""
    os.kill(pid, signal.SIGCONT)


@contextmanager
def paused(pid: int, timeout_s: float = 10.0) -> Iterator[None]:
    """``pid`` stopped (every thread) for the body, resumed after it whatever happens."""
    pause(pid, timeout_s)
    try:
        yield
    finally:
        resume(pid)
