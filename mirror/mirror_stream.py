"""One mirror stream: a group stream of the source copied, batch by batch and pipelined, into the target.

A :class:`MirrorStream` runs on its own thread (:class:`~mirror.mirror.Mirror` starts one per stream) and
repeats, without ever waiting for one send before the next:

1. finish what the target answered: per partition, in the order sent, every leading *unit* (one source
   batch) the target acknowledged is counted (audit, ``copied``) and its partition's position moved past it
   (:meth:`MessageStream.acknowledge`): the group commits exactly those positions, the next offset after the
   last contiguous acknowledged record, and nothing beyond (``acks=all``);
2. if the window is full (``max_in_flight_records`` / ``max_in_flight_bytes`` sent and not acknowledged),
   wait for answers; else take whole batches from the source (:meth:`MessageStream.poll_batches`) and send
   each to the same partition of the target (:meth:`Producer.send_batch`).

**Pass-through.** A fetched batch is sent as it is: the same bytes, CRC included (records keep key, value,
timestamp, headers, compression; the target assigns the offsets). It is re-encoded only when that is not
possible: the partition's position falls inside it (after a commit or a rewind, the records before
``from_offset`` are not copied again), the producer cannot send it whole (larger than its
``max_request_size``), or the target refused it (a non-retriable error, e.g. a codec or size it does not
take): then its records from ``from_offset`` on are written into new batches, uncompressed when the target
refused it, with the same keys, values, timestamps and headers (a LogAppendTime batch's records keep that
time, as CreateTime). A control batch (transaction marker: no data) is skipped.

**Ordering.** The producer keeps one request in flight per broker, and a partition's batches are queued in
the order sent, so a partition's records land in source order. If a unit fails after the producer's own
retries, the stream waits until every later unit of its partition is answered too, then sends all of them
again from the failed one, after ``send_retry_backoff_ms``: nothing is lost, records the target already had
are there twice (at-least-once), and only around such a failure can order break.

**Rebalances.** The stream is created with explicit positions, so a partition that moves away is committed
at its acknowledged position: the group waits (``release_timeout_ms``) for its records in flight to be
acknowledged, and commits no further than that if they are not. Units of a partition the stream lost, or
that restarted elsewhere (a new first batch that does not continue the last one), are forgotten: they are
never acknowledged, so they can only be copied twice, never skipped.

Thread safety: :meth:`run` on one thread; the delivery callbacks (producer's threads) only mark units done
under the stream's condition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import ClientError, GroupClosedError, GroupError, RecordTooLargeError
from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import RecordMetadata
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from mirror.mirror_audit import MirrorAuditCounter
from mirror.mirror_config import MirrorConfig

log = logging.getLogger(__name__)

#: How long a stream with sends in flight waits for source data before it looks at the answers again.
_BUSY_POLL_MS = 10
#: Most bytes of one re-encoded batch (well inside any target's max_message_bytes).
_REENCODED_BATCH_BYTES = 256 * 1024


@dataclass(eq=False)
class _Unit:
    """One source batch (its records from ``first_offset``) on its way to the target."""

    batch: FetchedBatch
    first_offset: int
    next_offset: int
    records: int
    payloads: list[bytes | memoryview]
    size_bytes: int
    outstanding: int = 0
    error: BaseException | None = None
    passed_through: bool = True


@dataclass
class _Lane:
    """A partition's units in the order sent; ``next_offset`` is where the next fetched batch must start."""

    next_offset: int
    units: deque[_Unit] = field(default_factory=deque)
    retry_at: float = 0.0


class MirrorStream:
    """Copies one :class:`MessageStream` of the source into the target (see the module docstring)."""

    def __init__(
        self,
        stream: MessageStream,
        producer: Producer,
        config: MirrorConfig,
        *,
        stopping: threading.Event,
        audit: MirrorAuditCounter | None = None,
        on_copied: Callable[[int], None] = lambda _n: None,
        drain_deadline: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self._producer = producer
        self._config = config
        self._stopping = stopping
        self._audit = audit
        self._on_copied = on_copied
        self._drain_deadline = drain_deadline
        producer_config = producer.config
        self._split_bytes = max(
            HEADER_SIZE + 1, min(producer_config.batch_size, producer_config.max_request_size // 2)
        )
        self._cond = threading.Condition()
        self._lanes: dict[TopicPartition, _Lane] = {}
        self._in_flight_records = 0
        self._in_flight_bytes = 0
        #: batches passed through unchanged / re-encoded (for tests and logs)
        self.passed_through = 0
        self.reencoded = 0

    # ------------------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Copy until the mirror stops, then finish what is in flight (until the drain deadline)."""
        config = self._config
        while not self._stopping.is_set():
            self._settle()
            if self._window_full():
                with self._cond:
                    self._cond.wait(config.poll_timeout_ms / 1000)
                continue
            timeout_ms = _BUSY_POLL_MS if self._in_flight_records else config.poll_timeout_ms
            try:
                batches = self.stream.poll_batches(timeout_ms, max_records=config.max_records_per_poll)
            except GroupClosedError:
                break
            for batch in batches:
                self._send(batch)
        self._drain()

    def _drain(self) -> None:
        """Stopping: settle the units in flight until none is left or the drain deadline passes."""
        while self._in_flight_records or self._in_flight_bytes:
            self._settle()
            remaining = self._drain_deadline() - time.monotonic()
            if remaining <= 0 or not (self._in_flight_records or self._in_flight_bytes):
                break
            with self._cond:
                self._cond.wait(min(remaining, 0.05))
        if self._in_flight_records:
            log.warning(
                "mirror stream %s: stopped with %d records not acknowledged by the target; their offsets are "
                "not committed (the next owner copies them again)",
                self.stream.name,
                self._in_flight_records,
            )

    @property
    def in_flight_records(self) -> int:
        return self._in_flight_records

    def _window_full(self) -> bool:
        return (
            self._in_flight_records >= self._config.max_in_flight_records
            or self._in_flight_bytes >= self._config.max_in_flight_bytes
        )

    # ------------------------------------------------------------------------------ sending

    def _send(self, batch: FetchedBatch) -> None:
        tp = batch.topic_partition
        lane = self._lanes.get(tp)
        if lane is None or lane.next_offset != batch.from_offset:
            if lane is not None:
                self._forget(lane)  # the partition restarted elsewhere (moved, rewound): a new lane
            lane = self._lanes[tp] = _Lane(batch.next_offset)
        lane.next_offset = batch.next_offset
        header = batch.batch
        if header.is_control_batch:
            payloads: list[bytes | memoryview] = []
            passed = True
        elif batch.from_offset <= header.base_offset:
            payloads, passed = [header.buffer], True
        else:
            payloads, passed = self._reencode(batch, header.compression), False
        records = batch.next_offset - batch.from_offset
        size = sum(len(p) for p in payloads)
        unit = _Unit(
            batch, batch.from_offset, batch.next_offset, records, payloads, size, passed_through=passed
        )
        lane.units.append(unit)
        self._in_flight_records += records
        self._in_flight_bytes += size
        self._transmit(unit)

    def _transmit(self, unit: _Unit) -> None:
        """Send ``unit``'s payloads; a payload the producer refuses at once fails the unit (or, too large to
        send whole, makes it re-encoded in smaller batches)."""
        tp = unit.batch.topic_partition
        with self._cond:
            unit.error = None
            unit.outstanding = len(unit.payloads)

        def done(_metadata: RecordMetadata | None, error: BaseException | None) -> None:
            with self._cond:
                unit.outstanding -= 1
                if error is not None and unit.error is None:
                    unit.error = error
                if unit.outstanding <= 0:
                    self._cond.notify_all()

        for index, payload in enumerate(unit.payloads):
            try:
                self._producer.send_batch(tp.topic, tp.partition, payload, on_delivery=done)
            except RecordTooLargeError:
                if unit.passed_through:
                    self._reencode_unit(unit, unit.batch.batch.compression)
                    self._transmit(unit)
                    return
                raise
            except ClientError as exc:
                with self._cond:
                    unit.outstanding -= len(unit.payloads) - index
                    if unit.error is None:
                        unit.error = exc
                    self._cond.notify_all()
                return

    def _reencode_unit(self, unit: _Unit, codec: CompressionType) -> None:
        payloads = self._reencode(unit.batch, codec)
        size = sum(len(p) for p in payloads)
        self._in_flight_bytes += size - unit.size_bytes
        unit.payloads, unit.size_bytes, unit.passed_through = payloads, size, False

    def _reencode(self, fetched: FetchedBatch, codec: CompressionType) -> list[bytes | memoryview]:
        """The records of ``fetched`` from its ``from_offset`` on, in new batches of at most about
        ``_split_bytes`` bytes each (the first record of a batch always goes in)."""
        limit = min(self._split_bytes, _REENCODED_BATCH_BYTES)
        out: list[bytes | memoryview] = []
        builder = RecordBatchBuilder(codec)
        for record in fetched.records():
            headers = record.headers
            need = RecordBatchBuilder.estimate_size_in_bytes(record.key, record.value, headers)
            if builder.record_count and builder.size_in_bytes() + need > limit:
                out.append(builder.build())
                builder = RecordBatchBuilder(codec)
            builder.append(record.timestamp_ms, record.key, record.value, headers)
        if builder.record_count:
            out.append(builder.build())
        return out

    # ------------------------------------------------------------------------------ answers

    def _settle(self) -> None:
        """Acknowledge every partition's leading acknowledged units; send failed ones again."""
        finished: list[_Unit] = []
        positions: dict[TopicPartition, int] = {}
        failed: list[_Lane] = []
        with self._cond:
            for tp, lane in self._lanes.items():
                units = lane.units
                while units and units[0].outstanding <= 0 and units[0].error is None:
                    unit = units.popleft()
                    finished.append(unit)
                    positions[tp] = unit.next_offset
                if units and units[0].outstanding <= 0 and all(u.outstanding <= 0 for u in units):
                    failed.append(lane)
        if finished:
            records = sum(u.records for u in finished)
            self._in_flight_records -= records
            self._in_flight_bytes -= sum(u.size_bytes for u in finished)
            copied = [u for u in finished if u.payloads]  # not the control batches
            self.passed_through += sum(1 for u in copied if u.passed_through)
            self.reencoded += sum(1 for u in copied if not u.passed_through)
            if self._audit is not None:
                self._audit.copied_batches([u.batch for u in copied])
            self._acknowledge(positions)
            self._on_copied(sum(u.records for u in copied))
        for lane in failed:
            self._retry(lane)

    def _acknowledge(self, positions: dict[TopicPartition, int]) -> None:
        try:
            self.stream.acknowledge(positions)
        except GroupError:
            for tp, offset in positions.items():  # one of them is stale: find it, forget its lane
                try:
                    self.stream.acknowledge({tp: offset})
                except GroupError as exc:
                    log.info("mirror stream %s: %s; its units in flight are forgotten", self.stream.name, exc)
                    lane = self._lanes.pop(tp, None)
                    if lane is not None:
                        self._forget(lane)

    def _retry(self, lane: _Lane) -> None:
        """Every unit of ``lane`` is answered and the first failed: send them all again after the backoff."""
        now = time.monotonic()
        first = lane.units[0]
        if lane.retry_at == 0.0:
            lane.retry_at = now + self._config.send_retry_backoff_ms / 1000
            tp = first.batch.topic_partition
            log.warning(
                "mirror: the target did not take %s offsets %d..%d (%d units from there on are sent again "
                "in %d ms): %s",
                tp,
                first.first_offset,
                first.next_offset - 1,
                len(lane.units),
                self._config.send_retry_backoff_ms,
                first.error,
            )
            return
        if now < lane.retry_at:
            return
        lane.retry_at = 0.0
        for unit in list(lane.units):
            refused = isinstance(unit.error, ClientError) and not unit.error.retriable
            if refused and unit.passed_through and unit.payloads:
                self._reencode_unit(unit, CompressionType.NONE)  # the target may not take it as it is
            self._transmit(unit)

    def _forget(self, lane: _Lane) -> None:
        """The partition restarted elsewhere: its units in flight are never acknowledged."""
        self._in_flight_records -= sum(u.records for u in lane.units)
        self._in_flight_bytes -= sum(u.size_bytes for u in lane.units)
        lane.units.clear()
