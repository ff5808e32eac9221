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
Thread safety: as :class:`~broker.log.offset_index.OffsetIndex`.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from pathlib import Path

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path

ENTRY = struct.Struct(">qi")
ENTRY_SIZE = ENTRY.size
MAX_RELATIVE_OFFSET = 2**31 - 1


class TimeIndex:
    """The ``.timeindex`` of one segment, mirrored in memory."""

    __slots__ = ("_base_offset", "_file", "_offsets", "_timestamps")

    def __init__(
        self, file: FileHandle, base_offset: int, timestamps: array[int], offsets: array[int]
    ) -> None:
        self._file = file
        self._base_offset = base_offset
        self._timestamps = timestamps
        self._offsets = offsets  # absolute offsets

    @classmethod
    def load(cls, path: Path, base_offset: int) -> TimeIndex:
        """Open an existing time index and check its invariants (see the module docstring).

        Raises :class:`FileNotFoundError` when there is no file and :class:`CorruptIndexError` when the
        entries break an invariant.
        """
        file = FileHandle.open(path)
        try:
            data = file.pread(file.size(), 0)
            timestamps, offsets = _parse(path, data, base_offset)
        except BaseException:
            file.close()
            raise
        return cls(file, base_offset, timestamps, offsets)

    @classmethod
    def create(cls, path: Path, base_offset: int, entries: Iterable[tuple[int, int]] = ()) -> TimeIndex:
        """Write a fresh time index with ``entries`` ((timestamp, offset) pairs) atomically."""
        timestamps = array("q")
        offsets = array("q")
        payload = bytearray()
        for timestamp, offset in entries:
            timestamps.append(timestamp)
            offsets.append(offset)
            payload += ENTRY.pack(timestamp, offset - base_offset)
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
        return cls(FileHandle.open(path), base_offset, timestamps, offsets)

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entry_count(self) -> int:
        return len(self._timestamps)

    def entries(self) -> list[tuple[int, int]]:
        """Every (timestamp, offset) entry, in order."""
        return list(zip(self._timestamps, self._offsets, strict=True))

    def last_entry(self) -> tuple[int, int] | None:
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._offsets[-1]

    def last_offset_before(self, timestamp_ms: int) -> int | None:
        """O of the last entry with T < ``timestamp_ms``: every offset <= O is earlier. None if no entry."""
        i = bisect_left(self._timestamps, timestamp_ms) - 1
        return self._offsets[i] if i >= 0 else None

    def maybe_append(self, timestamp_ms: int, offset: int) -> bool:
        """Add ``(timestamp_ms, offset)`` if the timestamp grew past the last entry; True if added."""
        if self._timestamps and timestamp_ms <= self._timestamps[-1]:
            return False
        if timestamp_ms < 0:
            return False
        relative = offset - self._base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"{self.path}: offset {offset} does not fit relative to base {self._base_offset}"
            )
        if self._offsets and offset < self._offsets[-1]:
            raise ValueError(f"{self.path}: offset {offset} is below the last entry's {self._offsets[-1]}")
        self._file.append(ENTRY.pack(timestamp_ms, relative))
        self._timestamps.append(timestamp_ms)
        self._offsets.append(offset)
        return True

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        """Unlink the file; the descriptor closes when the last reference goes."""
        self._file.path.unlink(missing_ok=True)


def _parse(path: Path, data: bytes, base_offset: int) -> tuple[array[int], array[int]]:
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            str(path), f"size {len(data)} is not a multiple of the entry size {ENTRY_SIZE}"
        )
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
