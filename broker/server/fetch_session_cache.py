"""The broker's fetch sessions (KIP-227; Kafka's ``FetchSessionCache`` and ``FetchManager``): at most
``[broker] max_incremental_fetch_session_cache_slots`` of them, and the fetch context of each Fetch.

:meth:`FetchSessionCache.new_context` reads a Fetch's ``session_id`` and ``session_epoch`` (the table in
:mod:`broker.server.fetch_session`) and gives the :class:`~broker.server.fetch_context.FetchContext` that says
which partitions to read and, once read, which to answer:

* sessionless (epoch -1): the request's partitions, all answered; a session the request names is closed;
* full (epoch 0): the request's partitions, all answered, and a new session of them if there is a slot
  (its id in the answer; 0 if none could be made); a session the request names is closed first;
* incremental (epoch >= 1): the session must exist (else FETCH_SESSION_ID_NOT_FOUND) with that epoch
  (else INVALID_FETCH_SESSION_EPOCH), and the epoch moves on; the request's partitions are added or
  updated, its forgotten ones leave; every partition of the session is read, the changed ones answered.
  A session left with no partition is closed and the fetch is answered as a sessionless one.

**Eviction** (Kafka's ``tryEvict``): a new session takes a free slot; else it evicts the least recently
used session if that one has been idle for more than :data:`EVICTION_MS`; else the least valuable
session it may evict, ordered by (privileged, partitions, id), if that is not worth more than the new
one: a follower's session (privileged) may evict a consumer's at any time, and anyone's older than
:data:`EVICTION_MS`; a consumer's session may evict only sessions older than that. A cache without room
answers full fetches without a session (id 0), which clients accept: they keep sending full fetches.
The scans for eviction are linear in the sessions, and run only when every slot is taken.

Thread safety: one lock (``_lock``) guards the cache and every session in it; any handler or processor
thread may call any method. Kafka shards the cache and locks each session; under the GIL one lock held
for a dictionary update per partition is cheaper than two.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from broker.record.topic_partition import TopicPartition
from broker.server.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from broker.server.fetch_context import FetchContext, FetchContextKind
from broker.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    next_epoch,
)

logger = logging.getLogger(__name__)

#: How long a session must have been idle (or, for eviction by value, alive) before another may evict it
#: (Kafka's min.incremental.fetch.session.eviction.ms).
EVICTION_MS = 120_000
_MAX_SESSION_ID = 2**31 - 1


class FetchSessionCache:
    """The sessions of one broker, by id (see the module docstring)."""

    def __init__(
        self,
        max_slots: int,
        *,
        eviction_ms: int = EVICTION_MS,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._max_slots = max_slots
        self._eviction_ms = eviction_ms
        self._clock_ms = clock_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._sessions: dict[int, FetchSession] = {}
        self._random = random.Random()  # noqa: S311 - ids need to be unique here, not secret (as in Kafka)
        #: Sessions evicted to make room for others (only grows).
        self.evictions = 0

    # ------------------------------------------------------------------------------------ contexts

    def new_context(
        self,
        session_id: int,
        session_epoch: int,
        *,
        follower: bool,
        requested: Mapping[TopicPartition, CachedPartition],
        forgotten: Sequence[TopicPartition],
    ) -> FetchContext:
        """The context of one Fetch: ``requested`` is its partitions in request order, ``forgotten`` its
        forgotten ones (Kafka's ``FetchManager.newContext``)."""
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                with self._lock:
                    self._sessions.pop(session_id, None)
            if session_epoch == FINAL_EPOCH or self._max_slots == 0:
                return FetchContext(self, FetchContextKind.SESSIONLESS, dict(requested))
            return FetchContext(self, FetchContextKind.FULL, dict(requested), follower=follower)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return FetchContext(
                    self, FetchContextKind.SESSION_ERROR, {}, error=FetchSessionIdNotFoundError(session_id)
                )
            if session.epoch != session_epoch:
                return FetchContext(
                    self,
                    FetchContextKind.SESSION_ERROR,
                    {},
                    error=InvalidFetchSessionEpochError(session_id, session_epoch, session.epoch),
                )
            session.update(dict(requested), list(forgotten))
            if not session.partitions:
                del self._sessions[session_id]
                return FetchContext(self, FetchContextKind.SESSIONLESS, dict(requested))
            session.last_used_ms = self._clock_ms()
            session.cached_size = len(session.partitions)
            session.epoch = next_epoch(session.epoch)
            reads = {tp: self._copy(cached) for tp, cached in session.partitions.items()}
            return FetchContext(
                self, FetchContextKind.INCREMENTAL, reads, session=session, expected_epoch=session.epoch
            )

    @staticmethod
    def _copy(cached: CachedPartition) -> CachedPartition:
        return CachedPartition(cached.fetch_offset, cached.partition_max_bytes, cached.current_leader_epoch)

    # ------------------------------------------------------------------------------------ sessions

    def create(self, *, privileged: bool, partitions: dict[TopicPartition, CachedPartition]) -> int:
        """A new session of ``partitions`` if there is (or can be made) a slot: its id, else 0."""
        with self._lock:
            now = self._clock_ms()
            if len(self._sessions) >= self._max_slots and not self._try_evict(
                privileged, len(partitions), now
            ):
                logger.debug(
                    "no fetch session slot for %d partitions (privileged=%s)", len(partitions), privileged
                )
                return INVALID_SESSION_ID
            session_id = self._new_session_id()
            self._sessions[session_id] = FetchSession(
                session_id, privileged=privileged, partitions=partitions, now_ms=now
            )
            return session_id

    def _new_session_id(self) -> int:
        """A random positive id no session has (caller holds ``_lock``)."""
        while True:
            session_id = self._random.randint(1, _MAX_SESSION_ID)
            if session_id not in self._sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Evict one session for a new one of ``size`` partitions, if one may go (caller holds ``_lock``)."""
        sessions = self._sessions
        if not sessions:
            return False
        eviction_ms = self._eviction_ms
        stalest = min(sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > eviction_ms:
            victim = stalest
        else:
            candidates = [
                s
                for s in sessions.values()
                if now - s.created_ms > eviction_ms or (privileged and not s.privileged)
            ]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
            if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
                return False
        del sessions[victim.id]
        self.evictions += 1
        logger.debug("evicted %r for a new session of %d partitions", victim, size)
        return True

    def remove(self, session_id: int) -> bool:
        """Close session ``session_id``; whether there was one."""
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    def lock(self) -> threading.Lock:
        """The lock that guards the sessions (for :class:`~broker.server.fetch_context.FetchContext`)."""
        return self._lock

    @property
    def size(self) -> int:
        """Sessions in the cache."""
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        """Partitions in all sessions."""
        with self._lock:
            return sum(len(s.partitions) for s in self._sessions.values())

    def session(self, session_id: int) -> FetchSession | None:
        """Session ``session_id`` if cached (for tests and metrics: read its fields under no guarantee)."""
        return self._sessions.get(session_id)
