"""One run at a time per load job: kazoo's Lock recipe on ``/etl/jobs/<job>/lock``.

The path is defined in :mod:`pipeline.etl_zk_paths`.

States::

    NEW --acquire() ok--> HELD --release()--> RELEASED
     |                     |
     |                     +-- session SUSPENDED or LOST --> DOUBTFUL (ensure_held() re-checks, LOST: raises)
     +-- another run holds it (after lock_timeout_ms):
           holder known dead (this host, its pid gone) --> WAITING (said on stderr) --node gone--> HELD
                                                             +-- still there after the session timeout --+
           holder alive, or on another host ---------------------------------------------------------------+
                                                                        --> JobLockedError naming the holder

A contender node is ephemeral: a run that dies (even by SIGKILL) drops the lock when its ZooKeeper session
expires (``[zookeeper] session_timeout_ms`` later). Until then its node is still there, so a run started
right after a killed one would be refused. The contender's identifier (:func:`contender_identifier`) names
its host and pid: when the holder ran on this host and that pid is gone (or a zombie), the node can only
be waiting for its session to expire, so :meth:`JobLock.acquire` waits for it, at most the session timeout
(plus ZooKeeper's tick-sized expiry granularity), and says so (:data:`WAIT_PREFIX` lines on stderr). A
holder on another host cannot be checked from here: it is refused as before (raise ``[load]
lock_timeout_ms`` to wait for it). While ZooKeeper is unreachable the lock cannot be
trusted (the session may have expired and another run may have taken it), so the commit protocol calls
:meth:`JobLock.ensure_held` right before its commit point: the session must be connected, never lost since
acquiring, and the contender node must still exist. Not thread-safe: one run uses its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout

from pipeline.etl_zk_paths import job_lock_path
from pipeline.load_errors import JobLockedError

log = logging.getLogger(__name__)

#: Lines that say a run waits for a dead holder's session start with this (``lumber etl run`` shows them).
WAIT_PREFIX = "lumber-lock: "
#: ZooKeeper expires sessions in buckets of its tick (2 s by default): a session may outlive its timeout
#: by up to that much.
_EXPIRY_SLACK_S = 4.0
_IDENTIFIER = re.compile(r"^(?P<host>\S+) pid (?P<pid>\d+)(?: |$)")


def contender_identifier(run_id: str) -> str:
    return f"{socket.gethostname()} pid {os.getpid()} run {run_id}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (a zombie is not: it only waits to be reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: kill(0) said it exists
    # pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ")"
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] not in ("Z", "X")


def dead_holder_pid(identifier: str) -> int | None:
    """The pid of a holder that ran on this host and is gone; None if it may be alive (or elsewhere)."""
    match = _IDENTIFIER.match(identifier)
    if match is None or match["host"] != socket.gethostname():
        return None
    pid = int(match["pid"])
    return None if pid_alive(pid) else pid


def _say_on_stderr(line: str) -> None:
    sys.stderr.write(f"{WAIT_PREFIX}{line}\n")
    sys.stderr.flush()


class JobLock:
    """The ZooKeeper lock of one load job, held for the length of a run."""

    def __init__(
        self,
        client: KazooClient,
        job: str,
        identifier: str,
        *,
        timeout_s: float = 0.0,
        session_timeout_s: float | None = None,
        say: Callable[[str], None] = _say_on_stderr,
    ) -> None:
        """``session_timeout_s`` bounds the wait for a dead holder (default: ``client``'s own session
        timeout, the same ``[zookeeper] session_timeout_ms`` as the holder's); ``say`` tells of that wait."""
        self.client = client
        self.job = job
        self.path = job_lock_path(job)
        self.identifier = identifier
        self.timeout_s = timeout_s
        self.session_timeout_s = (
            session_timeout_s if session_timeout_s is not None else client._session_timeout / 1000
        )
        self._say = say
        self._lock: Any = client.Lock(self.path, identifier)
        self._lost = threading.Event()
        self._held = False

    def _on_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._lost.set()
        if state != KazooState.CONNECTED and self._held:
            log.warning("ZooKeeper session %s while holding the lock of job %r", state, self.job)

    def acquire(self) -> None:
        """Take the lock, waiting up to ``timeout_s``; :class:`JobLockedError` names the holder otherwise."""
        got = self._try_acquire(self.timeout_s)
        waited_s = None
        if not got:
            got, waited_s = self._wait_out_dead_holder()
        if not got:
            with contextlib.suppress(KazooException):
                self._lock.cancel()
            holders = self.holders()
            holder = holders[0] if holders else "a run that has just finished"
            if waited_s is not None:
                raise JobLockedError(
                    f"load job {self.job!r}: the ZooKeeper lock {self.path} is still held by {holder} after "
                    f"waiting {waited_s:.0f} s for a dead holder's session to expire; this run did not start"
                )
            raise JobLockedError(
                f"load job {self.job!r} is already running (ZooKeeper lock {self.path} is held by {holder}); "
                "this run did not start. Wait for it to finish, or raise [load] lock_timeout_ms to wait"
            )
        self._held = True
        self.client.add_listener(self._on_state)

    def _try_acquire(self, timeout_s: float) -> bool:
        try:
            return bool(self._lock.acquire(blocking=timeout_s > 0, timeout=timeout_s or None))
        except LockTimeout:
            return False
        except KazooException as exc:
            raise JobLockedError(f"cannot take the lock {self.path} of job {self.job!r}: {exc}") from exc

    def _wait_out_dead_holder(self) -> tuple[bool, float | None]:
        """WAITING in the module docstring: if every contender ahead is a dead process of this host, wait
        for their sessions to expire, at most the session timeout (plus slack) from now. Returns whether
        the lock was taken, and how long it waited (None: it did not, the holders may be alive)."""
        holders = self.holders()
        dead = [dead_holder_pid(h) for h in holders]
        if not holders or None in dead:
            return False, None
        bound_s = self.session_timeout_s + _EXPIRY_SLACK_S
        self._say(
            f"job {self.job!r}: the lock {self.path} is held by {holders[0]}, but that process is gone "
            f"(pid {dead[0]} is not running on this host); its ZooKeeper session expires within "
            f"{self.session_timeout_s:g} s: waiting up to {bound_s:g} s for it"
        )
        started = time.monotonic()
        got = self._try_acquire(bound_s)
        waited_s = time.monotonic() - started
        if got:
            self._say(f"job {self.job!r}: lock {self.path} taken after {waited_s:.1f} s")
        return got, waited_s

    def holders(self) -> list[str]:
        """The identifiers of the contenders, holder first."""
        try:
            return [str(c) for c in self._lock.contenders()]
        except KazooException:
            return []

    def ensure_held(self) -> None:
        """Raise :class:`JobLockedError` unless the lock is certainly still ours (see the module doc)."""
        node = self._lock.node
        if not self._held or node is None:
            raise JobLockedError(f"job {self.job!r}: the lock {self.path} is not held by this run")
        if self._lost.is_set() or self.client.state != KazooState.CONNECTED:
            raise JobLockedError(
                f"job {self.job!r}: the ZooKeeper session was "
                f"{'lost' if self._lost.is_set() else 'interrupted'} "
                f"while holding {self.path}; another run may hold it now, so this run must not commit"
            )
        try:
            exists = self.client.exists(f"{self.path}/{node}") is not None
        except KazooException as exc:
            raise JobLockedError(f"job {self.job!r}: cannot check the lock {self.path}: {exc}") from exc
        if not exists:
            raise JobLockedError(f"job {self.job!r}: the lock node {self.path}/{node} is gone")

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        self.client.remove_listener(self._on_state)
        try:
            self._lock.release()
        except KazooException as exc:  # the session is gone: so is the ephemeral node
            log.warning("could not release the lock %s of job %r: %s", self.path, self.job, exc)

    def __enter__(self) -> JobLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
