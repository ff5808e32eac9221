"""Lumber's consumer of an explicit set of partitions: pull by offset, with background prefetch (paper 3.2).

Usage::

    consumer = Consumer(ConsumerConfig(bootstrap_servers=["127.0.0.1:9092"], auto_offset_reset="earliest"),
                        partitions=[TopicPartition("events", 0)])
    for record in consumer.messages(timeout_ms=5000):   # blocks until messages arrive; ends after 5 s idle
        handle(record.offset, record.key, record.value, record.header("host"))
    consumer.seek(TopicPartition("events", 0), 1234)    # the next record is offset 1234
    consumer.seek_to_time(TopicPartition("events", 0), ts_ms)
    for chunk in consumer.poll_values(timeout_ms=100):  # the fast path: offsets and values per batch
        ...
    consumer.close()

Three ways to read, from most to least convenient:

* :meth:`Consumer.messages` / ``iter(consumer)`` / :meth:`Consumer.poll`: one
  :class:`~broker.client.consumer.consumer_record.ConsumerRecord` per record (key, value, headers, timestamp);
* :meth:`Consumer.poll_values`: per batch, the offsets and values
  (:class:`~broker.client.consumer.fetched_batch.PartitionValues`), without an object per record;
* :meth:`Consumer.poll_batches`: the CRC-checked batches themselves
  (:class:`~broker.client.consumer.fetched_batch.FetchedBatch`, zero-copy views of the fetch response).

Positions: ``position(tp)`` is the offset of the next record the caller gets. A partition without a position
(just assigned) or whose position fell out of the log is reset by ``auto_offset_reset``: ``earliest`` (the
log start), ``latest`` (the log end) or ``none`` (the caller gets
:class:`~broker.client.errors.NoOffsetError` / :class:`~broker.client.errors.OffsetOutOfRangeError` and
must seek). Every fetched batch's CRC-32C is
checked on receipt; a corrupt one raises :class:`~broker.client.errors.CorruptBatchError` naming the
partition and offset once the records before it were handed out. Groups and committed offsets are the
consumer group's job (ZooKeeper), not this class's.

Thread safety: one thread uses a consumer (as with Kafka's); ``close()`` may come from another thread.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch, PartitionValues, decode_values, load_decoder
from broker.client.consumer.fetcher import Fetcher
from broker.client.errors import (
    AuthenticationError,
    BrokerConnectionError,
    BrokerResponseError,
    ClientError,
    ConsumerError,
    CorruptBatchError,
)
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.metadata.cluster_snapshot import ClusterSnapshot
from broker.protocol.api_key import ApiKey
from broker.protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Slack for fetch responses above ``fetch_max_bytes`` (headers, and the first batch, which may be larger).
_RESPONSE_SLACK_BYTES = 64 * 1024 * 1024


class Consumer:
    """Reads assigned partitions by offset; see the module docstring."""

    def __init__(
        self,
        config: ConsumerConfig | None = None,
        *,
        bootstrap_servers: Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        partitions: Iterable[TopicPartition] = (),
    ) -> None:
        self.config = config = config if config is not None else ConsumerConfig()
        servers = list(bootstrap_servers) if bootstrap_servers is not None else list(config.bootstrap_servers)
        self._pool = BrokerPool(
            client_id=config.client_id,
            request_timeout_ms=config.request_timeout_ms,
            connect_timeout_ms=config.connect_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            max_response_bytes=config.fetch_max_bytes + _RESPONSE_SLACK_BYTES,
            security=config.client_security("consumer"),
        )
        self._metadata = ClusterMetadata(
            metadata_source(
                servers,
                zookeeper_connect,
                self._pool,
                section="consumer",
                timeout_ms=config.connect_timeout_ms,
            ),
            retry_backoff_ms=config.retry_backoff_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            allow_auto_create=False,
        )
        load_decoder()  # so that the first poll_values() does not pause to import numpy
        self._fetcher = Fetcher(config, self._pool, self._metadata, self._list_offsets)
        self._decoded: deque[ConsumerRecord] = deque()
        self._closed = False
        assigned = list(partitions)
        if assigned:
            self.assign(assigned)

    # ------------------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions`` (replacing the previous set; kept ones keep their positions)."""
        wanted = list(partitions)
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"assign() takes TopicPartition objects, got {tp!r}")
        self._metadata.add_topics({tp.topic for tp in wanted})
        keep = set(wanted)
        remaining = [r for r in self._decoded if TopicPartition(r.topic, r.partition) in keep]
        self._decoded.clear()
        self._decoded.extend(remaining)
        self._fetcher.assign(wanted)

    def assignment(self) -> list[TopicPartition]:
        return self._fetcher.assignment()

    def partitions_for(self, topic: str, timeout_ms: int | None = None) -> list[TopicPartition]:
        """Every partition of ``topic``, waiting up to ``timeout_ms`` (default ``request_timeout_ms``) for
        the cluster to know it; raises :class:`~broker.client.errors.UnknownTopicError`."""
        wait_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        return [TopicPartition(topic, p.partition) for p in self._metadata.wait_for_topic(topic, wait_ms)]

    # ------------------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next record of ``tp`` handed out is at ``offset`` (an offset outside the log is reset by
        ``auto_offset_reset`` when fetched)."""
        self._drop_decoded(tp)
        self._fetcher.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start offset of each partition (all assigned ones when none are named)."""
        targets = list(partitions) or self.assignment()
        for tp, offset in self._list_offsets(dict.fromkeys(targets, EARLIEST_TIMESTAMP)).items():
            self.seek(tp, offset)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the end of each partition's log (only messages produced from now on)."""
        targets = list(partitions) or self.assignment()
        for tp, offset in self._list_offsets(dict.fromkeys(targets, LATEST_TIMESTAMP)).items():
            self.seek(tp, offset)

    def seek_to_time(self, tp: TopicPartition, timestamp_ms: int) -> int:
        """Move to the first record of ``tp`` with a timestamp at or after ``timestamp_ms`` (ListOffsets);
        when there is none, to the end of the log. Returns the new position."""
        if timestamp_ms < 0:
            raise ValueError(f"{tp}: seek_to_time needs a timestamp >= 0, got {timestamp_ms}")
        offset = self._list_offsets({tp: timestamp_ms})[tp]
        if offset < 0:
            offset = self._list_offsets({tp: LATEST_TIMESTAMP})[tp]
        self.seek(tp, offset)
        return offset

    def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset with a timestamp at or after the given one (``None``: none)."""
        found = self._list_offsets(dict(timestamps))
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset after the last exposed message of each partition (its high watermark)."""
        return self._list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP))

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record of ``tp`` the caller gets (resolving a pending reset, waiting up
        to ``timeout_ms``, default ``request_timeout_ms``)."""
        for record in self._decoded:
            if record.topic == tp.topic and record.partition == tp.partition:
                return record.offset
        wait_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        return self._fetcher.position(tp, wait_ms / 1000)

    def high_watermark(self, tp: TopicPartition) -> int:
        """``tp``'s high watermark as of the last fetch response (-1 before the first)."""
        return self._fetcher.high_watermark(tp)

    def _drop_decoded(self, tp: TopicPartition) -> None:
        if self._decoded:  # in place: an iterator in progress holds this deque
            remaining = [r for r in self._decoded if r.topic != tp.topic or r.partition != tp.partition]
            self._decoded.clear()
            self._decoded.extend(remaining)

    # ------------------------------------------------------------------------------ reading

    def poll_batches(self, timeout_ms: int = 0, max_batches: int | None = None) -> list[FetchedBatch]:
        """The fetched batches (waiting up to ``timeout_ms`` for some); positions move past them."""
        if self._decoded:
            raise ConsumerError(
                f"{len(self._decoded)} records already decoded by poll() or the iterator are not handed "
                "out yet: read them with poll() before switching to poll_batches()"
            )
        return self._fetcher.take(_seconds(timeout_ms), max_batches)

    def poll_values(self, timeout_ms: int = 0) -> list[PartitionValues]:
        """Offsets and values of the fetched records, per batch (waiting up to ``timeout_ms`` for some).

        The batches fetched so far are decoded together, in one vectorised pass when they hold enough
        records (:func:`~broker.client.consumer.fetched_batch.decode_values`)."""
        out: list[PartitionValues] = []
        if self._decoded:
            out.extend(self._leftover_values())
            timeout_ms = 0
        batches = self._fetcher.take(_seconds(timeout_ms) if not out else 0.0)
        try:
            decoded = decode_values(batches)
        except CorruptBatchError:
            return self._values_before_corruption(out, batches)
        out.extend(values for values in decoded if values.values)
        return out

    def _values_before_corruption(
        self, out: list[PartitionValues], batches: list[FetchedBatch]
    ) -> list[PartitionValues]:
        """Some batch of ``batches`` (taken, so positions moved past them) does not decode: return the
        values of the batches before it, and put each partition's position back to its first batch not
        returned, so that nothing is skipped; the corrupt batch raises :class:`CorruptBatchError` (at its
        base offset, the position stays there) when it comes first."""
        for index, batch in enumerate(batches):
            try:
                values = batch.values()
            except CorruptBatchError:
                self._rewind(batches[index:])
                if out:
                    return out
                raise
            if values.values:
                out.append(values)
        return out  # pragma: no cover - decode_values raised, so one of them does

    def _leftover_values(self) -> list[PartitionValues]:
        grouped: dict[TopicPartition, PartitionValues] = {}
        for record in self._decoded:
            tp = TopicPartition(record.topic, record.partition)
            entry = grouped.get(tp)
            if entry is None:
                entry = grouped[tp] = PartitionValues(tp, [], [])
            entry.offsets.append(record.offset)  # type: ignore[attr-defined]
            entry.values.append(record.value)
        self._decoded.clear()
        return list(grouped.values())

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records (all that were fetched when ``None``), waiting up to ``timeout_ms``
        for the first."""
        if not self._decoded:
            self._fill(_seconds(timeout_ms))
        decoded = self._decoded
        if max_records is None or max_records >= len(decoded):
            out = list(decoded)
            decoded.clear()
            return out
        return [decoded.popleft() for _ in range(max_records)]

    def _fill(self, timeout_s: float | None) -> bool:
        batches = self._fetcher.take(timeout_s)
        for index, batch in enumerate(batches):
            try:
                self._decoded.extend(batch.records())
            except CorruptBatchError:
                self._rewind(batches[index:])  # the records before it are handed out first
                if self._decoded:
                    return True
                raise
        return bool(self._decoded)

    def _rewind(self, undelivered: list[FetchedBatch]) -> None:
        """Put each partition of ``undelivered`` (taken, so their positions moved past them) back to its
        first record not handed out, keeping what was decoded before them."""
        rewind: dict[TopicPartition, int] = {}
        for batch in undelivered:
            rewind.setdefault(batch.topic_partition, max(batch.base_offset, batch.from_offset))
        for tp, offset in rewind.items():
            self._fetcher.seek(tp, offset)

    def messages(self, timeout_ms: int | None = None) -> Iterator[ConsumerRecord]:
        """Every record, as it arrives: blocks while there is nothing new. With ``timeout_ms`` the
        iteration ends once that long passed without a record; ``None`` waits forever."""
        timeout_s = None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000
        decoded = self._decoded
        while True:
            if not decoded:
                deadline = None if timeout_s is None else time.monotonic() + timeout_s
                while not decoded:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return
                    self._fill(remaining)
            yield decoded.popleft()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        timeout = self.config.iterator_timeout_ms
        return self.messages(None if timeout < 0 else timeout)

    # ------------------------------------------------------------------------------ offsets lookup

    def _list_offsets(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets for each partition, from its leader, with the leader epoch the metadata names.

        Retriable errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH, a lost connection...) are retried within ``request_timeout_ms``, after learning
        the cluster again when the error says the leader moved (at most once per ``retry_backoff_ms``).
        """
        result: dict[TopicPartition, int] = {}
        todo = dict(timestamps)
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        backoff_s = max(self.config.retry_backoff_ms / 1000, 0.01)
        last: ClientError | None = None
        while todo:
            if self._closed:
                raise ConsumerError("the consumer is closed")
            if time.monotonic() > deadline:
                raise last or ConsumerError(f"no offsets for {sorted(todo)} within request_timeout_ms")
            self._metadata.add_topics({tp.topic for tp in todo})
            leaderless = any(self._metadata.snapshot.leader(tp.topic, tp.partition) is None for tp in todo)
            if leaderless or self._metadata.needs_update():
                try:
                    self._metadata.update()
                except AuthenticationError:
                    raise
                except ClientError as exc:
                    last = exc
                else:
                    self._fetcher.metadata_updated()
            snapshot = self._metadata.snapshot
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                leader = snapshot.leader(tp.topic, tp.partition)
                if leader is None:
                    why = (
                        snapshot.topic_error(tp.topic)
                        if tp.topic not in snapshot.topics
                        else "its broker is down"
                    )
                    last = ConsumerError(f"{tp}: no live leader known ({why})")
                    continue
                by_leader.setdefault(leader.node_id, []).append(tp)
            for node_id, tps in by_leader.items():
                try:
                    answers = self._list_offsets_at(snapshot, node_id, tps, todo)
                except AuthenticationError:
                    raise
                except BrokerConnectionError as exc:
                    last = exc
                    self._metadata.request_update()
                    continue
                for tp, (code, offset) in answers.items():
                    if code == 0:
                        result[tp] = offset
                        del todo[tp]
                        continue
                    error = BrokerResponseError(code, "list offsets", topic=tp.topic, partition=tp.partition)
                    if not error.retriable:
                        raise error
                    last = error
                    if error.needs_metadata:
                        self._metadata.request_update()
            if todo:
                time.sleep(backoff_s)
        return result

    def _list_offsets_at(
        self,
        snapshot: ClusterSnapshot,
        node_id: int,
        tps: list[TopicPartition],
        timestamps: dict[TopicPartition, int],
    ) -> dict[TopicPartition, tuple[int, int]]:
        connection = self._pool.get(snapshot.brokers[node_id])
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                ListOffsetsPartition(
                    partition_index=tp.partition,
                    current_leader_epoch=snapshot.leader_epoch(tp.topic, tp.partition),
                    timestamp=timestamps[tp],
                )
            )
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[ListOffsetsTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        )
        connection.api_version(int(ApiKey.LIST_OFFSETS))
        response: ListOffsetsResponse = connection.request(request)
        answers: dict[TopicPartition, tuple[int, int]] = {}
        for topic in response.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.partition_index)
                if tp in timestamps:
                    answers[tp] = (part.error_code, part.offset)
        return answers

    # ------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Stop fetching and close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.close()
        self._pool.close()
        self._metadata.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _seconds(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000
