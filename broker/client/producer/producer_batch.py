"""The producer's unit of work: the records bound for one partition, sent as one record batch v2.

A batch keeps what it is handed as segments (:class:`~broker.record.record_encoder.Segment`: runs of values
sharing a timestamp, key and headers) and encodes them once, when it is sent
(:func:`~broker.record.record_encoder.encode_records`), so that ``send`` and ``send_many`` cost a few
tuple operations per call, not an encoding per record. Sizes are upper bounds
(:func:`~broker.record.record_encoder.record_bound`): ``size_bytes`` never undercounts what the records
take once encoded, which is what ``batch_size``, ``max_request_size`` and ``buffer_memory`` are checked
against. Every record carries the producer's header bytes (the producing ``host`` first), encoded once.

A *raw* batch (:meth:`ProducerBatch.raw`, for
:meth:`~broker.client.producer.producer.Producer.send_batch`) holds whole record batches v2 encoded elsewhere
instead of segments, sent as they are, one after the other in the request's records field (the broker assigns
their offsets in that order); more of them may be added until it is drained. An idempotent producer stamps
its producer id, epoch and base sequence on a batch when it is first drained (a raw batch's parts get
consecutive sequences, their CRC recomputed); retries send the same bytes, so the broker recognises them.
A producer that is not idempotent clears another producer's id from a raw batch's parts (they come from
another cluster, whose producer ids mean nothing here), and leaves the other parts as they are.

Life of a batch, each step a method of the batch (nothing outside it writes its fields; they may be read).
Its :class:`BatchState` says where it is; a change the table below does not allow raises
:class:`~broker.client.errors.IllegalBatchStateError` (Kafka's ``FinalState``: a batch has one outcome)::

    OPEN --append*--> closed by the accumulator (full / linger / flush; still OPEN, in its queue)
      --mark_drained (stamp, first time: idempotence)--> DRAINED --start_attempt--> in a request
      --response / error--> complete --> SUCCEEDED or FAILED (final: no change after it)
                 |  retriable error within limits: note_error, requeue
                 +--> OPEN again (head of its partition; the same bytes are sent again)
      OPEN past delivery_timeout_ms, or the producer aborted: expiry_error, then complete --> FAILED

    from       to                          by
    OPEN       DRAINED, FAILED             mark_drained; complete with an error (expired, aborted)
    DRAINED    OPEN, SUCCEEDED, FAILED     requeue; complete

A batch made with ``keep_records`` (the producer has a
:class:`~broker.client.producer.delivery_listener.DeliveryListener`) keeps its segments after it is built,
until it is done, so that the listener can read its records (:meth:`ProducerBatch.record_runs`) once they are
acknowledged; otherwise the segments are dropped as soon as the bytes are built.

Thread safety: appends and the state changes of the accumulator and the sender happen under the
accumulator's lock (:mod:`broker.client.producer.record_accumulator`); :meth:`ProducerBatch.start_attempt`
(the build) runs in the sender thread after the batch left its queue (no appends after that); completion is
done once by whichever thread receives the outcome, and :meth:`ProducerBatch.wait` may be called from any
thread.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple

from broker.client.errors import ClientError, DeliveryTimeoutError, IllegalBatchStateError
from broker.record.batch_header import HEADER_SIZE, NO_PARTITION_LEADER_EPOCH
from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch, restamp_crc, set_producer_fields
from broker.record.record_batch_builder import pack_batch
from broker.record.record_encoder import Segment, encode_records, key_part, record_bound, varint

log = logging.getLogger(__name__)

_MAX_SEQUENCE = 2**31 - 1
_NO_ID = -1

#: Called with the metadata of one record (``None`` on failure) and the error (``None`` on success).
DeliveryCallback = Callable[["RecordMetadata | None", "BaseException | None"], None]

_EVENT_LOCK = threading.Lock()
_BOUND_BASE = record_bound(0, 0, 0)
_new_tuple = tuple.__new__


class BatchState(enum.Enum):
    """Where a batch is in its life (the module docstring's table); SUCCEEDED and FAILED are final."""

    #: in its partition's queue: records are appended while it is the last; the sender may drain it
    OPEN = "open"
    #: taken for a request: its bytes are sent, the outcome awaited
    DRAINED = "drained"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    #: a member is only ever equal to itself: its identity is its hash. Enum's own hashes the name in
    #: Python, about 0.17 us, which every batch paid four times or more in the tables below (issue 39)
    __hash__ = object.__hash__


# The members as module constants: ``BatchState.OPEN`` is a class attribute lookup through the enum's
# descriptor in Python 3.11 (about 0.13 us, against 0.01 for a global), on every batch's every change.
_OPEN = BatchState.OPEN
_DRAINED = BatchState.DRAINED
_SUCCEEDED = BatchState.SUCCEEDED
_FAILED = BatchState.FAILED
#: state -> the states it may change to
_NEXT_STATES: dict[BatchState, frozenset[BatchState]] = {
    _OPEN: frozenset({_DRAINED, _FAILED}),
    _DRAINED: frozenset({_OPEN, _SUCCEEDED, _FAILED}),
    _SUCCEEDED: frozenset(),
    _FAILED: frozenset(),
}
_FINAL_STATES = frozenset({_SUCCEEDED, _FAILED})


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where one record landed: its offset (-1 with ``acks`` 0) and its timestamp."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class DeliveryRange:
    """Consecutive records of one ``send_many`` call that landed together: ``[base_offset, next_offset)``."""

    topic: str
    partition: int
    base_offset: int
    record_count: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count if self.base_offset >= 0 else -1


class RecordRun(NamedTuple):
    """Consecutive records of a batch that share a timestamp: how many, and their values' bytes."""

    timestamp_ms: int
    record_count: int
    value_bytes: int


class ProducerBatch:
    """Records for one partition (see the module docstring). Its attributes are read-only outside it."""

    __slots__ = (
        "_event",
        "attempts",
        "base_offset",
        "base_sequence",
        "callbacks",
        "codec",
        "count",
        "created_at",
        "encoded",
        "error",
        "first_timestamp_ms",
        "is_raw",
        "keep_records",
        "last_error",
        "level",
        "max_timestamp_ms",
        "partition",
        "producer_epoch",
        "producer_id",
        "raw_parts",
        "reserved_bytes",
        "retry_at",
        "segments",
        "size_bytes",
        "state",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        codec: CompressionType,
        created_at: float,
        *,
        keep_records: bool = False,
        level: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.codec = codec
        #: the codec's level (None: its default)
        self.level = level
        self.created_at = created_at
        #: keep the segments until done, for a delivery listener (see the module docstring)
        self.keep_records = keep_records
        self.segments: list[Segment] = []
        self.count = 0
        #: an upper bound of the encoded records' bytes (the batch header excluded)
        self.size_bytes = 0
        self.first_timestamp_ms = -1
        self.max_timestamp_ms = -1
        #: a raw batch's bytes (its parts as given); see buffer_bytes
        self.reserved_bytes = 0
        self.callbacks: list[tuple[int, int, DeliveryCallback]] | None = None
        self.state = _OPEN
        self.attempts = 0
        self.retry_at = 0.0
        self.encoded: bytes | None = None
        #: whole record batches to send as they are (a raw batch), None for a batch of segments
        self.raw_parts: list[bytes | memoryview] | None = None
        #: made by :meth:`raw`: its records are never read (not even by a delivery listener)
        self.is_raw = False
        #: The idempotent producer's stamp, set when the batch is first drained and kept by its retries
        #: (the broker recognises a retry by it); -1 when the producer is not idempotent.
        self.producer_id = _NO_ID
        self.producer_epoch = _NO_ID
        self.base_sequence = _NO_ID
        self.base_offset = -1
        self.error: BaseException | None = None
        self.last_error: BaseException | None = None
        self._event: threading.Event | None = None

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, records={self.count}, bytes<={self.size_bytes}, "
            f"attempts={self.attempts}, {self.state.value})"
        )

    @property
    def done(self) -> bool:
        """Whether the batch has its outcome (SUCCEEDED or FAILED)."""
        return self.state in _FINAL_STATES

    @property
    def drained(self) -> bool:
        """Whether the batch was taken for a request and is not back in its queue nor done."""
        return self.state is _DRAINED

    def _change_state(self, to: BatchState) -> None:
        """Move to ``to``, or raise :class:`IllegalBatchStateError` when the table does not allow it."""
        if to not in _NEXT_STATES[self.state]:
            raise IllegalBatchStateError(
                f"{self!r}: a {self.state.value} batch cannot become {to.value}"
                + (" (it already has its outcome)" if self.state in _FINAL_STATES else "")
            )
        self.state = to

    # -------------------------------------------------------------------------------------- appending

    def append(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None, headers: bytes, max_bytes: int
    ) -> int:
        """Add one record (``headers`` already encoded) if the batch stays within ``max_bytes`` (the first
        record always goes in); returns its index in the batch, or -1 when it does not fit."""
        index = self.count
        part = b"\x01" if key is None else varint(len(key)) + key
        # record_bound(), inlined: this runs once per send()
        size = _BOUND_BASE + len(part) + len(headers) + (0 if value is None else len(value))
        if index:
            if self.size_bytes + size > max_bytes:
                return -1
            if timestamp_ms > self.max_timestamp_ms:  # noqa: PLR1730 - cheaper than max() here
                self.max_timestamp_ms = timestamp_ms
        else:
            self.first_timestamp_ms = self.max_timestamp_ms = timestamp_ms
        self.segments.append(_new_tuple(Segment, ((value,), 0, 1, timestamp_ms, part, headers)))
        self.size_bytes += size
        self.count = index + 1
        return index

    def append_values(
        self,
        timestamp_ms: int,
        key: bytes | None,
        values: Sequence[bytes | None],
        start: int,
        headers: bytes,
        max_bytes: int,
    ) -> int:
        """Append ``values[start:]`` (which must not change afterwards) with one timestamp and key while the
        batch stays within ``max_bytes`` (the first record always goes in); returns the index after the
        last value appended."""
        part = key_part(key)
        fixed = record_bound(0, len(part), len(headers))
        room = max_bytes - self.size_bytes
        try:
            sizes = list(accumulate(map(len, values[start:] if start else values)))  # type: ignore[arg-type]
        except TypeError:  # null values
            sizes = list(accumulate(0 if v is None else len(v) for v in values[start:]))
        # how many fit: the largest n with sizes[n - 1] + n * fixed <= room (room shrinks by fixed each)
        n = 0
        if sizes:
            low, high = 0, len(sizes)
            while low < high:  # sizes[i] + (i + 1) * fixed grows with i: binary search
                middle = (low + high) // 2
                if sizes[middle] + (middle + 1) * fixed <= room:
                    low = middle + 1
                else:
                    high = middle
            n = low
            if n == 0 and self.count == 0:
                n = 1
        if n == 0:
            return start
        if self.count == 0:
            self.first_timestamp_ms = self.max_timestamp_ms = timestamp_ms
        elif timestamp_ms > self.max_timestamp_ms:
            self.max_timestamp_ms = timestamp_ms
        self.segments.append(Segment(values, start, start + n, timestamp_ms, part, headers))
        self.size_bytes += sizes[n - 1] + n * fixed
        self.count += n
        return start + n

    @classmethod
    def raw(cls, topic: str, partition: int, created_at: float) -> ProducerBatch:
        """An empty raw batch: :meth:`append_raw` adds whole record batches to it."""
        batch = cls(topic, partition, CompressionType.NONE, created_at)
        batch.raw_parts = []
        batch.is_raw = True
        return batch

    def append_raw(
        self, data: bytes | memoryview, record_count: int, max_bytes: int, max_parts: int = 2**31 - 1
    ) -> int:
        """Add one whole record batch v2 (``data``, ``record_count`` records) if this raw batch stays
        within ``max_bytes`` and ``max_parts`` record batches (the first always goes in); returns its first
        record's index, or -1 when it does not fit (or the batch is not raw, or already built). The batch
        holds ``len(data)`` bytes of ``buffer_memory`` more once it is in."""
        parts = self.raw_parts
        if parts is None or len(parts) >= max_parts:
            return -1
        size = len(data)
        total = self.size_bytes + HEADER_SIZE if parts else 0  # size_bytes excludes one batch header
        if parts and total + size > max_bytes:
            return -1
        index = self.count
        parts.append(data)
        self.reserved_bytes += size
        self.size_bytes = total + size - HEADER_SIZE
        self.count = index + record_count
        return index

    def add_callback(self, index: int, timestamp_ms: int, callback: DeliveryCallback) -> None:
        if self.callbacks is None:
            self.callbacks = []
        self.callbacks.append((index, timestamp_ms, callback))

    @property
    def buffer_bytes(self) -> int:
        """The ``buffer_memory`` this batch holds until it is done: its records' size bound (what the
        accumulator added as they were appended), or a raw batch's bytes."""
        return self.reserved_bytes if self.is_raw else self.size_bytes

    # ---------------------------------------------------------------------------------------- sending

    def mark_drained(self) -> None:
        """The batch left its queue for a request (no appends after this)."""
        self._change_state(_DRAINED)

    def stamp(self, producer_id: int, producer_epoch: int, base_sequence: int) -> bool:
        """Give the batch the idempotent producer's id, epoch and first sequence, unless it has them from
        an earlier attempt (a retry keeps its stamp: the broker recognises it by it); True if stamped now."""
        if self.producer_id >= 0:
            return False
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
        return True

    def start_attempt(self) -> bytes:
        """The bytes to send for one more attempt (built on the first, then the same bytes)."""
        self.attempts += 1
        encoded = self.encoded
        return encoded if encoded is not None else self.build()

    def note_error(self, error: BaseException) -> None:
        """An attempt failed with ``error`` (kept as the cause of a later timeout)."""
        self.last_error = error

    def requeue(self, retry_at: float) -> None:
        """Back in its partition's queue after a retriable error, to be sent again from ``retry_at``."""
        self._change_state(_OPEN)
        self.retry_at = retry_at

    def expiry_error(self, now: float, delivery_timeout_ms: int) -> DeliveryTimeoutError:
        """The error of a batch not delivered within ``delivery_timeout_ms`` (``now`` monotonic seconds)."""
        cause = self.last_error
        return DeliveryTimeoutError(
            f"{self.count} records for {self.topic}-{self.partition} not delivered within "
            f"delivery_timeout_ms={delivery_timeout_ms} ({now - self.created_at:.1f} s, "
            f"{self.attempts} attempts)" + (f"; last error: {cause}" if cause else ""),
            cause,
        )

    def build(self) -> bytes:
        """The record batch v2 bytes (base offset 0; the broker assigns offsets). Built once, then reused."""
        encoded = self.encoded
        if encoded is not None:
            return encoded
        if self.raw_parts is not None:
            parts = _stamp_raw_parts(
                self.raw_parts, self.producer_id, self.producer_epoch, self.base_sequence
            )
            encoded = self.encoded = b"".join(parts)
            self.raw_parts = None
            return encoded
        count = self.count
        first_timestamp_ms = self.first_timestamp_ms
        encoded = self.encoded = pack_batch(  # by position: base offset 0, then the producer fields
            encode_records(self.segments, count, first_timestamp_ms),
            count,
            first_timestamp_ms,
            self.max_timestamp_ms,
            self.codec,
            0,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            NO_PARTITION_LEADER_EPOCH,
            False,
            self.level,
        )
        if not self.keep_records:
            self.segments = []  # the values are in the bytes now
        return encoded

    def record_runs(self) -> Iterator[RecordRun]:
        """The batch's records as runs sharing a timestamp, in order (for a delivery listener: kept until
        the batch is done when the batch was made with ``keep_records``). A raw batch has none (its records
        are not read), nor has a batch whose segments were dropped once built."""
        for segment in self.segments:
            start, stop = segment.start, segment.stop
            if stop - start == 1:
                value = segment.values[start]
                size = 0 if value is None else len(value)
            else:
                size = _value_bytes(segment.values, start, stop)
            yield RecordRun(segment.timestamp_ms, stop - start, size)

    # ------------------------------------------------------------------------------------- completion

    def complete(self, base_offset: int, error: BaseException | None) -> None:
        """Record the outcome (offset on success, ``error`` on failure), wake waiters, run callbacks. A batch
        has one outcome: a second raises :class:`IllegalBatchStateError`, and so does a success of a batch
        that was never sent (not DRAINED)."""
        with _EVENT_LOCK:
            self._change_state(_SUCCEEDED if error is None else _FAILED)
            self.base_offset = base_offset
            self.error = error
            event = self._event
            if self.keep_records and self.encoded is not None:  # (otherwise dropped once built)
                self.segments = []  # read by the listener before: the bytes hold the values
        if event is not None:
            event.set()
        callbacks = self.callbacks
        if callbacks:
            self._run_callbacks(callbacks)

    def _run_callbacks(self, callbacks: list[tuple[int, int, DeliveryCallback]]) -> None:
        for index, timestamp_ms, callback in callbacks:
            metadata = None if self.error is not None else self.metadata(index, timestamp_ms)
            try:
                callback(metadata, self.error)
            except Exception:
                log.exception("delivery callback for %s-%d failed", self.topic, self.partition)

    def metadata(self, index: int, timestamp_ms: int) -> RecordMetadata:
        """Where record ``index`` landed (offset -1 when unknown: ``acks`` 0)."""
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, timestamp_ms)

    def wait(self, timeout_s: float | None) -> bool:
        """Wait until the batch is done; ``False`` if ``timeout_s`` passed first."""
        with _EVENT_LOCK:
            event = self._event
            if event is None and not self.done:
                event = self._event = threading.Event()
        return True if event is None else event.wait(timeout_s)


def _value_bytes(values: Sequence[bytes | None], start: int, stop: int) -> int:
    chunk = values[start:stop]
    try:
        return sum(map(len, chunk))  # type: ignore[arg-type]
    except TypeError:  # null values
        return sum(len(v) for v in chunk if v is not None)


def _stamp_raw_parts(
    parts: Sequence[bytes | bytearray | memoryview], producer_id: int, producer_epoch: int, base_sequence: int
) -> list[bytes | bytearray | memoryview]:
    """Whole record batches with this producer's id, epoch and consecutive sequences from
    ``base_sequence`` (copies, their CRC-32C recomputed: the producer fields lie inside what it covers).
    Without a producer id (-1), a batch that carries another producer's id (from another cluster) is
    cleared to -1 instead, so that this cluster does not check it against its own producers; the others are
    kept as they are."""
    stamped: list[bytes | bytearray | memoryview] = []
    sequence = base_sequence
    for part in parts:
        batch = RecordBatch(part)
        if producer_id == _NO_ID and batch.producer_id == _NO_ID:
            stamped.append(part)
            continue
        data = bytearray(part)
        set_producer_fields(data, producer_id, producer_epoch, sequence)
        restamp_crc(data)
        stamped.append(data)
        if producer_id != _NO_ID:
            sequence = (sequence + batch.record_count) & _MAX_SEQUENCE
    return stamped


class RecordFuture(tuple[ProducerBatch, int, int]):
    """The outcome of one :meth:`~broker.client.producer.producer.Producer.send`: where the record went, or
    why not.

    A tuple of (batch, index in the batch, timestamp): the accumulator makes one per ``send()`` with
    ``tuple.__new__(RecordFuture, (batch, index, timestamp_ms))``, without the Python frame of a
    constructor (``send()`` at batch size 1 is the producer's bottleneck)."""

    __slots__ = ()

    def __new__(cls, batch: ProducerBatch, index: int, timestamp_ms: int) -> RecordFuture:
        return tuple.__new__(cls, (batch, index, timestamp_ms))

    def done(self) -> bool:
        return self[0].done

    def result(self, timeout_s: float | None = None) -> RecordMetadata:
        """The record's :class:`RecordMetadata`; raises the delivery error, or :class:`TimeoutError`."""
        batch, index, timestamp_ms = self
        if not batch.wait(timeout_s):
            raise TimeoutError(
                f"record {index} of a batch for {batch.topic}-{batch.partition} not delivered "
                f"within {timeout_s} s"
            )
        if batch.error is not None:
            raise batch.error
        return batch.metadata(index, timestamp_ms)

    def exception(self, timeout_s: float | None = None) -> BaseException | None:
        """The delivery error, ``None`` on success; raises :class:`TimeoutError` if not done in time."""
        batch = self[0]
        if not batch.wait(timeout_s):
            raise TimeoutError(
                f"a record for {batch.topic}-{batch.partition} not delivered within {timeout_s} s"
            )
        return batch.error


class BulkDelivery:
    """The outcome of one :meth:`~broker.client.producer.producer.Producer.send_many`: one range per batch
    used."""

    __slots__ = ("_parts", "accepted")

    def __init__(self) -> None:
        self._parts: list[tuple[ProducerBatch, int, int]] = []
        #: how many of the values were accepted (all, unless send_many raised part-way)
        self.accepted = 0

    def _add(self, batch: ProducerBatch, first_index: int, count: int) -> None:
        self._parts.append((batch, first_index, count))
        self.accepted += count

    def done(self) -> bool:
        return all(batch.done for batch, _, _ in self._parts)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every part is done; ``False`` on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for batch, _, _ in self._parts:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not batch.wait(remaining):
                return False
        return True

    def result(self, timeout_s: float | None = None) -> list[DeliveryRange]:
        """Where the records landed, in the order given; raises the first delivery error, or
        :class:`TimeoutError`."""
        if not self.wait(timeout_s):
            raise TimeoutError(f"{self.accepted} records not all delivered within {timeout_s} s")
        ranges: list[DeliveryRange] = []
        for batch, first, count in self._parts:
            if batch.error is not None:
                raise batch.error
            base = batch.base_offset + first if batch.base_offset >= 0 else -1
            ranges.append(DeliveryRange(batch.topic, batch.partition, base, count))
        return ranges

    def errors(self) -> list[BaseException]:
        """The delivery errors of the parts that are done and failed."""
        return [batch.error for batch, _, _ in self._parts if batch.done and batch.error is not None]


def is_retriable(error: BaseException) -> bool:
    return isinstance(error, ClientError) and error.retriable
