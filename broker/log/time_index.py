"""A segment's sparse time index: the ``.timeindex`` file, for looking offsets up by timestamp.

File format: a sequence of 12-byte entries, no header, no checksum::

    timestamp       int64 BE   the largest record timestamp (ms) in the segment up to and including ...
    relativeOffset  int32 BE   ... this offset (the last offset of a batch) - the segment's base offset

An entry ``(T, O)`` promises: every record of the segment with offset <= O has a timestamp <= T. Entries are
added next to offset-index entries, and once more when the segment stops being active (or is closed), and
only when T grew, so timestamps strictly increase and offsets never decrease. To find the first offset
whose timestamp is >= ts, the segment takes the last entry with T < ts (all offsets up to its O are too
early), starts scanning batches at O + 1 and stops at the first batch whose max timestamp is >= ts.

Like the offset index it has no checksum: it is rebuilt after an unclean shutdown, and :meth:`TimeIndex.load`
checks the invariants and raises :class:`~broker.log.errors.CorruptIndexError` so the loader rebuilds it.
The file handling, the in-memory columns and the thread-safety rules are the shared index body,
:class:`~broker.log.index_file.IndexFile`.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from broker.log.errors import CorruptIndexError
from broker.log.index_file import MAX_RELATIVE_OFFSET, IndexFile, check_entry_size

__all__ = ["ENTRY", "ENTRY_SIZE", "MAX_RELATIVE_OFFSET", "TimeIndex"]

ENTRY = struct.Struct(">qi")
ENTRY_SIZE = ENTRY.size


class TimeIndex(IndexFile):
    """The ``.timeindex`` of one segment, mirrored in memory: keys are timestamps, values absolute
    offsets."""

    __slots__ = ()

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex:
        """Open an existing time index and check its invariants (see the module docstring).

        Raises :class:`FileNotFoundError` when there is no file and :class:`CorruptIndexError` when the
        entries break an invariant.
        """
        return cls._load(path, base_offset, lambda data: _parse(path, data, base_offset))

    @staticmethod
    def _pack(key: int, value: int, base_offset: int) -> bytes:
        return ENTRY.pack(key, value - base_offset)

    def last_offset_before(self, timestamp_ms: int) -> int | None:
        """O of the last entry with T < ``timestamp_ms``: every offset <= O is earlier. None if no entry."""
        i = bisect_left(self._keys, timestamp_ms) - 1
        return self._values[i] if i >= 0 else None

    def maybe_append(self, timestamp_ms: int, offset: int) -> bool:
        """Add ``(timestamp_ms, offset)`` if the timestamp grew past the last entry; True if added."""
        timestamps = self._keys
        if timestamps and timestamp_ms <= timestamps[-1]:
            return False
        if timestamp_ms < 0:
            return False
        self._check_relative(offset)
        offsets = self._values
        if offsets and offset < offsets[-1]:
            raise ValueError(f"{self.path}: offset {offset} is below the last entry's {offsets[-1]}")
        self._append(timestamp_ms, offset)
        return True


def _parse(path: Path, data: bytes, base_offset: int) -> tuple[array[int], array[int]]:
    check_entry_size(path, data, ENTRY_SIZE)
    timestamps = array("q")
    offsets = array("q")
    previous_ts = -1
    previous_rel = -1
    for i, (timestamp, rel) in enumerate(ENTRY.iter_unpack(data)):
        if timestamp <= previous_ts or rel < previous_rel or rel < 0:
            raise CorruptIndexError(
                str(path),
                f"entry {i} ({timestamp}, {rel}) does not follow ({previous_ts}, {previous_rel}): timestamps "
                "must increase and offsets must not decrease",
            )
        previous_ts, previous_rel = timestamp, rel
        timestamps.append(timestamp)
        offsets.append(base_offset + rel)
    return timestamps, offsets
