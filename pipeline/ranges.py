"""Offset ranges and the planning of a load run: pure functions, run on the driver.

A run loads, per partition, the range ``[from_offset, until_offset)``:

* ``from_offset`` is the job's committed offset (the next offset to load). A partition the job never loaded
  starts by the ``start`` policy: its log start (``earliest``) or its log end (``latest``).
* ``until_offset`` is the log end (high watermark) when planning or, for a run with a cutoff time, the first
  offset whose timestamp is at or after the cutoff (ListOffsets by timestamp; the log end when there is
  none), and never below ``from_offset``. ``max_records_per_partition`` caps ``until - from``.
* When retention deleted offsets the job has not loaded (``from_offset < log_start_offset``), the
  ``on_out_of_range`` policy decides: ``fail`` raises :class:`~pipeline.load_errors.OffsetOutOfRangeError`
  naming the gap; ``earliest`` starts at the log start and records ``[from_offset, log_start_offset)`` as a
  :class:`LossRange` (it goes into the manifest, for the audit). A committed offset beyond the log end (the
  topic was deleted and created again) always fails: nothing says what happened to the offsets in between.

Empty ranges are dropped. :func:`split_ranges` then cuts ranges into tasks of at most
``max_records_per_task`` records and, while there are fewer than ``min_partitions`` tasks, halves the
largest one, so that a run keeps every core busy. Every value here is a small frozen dataclass that
pickles and turns into JSON and back (:class:`~pipeline.json_value.JsonValue`: the plan is persisted before
reading; tasks travel to executors).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from broker.record.topic_partition import TopicPartition
from pipeline.json_value import JsonValue
from pipeline.load_errors import OffsetOutOfRangeError, PlanError

StartPolicy = Literal["earliest", "latest"]
OutOfRangePolicy = Literal["fail", "earliest"]


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange(JsonValue):
    """The records ``[from_offset, until_offset)`` of one topic-partition."""

    JSON_WHAT: ClassVar[str] = "offset range"

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    def __post_init__(self) -> None:
        if self.partition < 0 or self.from_offset < 0 or self.until_offset < self.from_offset:
            raise ValueError(
                f"not a range: {self.topic}-{self.partition} [{self.from_offset}, {self.until_offset})"
            )

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def record_count(self) -> int:
        """Records in the range (Lumber's offsets are consecutive: no compaction, no control records)."""
        return self.until_offset - self.from_offset

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.from_offset}, {self.until_offset})"


@dataclass(frozen=True, slots=True, order=True)
class LossRange(JsonValue):
    """Offsets that retention deleted before the job loaded them (``on_out_of_range = "earliest"``)."""

    JSON_WHAT: ClassVar[str] = "loss range"

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    reason: str = "out_of_range"

    @property
    def record_count(self) -> int:
        return self.until_offset - self.from_offset


@dataclass(frozen=True, slots=True)
class PartitionOffsets(JsonValue):
    """What the brokers say about one partition when planning."""

    JSON_WHAT: ClassVar[str] = "partition's offsets"
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ("topic_partition",)

    topic_partition: TopicPartition
    log_start_offset: int
    #: The log end: the offset after the last exposed record (the high watermark).
    high_watermark: int
    #: The first offset with a timestamp at or after the run's cutoff; ``None``: no cutoff, or no such record.
    cutoff_offset: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.log_start_offset <= self.high_watermark:
            raise ValueError(
                f"{self.topic_partition}: log start {self.log_start_offset} and log end "
                f"{self.high_watermark} do not make a log"
            )


@dataclass(frozen=True, slots=True)
class RangePlan:
    """What to load: the non-empty ranges, the gaps skipped, and every partition's offset after the run."""

    ranges: tuple[OffsetRange, ...]
    losses: tuple[LossRange, ...]
    #: The committed offsets after a successful run: the previous ones, updated by every planned partition.
    next_offsets: Mapping[TopicPartition, int]


def plan_ranges(
    partitions: Iterable[PartitionOffsets],
    committed: Mapping[TopicPartition, int],
    *,
    start: StartPolicy = "earliest",
    on_out_of_range: OutOfRangePolicy = "fail",
    max_records_per_partition: int = 0,
) -> RangePlan:
    """Plan one run (see the module docstring). ``max_records_per_partition`` 0 means no cap."""
    if start not in ("earliest", "latest"):
        raise ValueError(f"start must be 'earliest' or 'latest', got {start!r}")
    if on_out_of_range not in ("fail", "earliest"):
        raise ValueError(f"on_out_of_range must be 'fail' or 'earliest', got {on_out_of_range!r}")
    ranges: list[OffsetRange] = []
    losses: list[LossRange] = []
    next_offsets = dict(committed)
    seen: set[TopicPartition] = set()
    for info in sorted(partitions, key=lambda p: p.topic_partition):
        tp = info.topic_partition
        if tp in seen:
            raise ValueError(f"{tp} is listed twice")
        seen.add(tp)
        from_offset = committed.get(tp)
        if from_offset is None:
            from_offset = info.log_start_offset if start == "earliest" else info.high_watermark
        elif from_offset > info.high_watermark:
            raise PlanError(
                f"{tp}: the committed offset {from_offset} is beyond the log end {info.high_watermark} "
                "(was the topic deleted and created again?); expected at most the log end. Move the job's "
                "offsets by hand or load with a new job name"
            )
        elif from_offset < info.log_start_offset:
            if on_out_of_range == "fail":
                raise OffsetOutOfRangeError(
                    f"{tp}: offsets [{from_offset}, {info.log_start_offset}) were deleted by retention "
                    f"before this job loaded them (committed offset {from_offset}, log start "
                    f"{info.log_start_offset}); on_out_of_range = 'fail'. Set [load] on_out_of_range = "
                    "'earliest' to skip the gap and record it as loss"
                )
            losses.append(LossRange(tp.topic, tp.partition, from_offset, info.log_start_offset))
            from_offset = info.log_start_offset
        until_offset = info.high_watermark if info.cutoff_offset is None else info.cutoff_offset
        until_offset = max(from_offset, min(until_offset, info.high_watermark))
        if max_records_per_partition > 0:
            until_offset = min(until_offset, from_offset + max_records_per_partition)
        next_offsets[tp] = until_offset
        if until_offset > from_offset:
            ranges.append(OffsetRange(tp.topic, tp.partition, from_offset, until_offset))
    return RangePlan(tuple(ranges), tuple(losses), next_offsets)


def split_ranges(
    ranges: Sequence[OffsetRange], *, min_partitions: int = 1, max_records_per_task: int = 0
) -> list[OffsetRange]:
    """Cut ``ranges`` into task ranges (see the module docstring); sorted, covering exactly the same
    offsets. ``max_records_per_task`` 0 means no size limit."""
    if min_partitions < 1:
        raise ValueError(f"min_partitions must be at least 1, got {min_partitions}")
    pieces: list[OffsetRange] = []
    for whole in ranges:
        if whole.record_count == 0:
            continue
        parts = 1
        if max_records_per_task > 0:
            parts = -(-whole.record_count // max_records_per_task)
        pieces.extend(_cut(whole, parts))
    # halve the largest piece (ties: the first in order) until there are enough tasks or nothing to halve
    heap = [(-piece.record_count, piece) for piece in pieces]
    heapq.heapify(heap)
    while len(heap) < min_partitions and heap and -heap[0][0] > 1:
        _, largest = heapq.heappop(heap)
        for half in _cut(largest, 2):
            heapq.heappush(heap, (-half.record_count, half))
    return sorted(piece for _, piece in heap)


def _cut(whole: OffsetRange, parts: int) -> list[OffsetRange]:
    """``whole`` in ``parts`` consecutive pieces whose sizes differ by at most one record."""
    parts = max(1, min(parts, whole.record_count))
    size, extra = divmod(whole.record_count, parts)
    out = []
    start = whole.from_offset
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        out.append(OffsetRange(whole.topic, whole.partition, start, end))
        start = end
    if start != whole.until_offset:
        raise PlanError(f"splitting {whole} ended at {start}, expected {whole.until_offset}")
    return out
