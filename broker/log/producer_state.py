"""The idempotent producer's state of one partition (KIP-98; Kafka's ``ProducerStateManager``).

For every producer id that appended to the partition, a :class:`ProducerStateEntry` keeps its epoch and
the metadata of its last five batches (:data:`NUM_BATCHES_TO_RETAIN`, the most a producer has in flight):
first and last sequence, first and last offset, max timestamp. Before a batch with a producer id is
appended, :meth:`ProducerStateManager.prepare` checks it the way Kafka's ``ProducerAppendInfo`` does:

* a batch whose epoch and sequence range equal one of the five is a **duplicate** (a retry of a batch
  that was appended): it is not appended again and the producer gets the original offsets, with error
  NONE, as Kafka answers since 1.0 (DUPLICATE_SEQUENCE_NUMBER is never sent to a producer), and the
  original batch's max timestamp as ``log_append_time`` (Kafka's answer, whatever the timestamp type);
* an epoch below the producer's is fenced: :class:`~broker.log.errors.InvalidProducerEpochError`
  (INVALID_PRODUCER_EPOCH, what Kafka answers a Produce since 2.7; PRODUCER_FENCED is for transactions);
* a new (higher) epoch must start at sequence 0, otherwise OUT_OF_ORDER_SEQUENCE_NUMBER;
* with the same epoch, the first sequence must follow the last one (``last + 1``, wrapping from
  2^31 - 1 to 0), otherwise :class:`~broker.log.errors.OutOfOrderSequenceError`
  (OUT_OF_ORDER_SEQUENCE_NUMBER);
* a producer id the partition does not know is accepted at any sequence, as Kafka does since KIP-360
  (its state may have expired or its batches been deleted by retention); UNKNOWN_PRODUCER_ID is not sent.

Batches without a producer id (-1) are not tracked. Kafka's transactions (and so its coordinator epoch
and transactional markers) are not part of Lumber.

Snapshots: the state as of an offset is written beside the segments as ``<20-digit offset>.snapshot``
(:func:`broker.log.file_names.snapshot_file_name`): when a segment rolls (at the new segment's base offset)
and at a clean shutdown (at the log end offset). At load, the newest snapshot at or below the log end
offset is read and the batches after it are replayed from the segments; a snapshot that is torn or fails
its CRC is reported, deleted, and the next older one (or the log from its start) is used instead. The file
format (Lumber's own, shaped like Kafka's ``ProducerSnapshot`` v1 but keeping all five batches of each
producer, so that a retry after a restart is still recognised; all integers big-endian)::

    version          int16   1
    crc              uint32  CRC-32C of every byte after this field
    producer_count   int32
    producer_count times:
        producer_id      int64
        producer_epoch   int16
        last_timestamp   int64   when the broker last appended a batch of the producer (ms)
        batch_count      int8    1 to 5, oldest first
        batch_count times:
            first_sequence   int32
            last_sequence    int32
            first_offset     int64
            last_offset      int64
            timestamp        int64   the batch's max timestamp (ms)

Expiry: a producer that appended nothing for ``producer_id_expiration_ms`` (Kafka's
``producer.id.expiration.ms``, default 1 day) is forgotten by
:meth:`ProducerStateManager.remove_expired_producers` (and when a snapshot is loaded); its next batch is
then accepted at any sequence. Where Lumber differs: the time is the broker's clock when it last appended
a batch of the producer (a batch replayed from the log at load counts as appended then), not the batch's
max timestamp as in Kafka, so that a producer sending old record timestamps (a backfill, a mirror) is not
forgotten at once.

Concurrency: a :class:`ProducerStateManager` is not thread-safe; its owner, the partition's
:class:`~broker.log.log.Log`, calls every method under its append lock, so that the sequence check and
the append it guards are one atomic step per partition.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c

from broker.log.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    LogStorageError,
    OutOfOrderSequenceError,
)
from broker.log.file_names import parse_snapshot_file_name, snapshot_file_name, temp_path
from broker.record.batch_header import NO_PRODUCER_ID
from broker.record.record_batch import RecordBatch

if TYPE_CHECKING:
    from broker.log.segment import Segment

logger = logging.getLogger(__name__)

#: Batches kept per producer: the most a producer may have in flight (``max.in.flight.requests``).
NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_VERSION = 1
_MAX_SEQUENCE = 2**31 - 1

_VERSION_CRC = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqqq")


def last_sequence_of(base_sequence: int, last_offset_delta: int) -> int:
    """The last sequence of a batch: ``base_sequence + last_offset_delta``, wrapping past 2^31 - 1 to 0."""
    if base_sequence > _MAX_SEQUENCE - last_offset_delta:
        return last_offset_delta - (_MAX_SEQUENCE - base_sequence) - 1
    return base_sequence + last_offset_delta


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == _MAX_SEQUENCE)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: its sequence range, its offsets, its max timestamp."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


class ProducerStateEntry:
    """One producer's epoch and last batches in one partition (Kafka's ``ProducerStateEntry``)."""

    __slots__ = ("batches", "last_timestamp_ms", "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp_ms = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def add_batch(self, producer_epoch: int, batch: BatchMetadata, now_ms: int) -> None:
        """Record a batch appended at ``now_ms``; a new epoch forgets the batches of the old one."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_timestamp_ms = max(self.last_timestamp_ms, now_ms)

    def find_duplicate(
        self, producer_epoch: int, first_sequence: int, last_sequence: int
    ) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batches)})"
        )


class ProducerAppend:
    """The checks of one append in progress (Kafka's ``ProducerAppendInfo``): the sequences each producer
    reached in it, so that several batches of one producer in one request are checked in order."""

    __slots__ = ("_manager", "_reached", "_where")

    def __init__(self, manager: ProducerStateManager, where: str) -> None:
        self._manager = manager
        self._where = where
        #: producer id -> (epoch, last sequence) after the batches checked so far in this append.
        self._reached: dict[int, tuple[int, int]] = {}

    def check(
        self, producer_id: int, epoch: int, first: int, last_offset_delta: int, offset: int
    ) -> BatchMetadata | None:
        """Check a batch of ``producer_id`` (epoch, base sequence ``first``) to be appended at ``offset``;
        returns the original batch when it is a duplicate.

        Raises :class:`InvalidProducerEpochError` or :class:`OutOfOrderSequenceError`.
        """
        last = last_sequence_of(first, last_offset_delta)
        entry = self._manager.entry(producer_id)
        reached = self._reached.get(producer_id)
        if reached is None:
            if entry is None:
                self._reached[producer_id] = (epoch, last)
                return None  # unknown producer: any sequence (KIP-360)
            duplicate = entry.find_duplicate(epoch, first, last)
            if duplicate is not None:
                return duplicate
            current_epoch, current_last = entry.producer_epoch, entry.last_sequence
        else:
            current_epoch, current_last = reached
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"{self._where}: producer {producer_id} at offset {offset} has epoch {epoch}, smaller than "
                f"the last seen epoch {current_epoch} (a newer producer with this id fenced it)"
            )
        if epoch != current_epoch:
            if first != 0:
                raise OutOfOrderSequenceError(
                    f"{self._where}: producer {producer_id} at offset {offset}: a new epoch {epoch} "
                    f"(last seen {current_epoch}) must start at sequence 0, this batch starts at {first}"
                )
        elif not _in_sequence(current_last, first):
            raise OutOfOrderSequenceError(
                f"{self._where}: producer {producer_id} epoch {epoch} at offset {offset}: out of order "
                f"sequence number {first}, expected {(current_last + 1) & _MAX_SEQUENCE} (the last "
                f"appended batch ended at {current_last})"
            )
        self._reached[producer_id] = (epoch, last)
        return None

    def check_batches(
        self, batches: tuple[RecordBatch, ...], next_offset: int
    ) -> tuple[BatchMetadata | None, tuple[RecordBatch, ...]]:
        """:meth:`check` every batch of an append starting at ``next_offset``: the first duplicate found
        and the batches to append (all but the duplicates; ``batches`` itself when there is none). Raises
        as :meth:`check` does, with nothing written."""
        offset = next_offset
        duplicate: BatchMetadata | None = None
        to_append: list[RecordBatch] = []
        for batch in batches:
            producer_id = batch.producer_id
            if producer_id != NO_PRODUCER_ID:
                found = self.check(
                    producer_id, batch.producer_epoch, batch.base_sequence, batch.last_offset_delta, offset
                )
                if found is not None:
                    duplicate = duplicate or found
                    logger.info(
                        "%s: producer %d epoch %d sequences [%d, %d] were appended at offsets [%d, %d]: not "
                        "appended again",
                        self._where,
                        producer_id,
                        batch.producer_epoch,
                        found.first_sequence,
                        found.last_sequence,
                        found.first_offset,
                        found.last_offset,
                    )
                    continue
            to_append.append(batch)
            offset += batch.last_offset_delta + 1
        return duplicate, tuple(to_append) if duplicate is not None else batches


class ProducerStateManager:
    """Every producer's state in one partition folder, with its snapshots (see the module docstring).

    Not thread-safe: the owning log calls it under its lock.
    """

    def __init__(self, directory: Path, *, where: str, producer_id_expiration_ms: int) -> None:
        self._dir = directory
        self._where = where
        self._expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        #: Reports of snapshots that could not be read at load (file and why), for the recovery result.
        self.corrupt_snapshots: list[str] = []

    @property
    def producer_id_expiration_ms(self) -> int:
        return self._expiration_ms

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The producers' state by producer id (a live view: do not change it)."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    # ------------------------------------------------------------------------------------ appending

    def prepare(self) -> ProducerAppend:
        """Start checking the batches of one append."""
        return ProducerAppend(self, self._where)

    def update(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        first_offset: int,
        last_offset: int,
        max_timestamp_ms: int,
        now_ms: int,
    ) -> None:
        """Record a batch appended at ``[first_offset, last_offset]`` at ``now_ms`` on the broker's clock
        (after :meth:`prepare` checked it, or replayed from the log at load). Batches without a producer
        id are ignored."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id, epoch)
        entry.add_batch(
            epoch,
            BatchMetadata(
                first_sequence=base_sequence,
                last_sequence=last_sequence_of(base_sequence, last_offset - first_offset),
                first_offset=first_offset,
                last_offset=last_offset,
                timestamp_ms=max_timestamp_ms,
            ),
            now_ms,
        )

    def evict_below(self, log_start_offset: int) -> list[int]:
        """Forget producers whose last batch lies below ``log_start_offset`` (deleted by retention), as
        Kafka's ``truncateHead`` does; returns their ids."""
        gone = [
            pid
            for pid, e in self._producers.items()
            if e.batches and e.batches[-1].last_offset < log_start_offset
        ]
        for producer_id in gone:
            del self._producers[producer_id]
        return gone

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers whose last batch is ``producer_id_expiration_ms`` old; returns their ids."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp_ms >= self._expiration_ms
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        if expired:
            logger.info("%s: expired producer ids %s", self._where, expired)
        return expired

    def clear(self) -> None:
        self._producers.clear()

    # ------------------------------------------------------------------------------------ snapshots

    def rebuild(self, segments: Sequence[Segment], log_end_offset: int, now_ms: int) -> None:
        """At load: the newest valid snapshot, then the batches of ``segments`` after it replayed."""
        snapshot_offset = self.load_latest_snapshot(log_end_offset, now_ms)
        first = segments[0].base_offset
        start = first if snapshot_offset is None else max(snapshot_offset, first)
        replayed = 0
        update = self.update
        for segment in segments:
            if segment.next_offset <= start:
                continue
            for header in segment.batch_headers(start, segment.size_bytes):
                # baseOffset 0, lastOffsetDelta 6, maxTimestamp 8, producerId 9, epoch 10, baseSequence 11
                if header[9] != NO_PRODUCER_ID:
                    update(
                        header[9], header[10], header[11], header[0], header[0] + header[6], header[8], now_ms
                    )
                replayed += 1
        if replayed or (snapshot_offset is None and log_end_offset > 0):
            logger.info(
                "%s: rebuilt the state of %d producers from %s and %d batches of the log from offset %d",
                self._where,
                len(self.producers),
                "no snapshot" if snapshot_offset is None else f"the snapshot at offset {snapshot_offset}",
                replayed,
                start,
            )

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files in the folder, ascending."""
        offsets = []
        for entry in self._dir.iterdir():
            offset = parse_snapshot_file_name(entry.name)
            if offset is not None:
                offsets.append(offset)
        return sorted(offsets)

    def snapshot_path(self, offset: int) -> Path:
        return self._dir / snapshot_file_name(offset)

    def take_snapshot(self, offset: int) -> Path:
        """Write the state as of ``offset`` (every batch below it applied) to ``<offset>.snapshot``:
        a temp file renamed over. Not fsynced (it runs under the log's append lock at every roll): a
        snapshot that a power loss tears or loses fails its CRC or is missing at load, and the state is
        rebuilt from an older one and the log."""
        path = self.snapshot_path(offset)
        temp = temp_path(path)
        data = encode_snapshot(self._producers.values())
        try:
            temp.write_bytes(data)
            temp.replace(path)
        except OSError as exc:
            raise LogStorageError(f"{path}: cannot write the producer-state snapshot: {exc}") from exc
        return path

    def load_latest_snapshot(self, log_end_offset: int, now_ms: int) -> int | None:
        """Load the newest readable snapshot at or below ``log_end_offset``; returns its offset (None when
        there is none: the state is then empty). Snapshots past the log end (left by a truncation) and
        unreadable ones are deleted; unreadable ones are reported in :attr:`corrupt_snapshots`."""
        self._producers.clear()
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset > log_end_offset:
                logger.info(
                    "%s: deleting producer snapshot %s, past the log end offset %d",
                    self._where,
                    path,
                    log_end_offset,
                )
                path.unlink(missing_ok=True)
                continue
            try:
                entries = decode_snapshot(path.read_bytes(), where=str(path))
            except (CorruptSnapshotError, OSError) as exc:
                logger.warning(
                    "%s: ignoring producer snapshot %s (the state is rebuilt from the log): %s",
                    self._where,
                    path,
                    exc,
                )
                self.corrupt_snapshots.append(f"{path}: {exc}")
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if now_ms - entry.last_timestamp_ms < self._expiration_ms:
                    self._producers[entry.producer_id] = entry
            return offset
        return None

    def delete_snapshots_below(self, offset: int) -> list[int]:
        """Delete the snapshots below ``offset`` (the log start offset after retention)."""
        doomed = [o for o in self.snapshot_offsets() if o < offset]
        for o in doomed:
            self.snapshot_path(o).unlink(missing_ok=True)
        return doomed

    def delete_snapshots_above(self, offset: int) -> list[int]:
        """Delete the snapshots past ``offset`` (the log end offset after a truncation)."""
        doomed = [o for o in self.snapshot_offsets() if o > offset]
        for o in doomed:
            self.snapshot_path(o).unlink(missing_ok=True)
        return doomed


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The snapshot file bytes of ``entries`` (format in the module docstring)."""
    body = bytearray()
    kept = [e for e in entries if e.batches]
    body += _COUNT.pack(len(kept))
    for entry in kept:
        body += _PRODUCER.pack(
            entry.producer_id, entry.producer_epoch, entry.last_timestamp_ms, len(entry.batches)
        )
        for b in entry.batches:
            body += _BATCH.pack(
                b.first_sequence, b.last_sequence, b.first_offset, b.last_offset, b.timestamp_ms
            )
    return _VERSION_CRC.pack(SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, *, where: str) -> list[ProducerStateEntry]:
    """The entries of a snapshot file; :class:`CorruptSnapshotError` naming what is wrong and where."""
    if len(data) < _VERSION_CRC.size + _COUNT.size:
        raise CorruptSnapshotError(
            where, f"{len(data)} bytes, shorter than the {_VERSION_CRC.size + 4}-byte header"
        )
    version, crc = _VERSION_CRC.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(where, f"version {version}, expected {SNAPSHOT_VERSION}")
    computed = crc32c.crc32c(data[_VERSION_CRC.size :])
    if computed != crc:
        raise CorruptSnapshotError(where, f"CRC-32C {computed:#010x} does not match the stored {crc:#010x}")
    position = _VERSION_CRC.size
    (count,) = _COUNT.unpack_from(data, position)
    position += _COUNT.size
    entries = []
    try:
        for _ in range(count):
            producer_id, epoch, last_timestamp, batch_count = _PRODUCER.unpack_from(data, position)
            position += _PRODUCER.size
            if not 1 <= batch_count <= NUM_BATCHES_TO_RETAIN or producer_id < 0:
                raise CorruptSnapshotError(
                    where,
                    f"producer {producer_id} epoch {epoch} with {batch_count} batches at byte {position}",
                )
            entry = ProducerStateEntry(producer_id, epoch)
            for _ in range(batch_count):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, position)))
                position += _BATCH.size
            entry.last_timestamp_ms = last_timestamp
            entries.append(entry)
    except struct.error as exc:
        raise CorruptSnapshotError(where, f"cut short at byte {position} of {len(data)}") from exc
    if position != len(data):
        raise CorruptSnapshotError(where, f"{len(data) - position} bytes after the last producer")
    return entries
