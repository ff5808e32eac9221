"""A segment's sparse offset index: the ``.index`` file.

File format: a sequence of 8-byte entries, no header, no checksum::

    relativeOffset  int32 BE   base offset of a batch - the segment's base offset
    position        int32 BE   byte position of that batch in the segment's .log file

The segment adds an entry for a batch once more than ``index_interval_bytes`` of log were written since
the previous entry, so the index is sparse. Invariants: relative offsets and positions both strictly
increase, every position points at the start of a batch whose base offset is the entry's offset, and every
position is below the log file's size. Nothing in the file proves them: after an unclean shutdown the index
is rebuilt from the log, and :meth:`OffsetIndex.load` checks them (the segment also checks the first and
last entries against the log) and raises :class:`~broker.log.errors.CorruptIndexError` so the loader
rebuilds it.

The entries are also kept in memory (two arrays); lookups are binary searches there. The file handling,
the in-memory columns and the thread-safety rules are the shared index body,
:class:`~broker.log.index_file.IndexFile`.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from broker.log.errors import CorruptIndexError
from broker.log.index_file import MAX_RELATIVE_OFFSET, IndexFile, check_entry_size

__all__ = ["ENTRY", "ENTRY_SIZE", "MAX_RELATIVE_OFFSET", "OffsetIndex"]

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size


class OffsetIndex(IndexFile):
    """The ``.index`` of one segment, mirrored in memory: keys are absolute offsets, values positions."""

    __slots__ = ()

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size_bytes: int) -> OffsetIndex:
        """Open an existing index and check its invariants against the log size.

        Raises :class:`FileNotFoundError` when there is no file and :class:`CorruptIndexError` when the
        entries break an invariant.
        """
        return cls._load(path, base_offset, lambda data: _parse(path, data, base_offset, log_size_bytes))

    @staticmethod
    def _pack(key: int, value: int, base_offset: int) -> bytes:
        return ENTRY.pack(key - base_offset, value)

    # -- lookups

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, or ``(base_offset, 0)`` when there is none."""
        offsets = self._keys
        i = bisect_right(offsets, offset) - 1
        if i < 0:
            return self._base_offset, 0
        return offsets[i], self._values[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0, the first batch, when there is none)."""
        positions = self._values
        i = bisect_right(positions, position) - 1
        return positions[i] if i >= 0 else 0

    # -- writing

    def append(self, offset: int, position: int) -> None:
        """Add an entry (the caller guarantees both strictly increase) and write it to the file."""
        self._check_relative(offset)
        self._append(offset, position)


def _parse(path: Path, data: bytes, base_offset: int, log_size_bytes: int) -> tuple[array[int], array[int]]:
    check_entry_size(path, data, ENTRY_SIZE)
    raw = array("i")
    raw.frombytes(data)
    if sys.byteorder == "little":
        raw.byteswap()
    relative = raw[0::2]
    positions = array("q", raw[1::2])
    previous_offset = -1
    previous_position = -1
    for i, (rel, pos) in enumerate(zip(relative, positions, strict=True)):
        if rel <= previous_offset or pos <= previous_position:
            raise CorruptIndexError(
                str(path),
                f"entry {i} ({rel}, {pos}) does not increase after ({previous_offset}, {previous_position})",
            )
        previous_offset, previous_position = rel, pos
    if positions and positions[-1] >= log_size_bytes:
        raise CorruptIndexError(
            str(path), f"last entry points at position {positions[-1]}, the log has {log_size_bytes} bytes"
        )
    offsets = array("q", (base_offset + r for r in relative))
    return offsets, positions
