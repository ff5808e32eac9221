"""One run at a time per load job: kazoo's Lock recipe on ``/etl/jobs/<job>/lock``.

The path is defined in :mod:`pipeline.etl_zk_paths`.

States::

    NEW --acquire() ok--> HELD --release()--> RELEASED
     |                     |
     |                     +-- session SUSPENDED or LOST --> DOUBTFUL (ensure_held() re-checks, LOST: raises)
     +-- another run holds it (after lock_timeout_ms) --> JobLockedError naming the holder

A contender node is ephemeral: a run that dies (even by SIGKILL) drops the lock when its ZooKeeper session
expires (``[zookeeper] session_timeout_ms`` later). While ZooKeeper is unreachable the lock cannot be
trusted (the session may have expired and another run may have taken it), so the commit protocol calls
:meth:`JobLock.ensure_held` right before its commit point: the session must be connected, never lost since
acquiring, and the contender node must still exist. Not thread-safe: one run uses its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from types import TracebackType
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout

from pipeline.etl_zk_paths import job_lock_path
from pipeline.load_errors import JobLockedError

log = logging.getLogger(__name__)


def contender_identifier(run_id: str) -> str:
    return f"{socket.gethostname()} pid {os.getpid()} run {run_id}"


class JobLock:
    """The ZooKeeper lock of one load job, held for the length of a run."""

    def __init__(self, client: KazooClient, job: str, identifier: str, *, timeout_s: float = 0.0) -> None:
        self.client = client
        self.job = job
        self.path = job_lock_path(job)
        self.identifier = identifier
        self.timeout_s = timeout_s
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
        try:
            got = self._lock.acquire(blocking=self.timeout_s > 0, timeout=self.timeout_s or None)
        except LockTimeout:
            got = False
        except KazooException as exc:
            raise JobLockedError(f"cannot take the lock {self.path} of job {self.job!r}: {exc}") from exc
        if not got:
            with contextlib.suppress(KazooException):
                self._lock.cancel()
            holders = self.holders()
            holder = holders[0] if holders else "a run that has just finished"
            raise JobLockedError(
                f"load job {self.job!r} is already running (ZooKeeper lock {self.path} is held by {holder}); "
                "this run did not start. Wait for it to finish, or raise [load] lock_timeout_ms to wait"
            )
        self._held = True
        self.client.add_listener(self._on_state)

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
