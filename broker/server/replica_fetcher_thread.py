"""A follower's fetcher: one thread copying a set of partitions from their leader (Kafka's
``ReplicaFetcherThread`` and ``AbstractFetcherThread``).

Each partition it holds is in one of two phases (Kafka's ``PartitionFetchState``)::

    add(tp, epoch) ──▶ TRUNCATING ──OffsetForLeaderEpoch answered──▶ FETCHING ──▶ (fetches, forever)
                          ▲                                              │
                          └───── OFFSET_OUT_OF_RANGE above the leader's log start ◀┘
    (FENCED_LEADER_EPOCH: dropped, the watcher's next state adds it again; NOT_LEADER_OR_FOLLOWER,
     UNKNOWN_LEADER_EPOCH, a storage or record error: retried after replica_fetch_backoff_ms)

* **Truncating** (KIP-101, KIP-279): the thread asks the leader where the latest epoch of the follower's
  own log ends (OffsetForLeaderEpoch with ``replica_id``) and truncates its log there, so that a follower
  that was a leader (or followed one) never keeps an unreplicated tail the new leader does not have:
  replicas never diverge. The answer is read as Kafka's ``getOffsetTruncationState`` reads it: the leader's
  epoch is one the follower also has -> truncate to the smaller of both end offsets for it; the leader
  answers an older epoch the follower lacks -> truncate to the follower's end of that epoch and ask again;
  no epoch known on either side -> truncate to the follower's high watermark.
* **Fetching**: one Fetch (``replica_id`` = this broker, ``current_leader_epoch`` = the epoch followed)
  for every fetching partition, waiting up to ``replica_fetch_wait_max_ms`` at the leader; each partition's
  batches are appended unchanged (:meth:`Partition.append_records_to_follower`: same offsets, same bytes),
  and the leader's high watermark is taken up to the follower's log end. OFFSET_OUT_OF_RANGE below the
  leader's log start (retention deleted what the follower still needs) empties the follower's log and starts
  it at the leader's log start; anywhere else, it truncates again.

* **Fetch sessions** (KIP-227, :class:`~broker.server.fetch_session_handler.FetchSessionHandler`): the
  first fetch names every partition and opens a session at the leader; the next ones name only the
  partitions whose fetch offset (or epoch, log start, size limit) changed since the last, and forget those
  no longer fetched (removed, or backing off after an error); the leader answers only the partitions with
  news. A session error (evicted: FETCH_SESSION_ID_NOT_FOUND; INVALID_FETCH_SESSION_EPOCH) or a failed
  request makes the next fetch a full one, at once.

Lumber differs from Kafka here: a follower applies its own retention rather than the leader's log start
offset.

Concurrency: ``_cond`` guards ``_partitions`` and is held while a response is applied, never while a
request is on the wire; :meth:`remove_partitions` takes it, so once it returns no append or truncation of
those partitions is under way or will start. The partition's own lock orders the appends against
leadership changes (an answer for an epoch no longer followed is dropped there).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.config import BrokerConfig
from broker.errors import BrokerError
from broker.protocol import ErrorCode
from broker.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
)
from broker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from broker.record.topic_partition import TopicPartition
from broker.server.fetch_session_handler import FetchSessionHandler
from broker.server.inter_broker_send import (
    InterBrokerSend,
    InterBrokerSendError,
    inter_broker_sasl,
    inter_broker_ssl_context,
)

if TYPE_CHECKING:
    from broker.server.partition import Partition
    from broker.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

#: The most bytes one fetch response carries in all (Kafka's replica.fetch.response.max.bytes).
FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
#: How long an idle thread (no partition to fetch) sleeps between looks.
_IDLE_WAIT_S = 0.5
#: Top-level Fetch errors about the session, answered by fetching in full at once.
_SESSION_ERRORS = frozenset(
    {int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), int(ErrorCode.INVALID_FETCH_SESSION_EPOCH)}
)
_UNDEFINED = -1


@dataclass(slots=True)
class PartitionFetchState:
    """One partition's place in the fetcher (guarded by the thread's ``_cond``)."""

    leader_epoch: int
    truncating: bool = True
    #: ``time.monotonic()`` before which the partition is not fetched (after an error).
    delayed_until: float = 0.0


#: Longest a fetcher whose every partition is throttled sleeps before it looks again.
_THROTTLE_WAIT_MAX_S = 0.5


class ReplicaFetcherThread:
    """Fetches partitions led by ``leader_id`` into their local followers (see the module docstring)."""

    def __init__(
        self,
        name: str,
        broker_id: int,
        leader_id: int,
        config: BrokerConfig,
        cluster: ClusterWatcher,
        replicas: ReplicaManager,
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.leader_id = leader_id
        self._config = config
        self._cluster = cluster
        self._replicas = replicas
        self._cond = threading.Condition()
        self._partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._stopping = threading.Event()
        self._send: InterBrokerSend | None = None
        self._session = FetchSessionHandler(name)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # ------------------------------------------------------------------------------------ partitions

    def start(self) -> None:
        self._thread.start()

    def add_partition(self, tp: TopicPartition, leader_epoch: int) -> None:
        """Fetch ``tp`` in ``leader_epoch``, truncating first."""
        with self._cond:
            self._partitions[tp] = PartitionFetchState(leader_epoch)
            self._cond.notify_all()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching ``tps``; no append to them is under way once this returns."""
        with self._cond:
            for tp in tps:
                self._partitions.pop(tp, None)

    def has_partition(self, tp: TopicPartition) -> bool:
        with self._cond:
            return tp in self._partitions

    def partition_count(self) -> int:
        with self._cond:
            return len(self._partitions)

    def shutdown(self, *, wait: bool = True, timeout_s: float = 10.0) -> None:
        """Stop the thread, waking it from a request in flight; with ``wait``, until it has (it closes its
        connection as it exits)."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        send = self._send
        if send is not None:
            send.abort()
        if wait:
            self.join(timeout_s)

    def join(self, timeout_s: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    # ------------------------------------------------------------------------------------ the loop

    def _run(self) -> None:
        backoff_s = self._config.replica_fetch_backoff_ms / 1000
        while not self._stopping.is_set():
            try:
                worked = self._do_work()
            except InterBrokerSendError as exc:
                if self._stopping.is_set():
                    break
                logger.warning(
                    "%s: fetching from broker %d failed (%s); retrying in %.1f s",
                    self.name,
                    self.leader_id,
                    exc,
                    backoff_s,
                )
                self._session.handle_error()
                self._close()
                self._stopping.wait(backoff_s)
                continue
            except Exception:  # the thread's top loop: log, back off, keep replicating
                logger.exception("%s: fetching from broker %d failed", self.name, self.leader_id)
                self._session.handle_error()
                self._close()
                self._stopping.wait(backoff_s)
                continue
            if not worked:
                with self._cond:
                    self._cond.wait(_IDLE_WAIT_S if not self._partitions else 0.05)
        self._close()

    def _close(self) -> None:
        if self._send is not None:
            self._send.close()
            self._send = None

    def _connection(self) -> InterBrokerSend:
        send = self._send
        if send is None:
            info = self._cluster.view.brokers.get(self.leader_id)
            if info is None:
                raise InterBrokerSendError(f"broker {self.leader_id} is not registered")
            listener = self._config.inter_broker_listener
            endpoint = info.endpoint(listener)
            if endpoint is None:
                raise InterBrokerSendError(
                    f"broker {self.leader_id} has no listener {listener} (inter_broker_listener_name)"
                )
            send = self._send = InterBrokerSend(
                self.leader_id,
                endpoint.host,
                endpoint.port,
                ssl_context=inter_broker_ssl_context(self._config)
                if endpoint.security_protocol.uses_tls
                else None,
                sasl=inter_broker_sasl(self._config) if endpoint.security_protocol.uses_sasl else None,
                client_id=f"broker-{self.broker_id}-fetcher",
                timeout_s=max(30.0, self._config.replica_fetch_wait_max_ms / 1000 + 10.0),
            )
        return send

    def _do_work(self) -> bool:
        """One round: truncate what must be, then fetch; False when there was nothing to do."""
        now = time.monotonic()
        with self._cond:
            ready = {tp: st for tp, st in self._partitions.items() if st.delayed_until <= now}
        if not ready:
            return False
        truncating = {tp: st.leader_epoch for tp, st in ready.items() if st.truncating}
        if truncating:
            self._truncate(truncating)
            return True
        self._fetch({tp: st.leader_epoch for tp, st in ready.items()})
        return True

    def _partition(self, tp: TopicPartition) -> Partition | None:
        return self._replicas.get_partition(tp)

    def _delay(self, tp: TopicPartition, epoch: int) -> None:
        """Caller holds ``_cond``."""
        state = self._partitions.get(tp)
        if state is not None and state.leader_epoch == epoch:
            state.delayed_until = time.monotonic() + self._config.replica_fetch_backoff_ms / 1000

    # ------------------------------------------------------------------------------------ truncation

    def _truncate(self, epochs: dict[TopicPartition, int]) -> None:
        asked: dict[TopicPartition, int] = {}
        for tp in epochs:
            partition = self._partition(tp)
            if partition is not None:
                asked[tp] = partition.log.latest_epoch
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for tp, latest in asked.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=tp.partition, current_leader_epoch=epochs[tp], leader_epoch=latest
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=self.broker_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response: OffsetForLeaderEpochResponse = self._connection().send_and_receive(request)
        with self._cond:
            for topic in response.topics:
                for answer in topic.partitions:
                    tp = TopicPartition(topic.topic, answer.partition)
                    state = self._partitions.get(tp)
                    epoch = epochs.get(tp)
                    if state is None or epoch is None or state.leader_epoch != epoch or not state.truncating:
                        continue
                    self._apply_truncation(
                        tp, state, answer.error_code, answer.leader_epoch, answer.end_offset
                    )

    def _apply_truncation(
        self,
        tp: TopicPartition,
        state: PartitionFetchState,
        error_code: int,
        leader_epoch: int,
        end_offset: int,
    ) -> None:
        """Kafka's ``getOffsetTruncationState`` (caller holds ``_cond``)."""
        if error_code != ErrorCode.NONE:
            self._on_partition_error(tp, state, error_code, "OffsetForLeaderEpoch")
            return
        partition = self._partition(tp)
        if partition is None:
            self._partitions.pop(tp, None)
            return
        log = partition.log
        log_end = log.log_end_offset
        completed = True
        if end_offset == _UNDEFINED:
            target = min(log.high_watermark, log_end)
        elif leader_epoch == _UNDEFINED:
            target = min(end_offset, log_end)
        else:
            follower_epoch, follower_end = log.end_offset_for_epoch(leader_epoch)
            if follower_epoch == _UNDEFINED:
                target = min(end_offset, log_end)
            elif follower_epoch != leader_epoch:
                target, completed = min(follower_end, log_end), False
            else:
                target = min(follower_end, end_offset, log_end)
        if target < log_end:
            logger.info(
                "%s: truncating %s from offset %d to %d (leader %d answered epoch %d ends at %d)",
                self.name,
                tp,
                log_end,
                target,
                self.leader_id,
                leader_epoch,
                end_offset,
            )
            if partition.truncate_to(target, state.leader_epoch) is None:
                self._partitions.pop(tp, None)
                return
        state.truncating = not completed

    # ------------------------------------------------------------------------------------ fetch

    def _fetch(self, epochs: dict[TopicPartition, int]) -> None:
        config = self._config
        offsets: dict[TopicPartition, int] = {}
        wanted: dict[TopicPartition, FetchPartition] = {}
        throttle, quota = self._replicas.throttle, self._replicas.follower_quota
        throttled: set[TopicPartition] = set()
        for tp, epoch in epochs.items():
            partition = self._partition(tp)
            if partition is None:
                continue
            if (
                throttle is not None
                and self.broker_id not in partition.isr
                and throttle.follower_throttled(tp)
            ):
                # a reassignment's copy within the follower's throttle (Kafka's shouldFollowerThrottle)
                if quota.exceeded():
                    continue
                throttled.add(tp)
            log = partition.log
            offsets[tp] = fetch_offset = log.log_end_offset
            wanted[tp] = FetchPartition(
                partition=tp.partition,
                current_leader_epoch=epoch,
                fetch_offset=fetch_offset,
                log_start_offset=log.log_start_offset,
                partition_max_bytes=config.replica_fetch_max_bytes,
            )
        if not offsets:
            if epochs:  # every partition waits for the throttle's budget
                self._stopping.wait(min(max(quota.wait_s(), 0.01), _THROTTLE_WAIT_MAX_S))
            return
        session = self._session.build(wanted)
        by_topic: dict[str, list[FetchPartition]] = {}
        for tp, asked in session.to_send.items():
            by_topic.setdefault(tp.topic, []).append(asked)
        forgotten: dict[str, list[int]] = {}
        for tp in session.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        request = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=1,
            max_bytes=FETCH_RESPONSE_MAX_BYTES,
            session_id=session.session_id,
            session_epoch=session.session_epoch,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
        )
        response: FetchResponse = self._connection().send_and_receive(request)
        answered = [
            TopicPartition(topic.topic, data.partition_index)
            for topic in response.responses
            for data in topic.partitions
        ]
        if response.error_code in _SESSION_ERRORS:
            self._session.handle_response(session, response.error_code, response.session_id, answered)
            return  # the next round fetches in full, at once
        if response.error_code != ErrorCode.NONE:
            raise InterBrokerSendError(
                f"broker {self.leader_id} answered the fetch with {ErrorCode.name_of(response.error_code)}"
            )
        if not self._session.handle_response(session, response.error_code, response.session_id, answered):
            return
        with self._cond:
            for topic in response.responses:
                for data in topic.partitions:
                    tp = TopicPartition(topic.topic, data.partition_index)
                    state = self._partitions.get(tp)
                    asked_epoch = epochs.get(tp)
                    if (
                        state is None
                        or state.leader_epoch != asked_epoch
                        or state.truncating
                        or tp not in offsets
                    ):
                        continue  # removed, re-added or truncating since the request went out
                    self._apply_fetched(tp, state, offsets[tp], data)
                    if tp in throttled and isinstance(data.records, (bytes, bytearray, memoryview)):
                        quota.record(len(data.records))

    def _apply_fetched(
        self, tp: TopicPartition, state: PartitionFetchState, fetch_offset: int, data: PartitionData
    ) -> None:
        """One partition's part of a fetch response (caller holds ``_cond``)."""
        error_code = data.error_code
        if error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._on_out_of_range(tp, state, fetch_offset, data.log_start_offset)
            return
        if error_code != ErrorCode.NONE:
            self._on_partition_error(tp, state, error_code, "Fetch")
            return
        partition = self._partition(tp)
        if partition is None:
            self._partitions.pop(tp, None)
            return
        records = data.records
        try:
            if isinstance(records, (bytes, bytearray, memoryview)) and len(records) > 0:
                info = partition.append_records_to_follower(records, state.leader_epoch)
                if info is None:
                    self._partitions.pop(tp, None)
                    return
            partition.update_follower_high_watermark(data.high_watermark)
            log = partition.log  # the leader's log start, raised by DeleteRecords (Kafka's follower too)
            if data.log_start_offset > log.log_start_offset:
                end = log.log_end_offset
                log.delete_records_before(min(data.log_start_offset, end), limit=end)
        except BrokerError as exc:
            logger.error(  # noqa: TRY400 - the message names the partition, offsets and cause
                "%s: appending %s from offset %d as follower failed: %s; retrying in %d ms",
                self.name,
                tp,
                fetch_offset,
                exc,
                self._config.replica_fetch_backoff_ms,
            )
            self._delay(tp, state.leader_epoch)

    def _on_out_of_range(
        self, tp: TopicPartition, state: PartitionFetchState, fetch_offset: int, leader_log_start: int
    ) -> None:
        partition = self._partition(tp)
        if partition is None:
            self._partitions.pop(tp, None)
            return
        if 0 <= fetch_offset < leader_log_start:
            logger.warning(
                "%s: %s: offset %d is below the leader's log start %d: starting the follower's log there",
                self.name,
                tp,
                fetch_offset,
                leader_log_start,
            )
            if not partition.truncate_fully_and_start_at(leader_log_start, state.leader_epoch):
                self._partitions.pop(tp, None)
            return
        logger.warning(
            "%s: %s: offset %d is past the leader's log end: finding the divergence point again",
            self.name,
            tp,
            fetch_offset,
        )
        state.truncating = True

    def _on_partition_error(
        self, tp: TopicPartition, state: PartitionFetchState, error_code: int, what: str
    ) -> None:
        name = ErrorCode.name_of(error_code)
        if error_code == ErrorCode.FENCED_LEADER_EPOCH:
            logger.info(
                "%s: %s: %s answered %s for epoch %d: waiting for the new state",
                self.name,
                tp,
                what,
                name,
                state.leader_epoch,
            )
            self._partitions.pop(tp, None)
            return
        logger.info(
            "%s: %s: %s answered %s; retrying in %d ms",
            self.name,
            tp,
            what,
            name,
            self._config.replica_fetch_backoff_ms,
        )
        self._delay(tp, state.leader_epoch)
