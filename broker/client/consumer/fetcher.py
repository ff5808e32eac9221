"""The consumer's background fetching: one thread keeps a Fetch in flight per leader and buffers the answers.

For each assigned partition the fetcher keeps two offsets::

    position <= fetch_offset            position: the next offset the caller gets
                                        fetch_offset: the next offset to ask the broker for

and, in between, the batches already fetched (``chunks``, at most ``max_prefetch_bytes`` over all
partitions). While the caller works through what was fetched, the next Fetch to the same broker is already
on its way (paper section 3.2: the consumer pulls; the prefetch hides the round trip). A fetch is a long
poll: the broker holds it up to ``fetch_max_wait_ms`` until ``fetch_min_bytes`` are there, so an iterator
waiting for new messages wakes as soon as the broker has them.

What a response does to a partition (in the connection's reader thread):

* records: each whole batch is CRC-checked (``check_crcs``) and queued; ``fetch_offset`` moves past the
  last whole batch. A partial batch at the end (the response's byte limit cut it) is dropped and fetched
  again; if there is no whole batch at all, the next fetch asks for as many bytes as that batch announces
  (up to ``fetch_max_bytes``, else :class:`~broker.client.errors.FetchTooSmallError`).
* a batch failing its CRC: the batches before it are queued, then a
  :class:`~broker.client.errors.CorruptBatchError` naming the partition and the batch's offset; fetching
  that partition resumes (and meets the same batch again) only after the caller took the error.
* OFFSET_OUT_OF_RANGE: reset to the log start (``earliest``) or end (``latest``) by ListOffsets, dropping
  what was buffered; with ``none`` the caller gets :class:`~broker.client.errors.OffsetOutOfRangeError`.
* NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
  UNKNOWN_TOPIC_OR_PARTITION, a lost connection, other retriable errors: learn the cluster again, and fetch
  again after ``retry_backoff_ms`` from the same ``fetch_offset`` (so after a broker restart or a leader
  change the consumer resumes exactly where it was), from whichever broker the metadata then names. A
  partition whose leader is not known waits for a newer metadata snapshot (whoever refreshes it,
  :meth:`Fetcher.metadata_updated` wakes the fetcher), at most ``retry_backoff_ms``.
* any other error code: the caller gets a :class:`~broker.client.errors.BrokerResponseError`.

Every Fetch carries the partition's ``current_leader_epoch`` from the metadata snapshot it was planned
with (-1 when the source does not know it), so that a deposed or lagging leader refuses it with
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (above) rather than serving from a log that may be truncated.

Responses to fetches sent before a ``seek`` are recognised by the partition's epoch and dropped.

Thread safety: all state is guarded by one lock; the caller's thread, the fetcher thread and the reader
threads take it briefly. The caller-facing methods are meant for one caller thread (plus ``close``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.consumer.partition_fetch_state import FetchChunk, PartitionFetchState
from broker.client.consumer.partition_records import parse_partition_records
from broker.client.errors import (
    AuthenticationError,
    BrokerResponseError,
    ClientError,
    ConsumerClosedError,
    FetchTooSmallError,
    NoOffsetError,
    OffsetOutOfRangeError,
)
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata
from broker.client.metadata.cluster_snapshot import ClusterSnapshot
from broker.client.network.pending_request import PendingRequest
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from broker.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: How often a poll that waits for data looks whether the brokers refused the client's login.
_REFUSAL_CHECK_S = 0.5

#: Looks up offsets: ``{tp: timestamp}`` -> ``{tp: offset}`` (ListOffsets; -1 and -2 are latest/earliest).
OffsetLookup = Callable[[dict[TopicPartition, int]], dict[TopicPartition, int]]

_RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


class Fetcher:
    """Background fetching for a set of partitions (see the module docstring)."""

    def __init__(
        self,
        config: ConsumerConfig,
        pool: BrokerPool,
        metadata: ClusterMetadata,
        list_offsets: OffsetLookup,
    ) -> None:
        self._config = config
        self._pool = pool
        self._metadata = metadata
        self._list_offsets = list_offsets
        self._lock = threading.Lock()
        self._data = threading.Condition(self._lock)  # the caller waits for data here
        self._work = threading.Condition(self._lock)  # the fetcher thread waits for work here
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        self._busy_nodes: set[int] = set()
        self._buffered_bytes = 0
        self._closed = False
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._thread = threading.Thread(target=self._run, name="lumber-consumer-fetcher", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ caller-facing

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch exactly these partitions from now on (kept partitions keep their positions)."""
        wanted = list(dict.fromkeys(partitions))
        reset = self._config.auto_offset_reset
        with self._lock:
            self._check_open()
            for tp in list(self._states):
                if tp not in wanted:
                    state = self._states.pop(tp)
                    self._drop_chunks(state)
            for tp in wanted:
                if tp not in self._states:
                    self._states[tp] = PartitionFetchState(tp, reset)
            self._work.notify()

    def assignment(self) -> list[TopicPartition]:
        return list(self._states)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next record the caller gets from ``tp`` is at ``offset`` (buffered data is dropped)."""
        if offset < 0:
            raise ValueError(f"{tp}: cannot seek to negative offset {offset}")
        with self._lock:
            state = self._state(tp)
            self._drop_chunks(state)
            state.epoch += 1
            state.position = state.fetch_offset = offset
            state.reset = None
            state.error_pending = False
            state.in_flight = False
            state.retry_at = 0.0
            state.fetch_bytes = 0
            self._work.notify()

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        """Move ``tp`` to its log start ('earliest') or end ('latest') before fetching again."""
        with self._lock:
            state = self._state(tp)
            self._drop_chunks(state)
            state.epoch += 1
            state.position = state.fetch_offset = None
            state.reset = strategy
            state.error_pending = False
            state.in_flight = False
            self._work.notify()

    def position(self, tp: TopicPartition, timeout_s: float) -> int:
        """``tp``'s position, waiting (up to ``timeout_s``) for a pending reset; raises its error."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            state = self._state(tp)
            while state.position is None:
                for chunk in state.chunks:
                    if chunk.error is not None and not chunk.batches:
                        state.chunks.remove(chunk)
                        raise self._error_taken(state, chunk.error)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise NoOffsetError(
                        f"{tp}: no position found within {timeout_s:g} s (the offset reset failed)"
                    )
                self._data.wait(remaining)
                self._check_open()
            return state.position

    def high_watermark(self, tp: TopicPartition) -> int:
        """The high watermark of ``tp`` in the last fetch response (-1 before the first)."""
        return self._state(tp).high_watermark

    def take(self, timeout_s: float | None, max_batches: int | None = None) -> list[FetchedBatch]:
        """The buffered batches (waiting up to ``timeout_s`` for some), round-robin over partitions.

        Positions move past the batches returned. An error queued after a partition's batches is raised
        once they are all taken (with nothing else returned in that call).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        out: list[FetchedBatch] = []
        with self._lock:
            while True:
                self._check_open()
                error = self._collect(out, max_batches)
                if out:
                    return out
                if error is not None:
                    raise error
                refused = self._metadata.refused
                if refused is not None:
                    raise refused
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return out
                self._data.wait(
                    min(remaining, _REFUSAL_CHECK_S) if remaining is not None else _REFUSAL_CHECK_S
                )

    def _collect(self, out: list[FetchedBatch], max_batches: int | None) -> ClientError | None:
        """Under the lock: move ready batches to ``out``; return an error that is due (not yet raised)."""
        error: ClientError | None = None
        freed = 0
        for state in self._states.values():
            chunks = state.chunks
            while chunks:
                chunk = chunks[0]
                if chunk.epoch != state.epoch:
                    chunks.popleft()
                    freed += chunk.size_bytes
                    continue
                batches = chunk.batches
                while batches:
                    if max_batches is not None and len(out) >= max_batches:
                        break
                    batch = batches.popleft()
                    position = state.position if state.position is not None else batch.base_offset
                    if batch.next_offset <= position:
                        continue
                    state.position = batch.next_offset
                    if not batch.is_control_batch:
                        out.append(FetchedBatch(state.tp, batch, position))
                if batches:
                    break
                if chunk.error is not None:
                    if out:  # deliver the data first; the error comes on the next call
                        break
                    if error is None:
                        chunks.popleft()
                        freed += chunk.size_bytes
                        error = self._error_taken(state, chunk.error)
                    break
                chunks.popleft()
                freed += chunk.size_bytes
            if max_batches is not None and len(out) >= max_batches:
                break
        if freed:
            self._buffered_bytes -= freed
            self._work.notify()
        return error

    def _error_taken(self, state: PartitionFetchState, error: ClientError) -> ClientError:
        """Under the lock: ``error`` goes to the caller now. Until the caller seeks, the same cause raises
        the same error again at every poll: fetching resumes (and meets the corrupt batch, the offset out
        of range or the broker's error again), and a partition without a position asks again."""
        state.error_pending = False
        if isinstance(error, NoOffsetError):
            state.reset = "none"
        self._work.notify()
        return error

    def metadata_updated(self) -> None:
        """The cluster metadata was refreshed: partitions waiting for their leader look again now."""
        with self._lock:
            self._work.notify()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._work.notify_all()
            self._data.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(10)

    def _is_closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    def _state(self, tp: TopicPartition) -> PartitionFetchState:
        state = self._states.get(tp)
        if state is None:
            raise ClientError(f"{tp} is not assigned to this consumer (assigned: {sorted(self._states)})")
        return state

    def _drop_chunks(self, state: PartitionFetchState) -> None:
        for chunk in state.chunks:
            self._buffered_bytes -= chunk.size_bytes
        state.chunks.clear()

    # ------------------------------------------------------------------------------ fetcher thread

    def _run(self) -> None:
        try:
            while True:
                if self._metadata.needs_update():
                    self._metadata.maybe_update()
                with self._lock:
                    if self._is_closed():
                        return
                    resets = {s.tp: s.reset for s in self._states.values() if s.reset in _RESET_TIMESTAMPS}
                    epochs = {tp: self._states[tp].epoch for tp in resets}
                if resets:
                    self._do_resets(resets, epochs)
                version = self._metadata.version  # first: the snapshot is at least this new
                snapshot = self._metadata.snapshot
                with self._lock:
                    if self._is_closed():
                        return
                    requests, wait_s = self._plan(snapshot, version, time.monotonic())
                    if not requests:
                        if not any(s.reset in _RESET_TIMESTAMPS for s in self._states.values()):
                            self._work.wait(wait_s)
                        continue
                for node_id, partitions in requests.items():
                    self._send_fetch(node_id, partitions, snapshot)
        except Exception:
            log.exception("the consumer's fetcher thread failed")
            with self._lock:
                for state in self._states.values():
                    state.chunks.append(
                        FetchChunk(
                            state.epoch, deque(), 0, ClientError("the consumer's fetcher thread failed")
                        )
                    )
                self._data.notify_all()

    def _do_resets(self, resets: dict[TopicPartition, str], epochs: dict[TopicPartition, int]) -> None:
        try:
            found = self._list_offsets({tp: _RESET_TIMESTAMPS[str(how)] for tp, how in resets.items()})
        except ClientError as exc:
            log.info("offset reset of %s failed, retrying: %s", sorted(resets), exc)
            with self._lock:
                self._work.wait(max(self._retry_backoff_s, 0.05))
            return
        with self._lock:
            for tp, offset in found.items():
                state = self._states.get(tp)
                if state is None or state.epoch != epochs[tp] or state.reset is None:
                    continue
                state.position = state.fetch_offset = offset
                state.reset = None
                log.info("%s: offset reset (%s) to %d", tp, resets[tp], offset)
            self._data.notify_all()

    def _plan(
        self, snapshot: ClusterSnapshot, version: int, now: float
    ) -> tuple[dict[int, list[tuple[PartitionFetchState, int, int, int]]], float]:
        """Under the lock: the fetches to send, by leader, as (state, epoch, fetch offset, max bytes);
        ``snapshot`` is metadata version ``version`` or newer."""
        wait_s = 1.0
        if self._buffered_bytes >= self._config.max_prefetch_bytes:
            return {}, wait_s
        requests: dict[int, list[tuple[PartitionFetchState, int, int, int]]] = {}
        default_bytes = self._config.max_partition_fetch_bytes
        for state in self._states.values():
            if state.reset == "none":
                state.reset = None
                state.error_pending = True
                state.chunks.append(
                    FetchChunk(
                        state.epoch,
                        deque(),
                        0,
                        NoOffsetError(
                            f"{state.tp}: no position, and auto_offset_reset is 'none': seek() first"
                        ),
                    )
                )
                self._data.notify_all()
                continue
            if state.leaderless_at_version not in (-1, version):
                state.leaderless_at_version = -1  # a newer snapshot: no need to wait out the backoff
                state.retry_at = 0.0
            if not state.fetchable(now):
                if state.retry_at > now:
                    wait_s = min(wait_s, state.retry_at - now)
                continue
            leader = snapshot.leader(state.tp.topic, state.tp.partition)
            if leader is None:
                self._metadata.request_update()
                state.leaderless_at_version = version
                state.retry_at = now + self._retry_backoff_s
                wait_s = min(wait_s, max(self._retry_backoff_s, 0.01))
                continue
            state.leaderless_at_version = -1
            if leader.node_id in self._busy_nodes:
                continue
            offset = state.fetch_offset
            if offset is None:  # pragma: no cover - fetchable() checked it
                continue
            requests.setdefault(leader.node_id, []).append(
                (state, state.epoch, offset, max(default_bytes, state.fetch_bytes))
            )
        for node_id, partitions in requests.items():
            self._busy_nodes.add(node_id)
            for state, _, _, _ in partitions:
                state.in_flight = True
        return requests, wait_s

    def _send_fetch(
        self,
        node_id: int,
        partitions: list[tuple[PartitionFetchState, int, int, int]],
        snapshot: ClusterSnapshot,
    ) -> None:
        config = self._config
        by_topic: dict[str, list[FetchPartition]] = {}
        for state, _, offset, max_bytes in partitions:
            by_topic.setdefault(state.tp.topic, []).append(
                FetchPartition(
                    partition=state.tp.partition,
                    current_leader_epoch=snapshot.leader_epoch(state.tp.topic, state.tp.partition),
                    fetch_offset=offset,
                    partition_max_bytes=max_bytes,
                )
            )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
        )
        address = snapshot.brokers.get(node_id)
        if address is None:
            log.info("broker %d is not in the cluster's metadata any more", node_id)
            self._metadata.request_update()
            self._fetch_failed(node_id, partitions)
            return
        try:
            connection = self._pool.get(address)
            connection.send(request, callback=lambda pending: self._on_fetch(node_id, partitions, pending))
        except ClientError as exc:
            log.info("fetch from broker %d failed: %s", node_id, exc)
            if isinstance(exc, AuthenticationError):  # not retriable: poll() raises it
                with self._lock:
                    self._busy_nodes.discard(node_id)
                    for state, epoch, _, _ in partitions:
                        if state.epoch == epoch:
                            state.in_flight = False
                            self._queue_error(state, exc)
                    self._data.notify_all()
                return
            self._metadata.request_update()
            self._fetch_failed(node_id, partitions)

    def _fetch_failed(
        self, node_id: int, partitions: list[tuple[PartitionFetchState, int, int, int]]
    ) -> None:
        retry_at = time.monotonic() + self._retry_backoff_s
        with self._lock:
            self._busy_nodes.discard(node_id)
            for state, epoch, _, _ in partitions:
                if state.epoch == epoch:
                    state.in_flight = False
                    state.retry_at = retry_at
            self._work.notify()

    def _on_fetch(
        self,
        node_id: int,
        partitions: list[tuple[PartitionFetchState, int, int, int]],
        pending: PendingRequest,
    ) -> None:
        """A fetch response (or failure), in the connection's reader thread."""
        if pending.error is not None:
            # a fetch in flight when the consumer closes fails as its connection closes: not news
            log.log(
                logging.DEBUG if self._closed else logging.INFO,
                "fetch from broker %d failed: %s",
                node_id,
                pending.error,
            )
            self._metadata.request_update()
            self._fetch_failed(node_id, partitions)
            return
        response: FetchResponse = pending.response
        answers = {
            (topic.topic, part.partition_index): part
            for topic in response.responses
            for part in topic.partitions
        }
        retry_at = time.monotonic() + self._retry_backoff_s
        check_crcs = self._config.check_crcs
        with self._lock:
            self._busy_nodes.discard(node_id)
            for state, epoch, offset, max_bytes in partitions:
                if state.epoch != epoch or self._states.get(state.tp) is not state:
                    continue  # a seek or reassignment happened meanwhile
                state.in_flight = False
                answer = answers.get((state.tp.topic, state.tp.partition))
                if answer is None:
                    state.retry_at = retry_at
                    continue
                code = answer.error_code
                if code == ErrorCode.NONE:
                    state.high_watermark = answer.high_watermark
                    state.log_start_offset = answer.log_start_offset
                    self._accept(state, offset, max_bytes, answer.records, check_crcs)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(state, offset, answer.log_start_offset, answer.high_watermark)
                else:
                    error = BrokerResponseError(
                        code, f"fetch at offset {offset}", topic=state.tp.topic, partition=state.tp.partition
                    )
                    if error.needs_metadata:
                        self._metadata.request_update()
                    if error.retriable:
                        log.info("%s", error)
                        state.retry_at = retry_at
                    else:
                        state.error_pending = True
                        state.chunks.append(FetchChunk(state.epoch, deque(), 0, error))
            self._data.notify_all()
            self._work.notify()

    def _accept(
        self,
        state: PartitionFetchState,
        offset: int,
        max_bytes: int,
        records: object,
        check_crcs: bool,
    ) -> None:
        """Under the lock: queue the whole batches of one partition's answer."""
        if not isinstance(records, bytes | bytearray | memoryview) or len(records) == 0:
            return
        parsed = parse_partition_records(records, state.tp, offset, check_crcs=check_crcs)
        if parsed.batches or parsed.error is not None:
            state.fetch_bytes = 0
            state.fetch_offset = parsed.next_offset
            state.chunks.append(
                FetchChunk(state.epoch, deque(parsed.batches), parsed.size_bytes, parsed.error)
            )
            self._buffered_bytes += parsed.size_bytes
            if parsed.error is not None:
                state.error_pending = True
            return
        if parsed.needed_bytes:
            if parsed.needed_bytes > self._config.fetch_max_bytes:
                self._queue_error(
                    state,
                    FetchTooSmallError(
                        f"{state.tp}: the batch at offset {offset} takes {parsed.needed_bytes} bytes, more "
                        f"than fetch_max_bytes={self._config.fetch_max_bytes} allows"
                    ),
                )
                return
            state.fetch_bytes = max(parsed.needed_bytes, max_bytes + 1)

    def _queue_error(self, state: PartitionFetchState, error: ClientError) -> None:
        state.error_pending = True
        state.chunks.append(FetchChunk(state.epoch, deque(), 0, error))

    def _out_of_range(
        self, state: PartitionFetchState, offset: int, log_start: int, high_watermark: int
    ) -> None:
        strategy = self._config.auto_offset_reset
        detail = f"the log holds offsets {log_start} to {high_watermark}" if log_start >= 0 else ""
        if strategy == "none":
            self._queue_error(
                state, OffsetOutOfRangeError(state.tp.topic, state.tp.partition, offset, detail)
            )
            return
        log.info(
            "%s: offset %d is out of range (%s); resetting to the %s offset",
            state.tp,
            offset,
            detail,
            strategy,
        )
        self._drop_chunks(state)
        state.epoch += 1
        state.position = state.fetch_offset = None
        state.reset = strategy
        self._work.notify()
