"""A fetch session (KIP-227), the fetching side: what the next Fetch to one broker says and names (Kafka's
``FetchSessionHandler``, used by its replica fetcher and consumer; here by the replica fetcher).

The handler remembers the session's id and next epoch, and the partitions the session holds at the leader
with the request values last sent for each. Each round the fetcher says which partitions it wants and with
what values; :meth:`FetchSessionHandler.build` gives the request's metadata and partitions:

* no session yet (or after an error): a *full* fetch, epoch 0, of every wanted partition; the leader
  answers with a session id (or 0 when it keeps none, and the next fetch is full again);
* in a session: an *incremental* fetch with the session's next epoch, naming the partitions new to the
  session or whose values changed (a follower's fetch offset moves with every append), and forgetting
  those no longer wanted; the answer carries only the partitions with news.

:meth:`FetchSessionHandler.handle_response` moves the epoch on, or after a top-level error starts over:
FETCH_SESSION_ID_NOT_FOUND (evicted, or the leader restarted) -> a full fetch opening a new session;
any other error (INVALID_FETCH_SESSION_EPOCH...) or an answer naming partitions outside the session, or a
full answer leaving some out -> a full fetch that closes the old session and opens a new one.
:meth:`FetchSessionHandler.handle_error` does the same after a failed send (the answer may be lost).

Thread safety: none; a handler belongs to one fetcher thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.protocol import ErrorCode
from broker.protocol.messages.fetch import FetchPartition
from broker.record.topic_partition import TopicPartition
from broker.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """One Fetch's session part: its metadata, the partitions it names (with their values, in order) and
    those it forgets."""

    session_id: int
    session_epoch: int
    to_send: dict[TopicPartition, FetchPartition]
    to_forget: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The session with one broker, as its fetcher keeps it (see the module docstring)."""

    __slots__ = ("_epoch", "_name", "_session_id", "_session_partitions")

    def __init__(self, name: str) -> None:
        self._name = name
        self._session_id = INVALID_SESSION_ID
        self._epoch = INITIAL_EPOCH
        #: The partitions of the session at the broker, with the values last sent for each.
        self._session_partitions: dict[TopicPartition, FetchPartition] = {}

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def epoch(self) -> int:
        return self._epoch

    def build(self, wanted: Mapping[TopicPartition, FetchPartition]) -> FetchRequestData:
        """The next Fetch for ``wanted`` (partition -> what to ask for it): full, or incremental naming only
        the partitions whose request changed."""
        if self._epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._session_partitions = dict(wanted)
            return FetchRequestData(self._session_id, self._epoch, dict(wanted), [])
        session = self._session_partitions
        to_forget = [tp for tp in session if tp not in wanted]
        for tp in to_forget:
            del session[tp]
        to_send: dict[TopicPartition, FetchPartition] = {}
        for tp, values in wanted.items():
            if session.get(tp) != values:
                session[tp] = values
                to_send[tp] = values
        return FetchRequestData(self._session_id, self._epoch, to_send, to_forget)

    def handle_response(
        self, request: FetchRequestData, error_code: int, session_id: int, answered: Iterable[TopicPartition]
    ) -> bool:
        """Take the answer to ``request``; whether its partitions may be used (False: a session error or an
        answer that does not fit the session, and the next fetch is full)."""
        if error_code != ErrorCode.NONE:
            logger.info(
                "%s: fetch session %d (epoch %d) answered %s",
                self._name,
                request.session_id,
                request.session_epoch,
                ErrorCode.name_of(error_code),
            )
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._session_id, self._epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self._epoch = INITIAL_EPOCH  # close the session named, open a new one
            return False
        answered_set = set(answered)
        session = self._session_partitions
        extra = answered_set.difference(session)
        omitted = session.keys() - answered_set if request.full else set()
        if extra or omitted:
            logger.info(
                "%s: fetch session %d answered %s; starting a new session",
                self._name,
                session_id,
                f"partitions outside it: {sorted(map(str, extra))}"
                if extra
                else f"a full fetch without {sorted(map(str, omitted))}",
            )
            self._epoch = INITIAL_EPOCH
            return False
        if request.full:
            self._session_id = session_id
            self._epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else next_epoch(INITIAL_EPOCH)
        elif session_id == INVALID_SESSION_ID:
            self._session_id, self._epoch = INVALID_SESSION_ID, INITIAL_EPOCH  # the broker closed it
        else:
            self._epoch = next_epoch(self._epoch)
        return True

    def handle_error(self) -> None:
        """The request failed on the way (its answer may be lost): close the session, open a new one."""
        self._epoch = INITIAL_EPOCH
