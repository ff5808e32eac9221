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

The entries are also kept in memory (two arrays); lookups are binary searches there. Thread safety:
appends come from the owning log under its lock; lookups are lock-free (entries are only ever added,
and readers only use entries below the size the log has published).
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path

ENTRY = struct.Struct(">ii")
ENTRY_SIZE = ENTRY.size
MAX_RELATIVE_OFFSET = 2**31 - 1


class OffsetIndex:
    """The ``.index`` of one segment, mirrored in memory."""

    __slots__ = ("_base_offset", "_file", "_offsets", "_positions")

    def __init__(
        self, file: FileHandle, base_offset: int, offsets: array[int], positions: array[int]
    ) -> None:
        self._file = file
        self._base_offset = base_offset
        self._offsets = offsets  # absolute offsets
        self._positions = positions

    # -- opening

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size_bytes: int) -> OffsetIndex:
        """Open an existing index and check its invariants against the log size.

        Raises :class:`FileNotFoundError` when there is no file and :class:`CorruptIndexError` when the
        entries break an invariant.
        """
        file = FileHandle.open(path)
        try:
            data = file.pread(file.size(), 0)
            offsets, positions = _parse(path, data, base_offset, log_size_bytes)
        except BaseException:
            file.close()
            raise
        return cls(file, base_offset, offsets, positions)

    @classmethod
    def create(cls, path: Path, base_offset: int, entries: Iterable[tuple[int, int]] = ()) -> OffsetIndex:
        """Write a fresh index with ``entries`` ((offset, position) pairs) atomically, replacing any file."""
        offsets = array("q")
        positions = array("q")
        payload = bytearray()
        for offset, position in entries:
            offsets.append(offset)
            positions.append(position)
            payload += ENTRY.pack(offset - base_offset, position)
        tmp = temp_path(path)
        tmp_file = FileHandle.open(tmp, create=True)
        try:
            tmp_file.truncate(0)
            if payload:
                tmp_file.append(payload)
            tmp_file.fsync()
        finally:
            tmp_file.close()
        tmp.replace(path)
        fsync_dir(path.parent)
        return cls(FileHandle.open(path), base_offset, offsets, positions)

    # -- properties

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def entry_count(self) -> int:
        return len(self._offsets)

    def entries(self) -> list[tuple[int, int]]:
        """Every (offset, position) entry, in order."""
        return list(zip(self._offsets, self._positions, strict=True))

    def first_entry(self) -> tuple[int, int] | None:
        if not self._offsets:
            return None
        return self._offsets[0], self._positions[0]

    def last_entry(self) -> tuple[int, int] | None:
        if not self._offsets:
            return None
        return self._offsets[-1], self._positions[-1]

    # -- lookups

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, or ``(base_offset, 0)`` when there is none."""
        i = bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self._base_offset, 0
        return self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0, the first batch, when there is none)."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    # -- writing

    def append(self, offset: int, position: int) -> None:
        """Add an entry (the caller guarantees both strictly increase) and write it to the file."""
        relative = offset - self._base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"{self.path}: offset {offset} does not fit relative to base {self._base_offset}"
            )
        self._file.append(ENTRY.pack(relative, position))
        self._offsets.append(offset)
        self._positions.append(position)

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        """Unlink the file; the descriptor closes when the last reference goes."""
        self._file.path.unlink(missing_ok=True)


def _parse(path: Path, data: bytes, base_offset: int, log_size_bytes: int) -> tuple[array[int], array[int]]:
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            str(path), f"size {len(data)} is not a multiple of the entry size {ENTRY_SIZE}"
        )
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
