"""Deep verification of a partition's files on disk (Kafka's ``kafka-dump-log --deep-iteration``).

``lumber log verify`` and ``lumber broker start --verify-logs`` run :func:`verify_partition` on each
``<topic>-<partition>`` folder. Recovery only checks the batches after the recovery point, and only after
an unclean shutdown; data damaged on disk after a *clean* shutdown is served as it is (as Kafka does).
This walk finds it. Per segment, in base-offset order:

1. every batch of the ``.log``, framed by the one segment framer
   (:class:`~broker.log.segment_framer.SegmentFramer`, recovery's too): a header that fits (else a torn
   tail: the file ends inside a batch), a plausible ``batchLength``, then
   :func:`~broker.log.log_validator.validate_stored_batch`: magic, CRC, ``lastOffsetDelta`` against the
   record count, and every record walked (and decompressed) by the one record walker of
   :mod:`broker.record.record_walker`; base offsets increasing within the segment (gaps
   are legal: the log cleaner leaves them), none below the segment's base offset, and each segment
   starting at or after the offset where the previous one ended (the cleaner drops emptied batches, so a
   cleaned segment may end before the next one's base offset, or hold no batch at all: gaps between
   segments are legal too; an overlap is damage);
2. the ``.index``: its invariants (:meth:`OffsetIndex.load`), and each entry pointing at the start of a
   batch with that base offset;
3. the ``.timeindex``: its invariants (:meth:`TimeIndex.load`), each entry's offset inside the segment.

Besides damage, the walk warns (:class:`EmptySegment`, not damage: consumers read past it) about each
segment that holds batches but no record, only emptied ones. Kafka's cleaner (and Lumber's, the same way)
keeps an emptied batch only for an idempotent producer's last sequence or as the last batch below the
cleaned section's end, and merges small segments, so consumers never meet a run of such segments; a run
of them means a cleaner kept more than Kafka's would. A segment with no batch at all (a cleaned group whose
every record was superseded) is no warning: reads step over it.

A batch whose header is intact but whose CRC or records are not is reported and the walk goes on with
the next batch (its length is trusted, as Kafka's dump does); an impossible length or a torn tail ends the
segment's walk. Each :class:`Damage` names the file, the byte position and the offset. Reads only: safe
on the folder of a stopped broker; on a running one the active segment may change under the walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle
from broker.log.file_names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_path,
)
from broker.log.log_validator import validate_stored_batch
from broker.log.offset_index import ENTRY_SIZE, OffsetIndex
from broker.log.segment_framer import SegmentFramer, offset_regression
from broker.log.time_index import TimeIndex
from broker.record.errors import CorruptRecordError, InvalidRecordError
from broker.record.record_batch import RecordBatch
from broker.record.topic_partition import TopicPartition

__all__ = ["Damage", "EmptySegment", "PartitionReport", "find_partition_dirs", "verify_partition"]

_TIME_ENTRY_SIZE = 12


@dataclass(frozen=True, slots=True)
class Damage:
    """One damaged place: the file, the byte position in it, the offset there (when known), what is wrong."""

    file: Path
    position: int
    offset: int | None
    reason: str

    def __str__(self) -> str:
        offset = "" if self.offset is None else f", offset {self.offset}"
        return f"{self.file}: position {self.position}{offset}: {self.reason}"


@dataclass(frozen=True, slots=True)
class EmptySegment:
    """A warning: a segment that holds ``batches`` batches and not one record."""

    file: Path
    base_offset: int
    batches: int

    def __str__(self) -> str:
        return f"{self.file}: {self.batches} batch(es) from offset {self.base_offset}, none holding a record"


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """What :func:`verify_partition` walked in one partition folder, and the damage it found."""

    directory: Path
    segments: int
    batches: int
    records: int
    #: The offset after the last intact batch walked (the partition's log end if nothing is damaged).
    next_offset: int
    damage: tuple[Damage, ...]
    #: Segments holding only empty batches (a warning; see the module docstring).
    empty_segments: tuple[EmptySegment, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.damage


def find_partition_dirs(
    log_dirs: list[Path], topic: str | None = None, partition: int | None = None
) -> list[Path]:
    """The ``<topic>-<partition>`` folders of ``topic`` (every topic if None; one partition if given) in
    ``log_dirs``, sorted by topic and partition."""
    found: list[tuple[str, int, Path]] = []
    for log_dir in log_dirs:
        if not log_dir.is_dir():
            continue
        for entry in log_dir.iterdir():
            tp = parse_partition_dir_name(entry.name)
            if tp is None or not entry.is_dir() or (topic is not None and tp.topic != topic):
                continue
            if partition is None or tp.partition == partition:
                found.append((tp.topic, tp.partition, entry))
    return [path for _, _, path in sorted(found)]


def verify_partition(directory: Path) -> PartitionReport:
    """Walk every segment and index of one partition folder (see the module docstring)."""
    tp = parse_partition_dir_name(directory.name)
    if tp is None:
        raise ValueError(f"{directory}: a partition folder is named <topic>-<partition>")
    bases = sorted(
        parsed[0]
        for entry in directory.iterdir()
        if (parsed := parse_segment_file_name(entry.name)) is not None and parsed[1] == LOG_SUFFIX
    )
    walk = _Walk(tp)
    for base_offset in bases:
        walk.segment(directory, base_offset)
    return PartitionReport(
        directory=directory,
        segments=len(bases),
        batches=walk.batches,
        records=walk.records,
        next_offset=walk.expected if walk.expected is not None else (bases[0] if bases else 0),
        damage=tuple(walk.damage),
        empty_segments=tuple(walk.empty_segments),
    )


class _Walk:
    """The state of one partition's walk: the next expected offset and what was found."""

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.expected: int | None = None
        self.batches = 0
        self.records = 0
        self.damage: list[Damage] = []
        self.empty_segments: list[EmptySegment] = []

    def segment(self, directory: Path, base_offset: int) -> None:
        path = segment_path(directory, base_offset, LOG_SUFFIX)
        if self.expected is not None and base_offset < self.expected:
            self.damage.append(
                Damage(
                    path,
                    0,
                    base_offset,
                    f"the segment starts at offset {base_offset}, inside the previous one, which "
                    f"ended before offset {self.expected}",
                )
            )
        self.expected = base_offset
        batches_before, records_before = self.batches, self.records
        starts = self._walk_log(path)
        if self.batches > batches_before and self.records == records_before:
            self.empty_segments.append(EmptySegment(path, base_offset, self.batches - batches_before))
        self._check_offset_index(directory, base_offset, path.stat().st_size, starts)
        self._check_time_index(directory, base_offset)

    def _walk_log(self, path: Path) -> dict[int, int]:
        """Walk the batches of one ``.log``; returns {position: base offset} of every batch found."""
        starts: dict[int, int] = {}
        file = FileHandle.open(path)
        try:
            framer = SegmentFramer(file)
            for batch in framer:
                starts[batch.position or 0] = batch.base_offset
                self._batch(path, batch)
            error = framer.error
            if error is not None:  # a torn tail is reported at the offset the walk expected there
                offset = self.expected if error.torn else error.base_offset
                self.damage.append(Damage(path, error.position, offset, error.reason))
        finally:
            file.close()
        return starts

    def _batch(self, path: Path, batch: RecordBatch) -> None:
        position = batch.position or 0
        base = batch.base_offset
        regression = None if self.expected is None else offset_regression(self.expected, base)
        if regression is not None:
            self.damage.append(Damage(path, position, base, regression))
        try:
            validate_stored_batch(batch)
        except (CorruptRecordError, InvalidRecordError) as exc:
            self.damage.append(Damage(path, position, base, exc.reason))
        else:
            self.records += batch.record_count
        self.batches += 1
        self.expected = base + batch.last_offset_delta + 1

    def _check_offset_index(
        self, directory: Path, base_offset: int, log_size: int, starts: dict[int, int]
    ) -> None:
        path = segment_path(directory, base_offset, INDEX_SUFFIX)
        if not path.exists():
            return  # rebuilt at the next start; not damage
        try:
            index = OffsetIndex.load(path, base_offset, log_size)
        except CorruptIndexError as exc:
            self.damage.append(Damage(path, 0, base_offset, exc.reason))
            return
        try:
            for number, (offset, batch_position) in enumerate(index.entries()):
                if starts.get(batch_position) != offset:
                    self.damage.append(
                        Damage(
                            path,
                            number * ENTRY_SIZE,
                            offset,
                            f"entry #{number} points at position "
                            f"{batch_position}, where no batch with base offset {offset} starts",
                        )
                    )
        finally:
            index.close()

    def _check_time_index(self, directory: Path, base_offset: int) -> None:
        path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX)
        if not path.exists():
            return
        try:
            index = TimeIndex.load(path, base_offset)
        except CorruptIndexError as exc:
            self.damage.append(Damage(path, 0, base_offset, exc.reason))
            return
        try:
            end = self.expected if self.expected is not None else base_offset
            for number, (_timestamp_ms, offset) in enumerate(index.entries()):
                if not base_offset <= offset < max(end, base_offset + 1):
                    self.damage.append(
                        Damage(
                            path,
                            number * _TIME_ENTRY_SIZE,
                            offset,
                            f"entry #{number} names offset "
                            f"{offset}, outside the segment's [{base_offset}, {end})",
                        )
                    )
        finally:
            index.close()
