"""What readers of a partition's log see: an immutable snapshot of its segments and offsets, and the reads
served from it (fetch regions, offsets by timestamp).

:class:`~broker.log.log.Log` publishes a new :class:`LogView` after every change (an append, a roll, a
flush or a replicated high watermark that moves the high watermark, retention, truncation) by replacing
one attribute, under its append lock; a
reader takes the attribute once and works on that snapshot, without a lock. A snapshot never changes,
and what it references stays readable while it is held: an appended batch is complete before the view
that covers it is published, and a segment that retention deletes keeps its open descriptors (its files
are only unlinked) until the last view and region referencing it are gone. A truncation never rewrites
bytes an older view can reach (:mod:`broker.log.log_truncation` says how): past its cut such a reader
fails on a short read, it never gets other batches. Thread-safe (immutable).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from broker.log.errors import OffsetOutOfRangeError
from broker.log.file_region import FileRegion
from broker.log.segment import Segment


class LogView(NamedTuple):
    """A log's segments and offsets at one moment (a tuple: one is built per append)."""

    segments: tuple[Segment, ...]
    base_offsets: tuple[int, ...]
    log_end_offset: int
    #: Size of the last segment at ``log_end_offset``.
    end_position: int
    high_watermark: int
    #: The segment and byte position where the high watermark lies.
    hw_segment: Segment
    hw_position: int

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, where: str, start_floor: int = 0
    ) -> FileRegion | None:
        """:meth:`broker.log.log.Log.read` on this snapshot (``where`` names the partition in errors;
        ``start_floor``: the log start offset DeleteRecords raised, when past the first segment)."""
        start = max(self.base_offsets[0], start_floor)
        end = self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(where, offset, start, end)
        limit = self.high_watermark if max_offset is None else min(max_offset, end)
        if offset >= limit:
            return None
        segments = self.segments
        last = len(segments) - 1
        i = bisect_right(self.base_offsets, offset) - 1
        while i <= last:
            segment = segments[i]
            if segment.base_offset >= limit:
                return None
            segment_end = self.end_position if i == last else segment.size_bytes
            segment_end_offset = end if i == last else segment.next_offset
            if max_offset is None:
                if segment is self.hw_segment:
                    max_position, end_offset = self.hw_position, self.high_watermark
                else:
                    max_position, end_offset = segment_end, segment_end_offset
            else:
                max_position, end_offset = segment_end, segment_end_offset
                if limit < segment_end_offset:
                    found = segment.position_of(limit, segment_end)
                    if found is not None:
                        max_position, end_offset = found[0], found[1]
            region = segment.read(offset, max_bytes, max_position, end_offset)
            if region is not None:
                return region
            i += 1
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """:meth:`broker.log.log.Log.offset_of_max_timestamp` on this snapshot: the largest timestamp of the
        exposed segments (each segment's time index knows its own), then its first record."""
        exposed = [s for s in self.segments if s.base_offset < self.high_watermark]
        if not exposed:
            return None
        largest = max(s.max_timestamp_ms for s in exposed)
        return self.offset_for_timestamp(largest) if largest >= 0 else None

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """:meth:`broker.log.log.Log.offset_for_timestamp` on this snapshot."""
        high_watermark = self.high_watermark
        last = len(self.segments) - 1
        for i, segment in enumerate(self.segments):
            if segment.base_offset >= high_watermark:
                break
            if segment.max_timestamp_ms < timestamp_ms:
                continue
            if segment is self.hw_segment:
                max_position = self.hw_position
            else:
                max_position = self.end_position if i == last else segment.size_bytes
            found = segment.find_offset_by_timestamp(timestamp_ms, max_position)
            if found is not None:
                return found if found[0] < high_watermark else None
        return None
