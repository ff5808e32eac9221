"""The body every index of a segment shares (Kafka's ``AbstractIndex``): a file of fixed-size entries,
mirrored in memory.

An index file is a sequence of fixed-size big-endian entries, no header, no checksum; each entry holds two
numbers, one of them an offset stored relative to the segment's base offset (an int32, so at most
:data:`MAX_RELATIVE_OFFSET` past it). The formats themselves are documented by the subclasses:
:mod:`broker.log.offset_index` (``.index``) and :mod:`broker.log.time_index` (``.timeindex``).

What lives here: opening an existing file and checking it (:meth:`IndexFile._load`, with the subclass's
parser; a broken invariant raises :class:`~broker.log.errors.CorruptIndexError` so the loader rebuilds the
index from the log), writing a fresh one atomically (:meth:`IndexFile.create`: a ``.tmp`` file, fsync,
rename, fsync of the folder: recovery's rebuilt indexes), creating a new segment's empty one
(:meth:`IndexFile.create_empty`: no ``.tmp`` file, no fsync),
appending an entry (to memory at once; to the file in one write per :data:`PENDING_ENTRIES` entries, and
at :meth:`IndexFile.flush` before its fsync and at :meth:`IndexFile.close`), the entries as two
``array('q')`` columns (``_keys``, the column binary searches run on, and ``_values``), flush, close and
delete.

Why the file lags memory: a batch-50 produce request of 100-byte records is over ``index.interval.bytes``
(4 KiB), so writing each entry at once cost two ``write`` calls per request (the offset and the time index),
as many as the record bytes' own append (issue 39; Kafka's indexes are memory-mapped and cost no call).
The file is what a restart reads: a flushed segment's index was written before its fsync, and recovery
rebuilds the indexes of every segment past the recovery point (the unflushed ones) from the log, so entries
lost with a killed process are never missed. A live segment's file may hold fewer entries than memory
(a sparser index: every entry in it is still a correct one). For the same reason a new segment's empty
index is created without a ``.tmp`` file or an fsync, as Kafka creates its own: until the segment's first
flush it lies past the recovery point, and a file a power loss left missing is rebuilt like a torn one
(issue 39: the empty indexes of a 1,000-partition topic's new segments cost 4,000 fsyncs).

Thread safety: appends come from the owning log under its lock; lookups are lock-free (entries are only
ever added, the arrays only grow, and readers only use entries below the size the log has published). The
entries waiting for the file are guarded by ``_pending_lock``: the log's flush writes them from its own
thread, outside the log's lock, while appends go on.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Self

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path

__all__ = ["MAX_RELATIVE_OFFSET", "PENDING_ENTRIES", "IndexFile", "check_entry_size"]

MAX_RELATIVE_OFFSET = 2**31 - 1
#: Entries kept for the file before they are written in one call (bounds the memory with no flush policy).
PENDING_ENTRIES = 256


class IndexFile:
    """One index file of a segment and its entries in memory: ``(key, value)`` pairs in ``_keys`` and
    ``_values``, both strictly ordered by key."""

    __slots__ = ("_base_offset", "_file", "_keys", "_pending", "_pending_lock", "_values")

    def __init__(self, file: FileHandle, base_offset: int, keys: array[int], values: array[int]) -> None:
        self._file = file
        self._base_offset = base_offset
        self._keys = keys
        self._values = values
        #: Entries in memory not yet written to the file, in order (see the module docstring).
        self._pending: list[bytes] = []
        self._pending_lock = threading.Lock()

    # -- opening

    @classmethod
    def _load(
        cls, path: Path, base_offset: int, parse: Callable[[bytes], tuple[array[int], array[int]]]
    ) -> Self:
        """Open the file at ``path`` and ``parse`` its bytes into the two columns (which checks them).

        Raises :class:`FileNotFoundError` when there is no file and whatever ``parse`` raises
        (:class:`~broker.log.errors.CorruptIndexError`) when the entries break an invariant.
        """
        file = FileHandle.open(path)
        try:
            keys, values = parse(file.pread(file.size(), 0))
        except BaseException:
            file.close()
            raise
        return cls(file, base_offset, keys, values)

    @classmethod
    def create(cls, path: Path, base_offset: int, entries: Iterable[tuple[int, int]] = ()) -> Self:
        """Write a fresh index with ``entries`` ((key, value) pairs) atomically, replacing any file."""
        keys = array("q")
        values = array("q")
        payload = bytearray()
        for key, value in entries:
            keys.append(key)
            values.append(value)
            payload += cls._pack(key, value, base_offset)
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
        return cls(FileHandle.open(path), base_offset, keys, values)

    @classmethod
    def create_empty(cls, path: Path, base_offset: int) -> Self:
        """A new, empty index at ``path`` (replacing any file), neither written through a ``.tmp`` file nor
        fsynced: a new segment's (:meth:`Segment.create <broker.log.segment.Segment.create>`), whose
        entries count only once its segment is flushed (:meth:`flush` fsyncs them then; see the module
        docstring)."""
        return cls(FileHandle.open(path, create=True, truncate=True), base_offset, array("q"), array("q"))

    @staticmethod
    def _pack(key: int, value: int, base_offset: int) -> bytes:
        """One entry's bytes (the subclass's format)."""
        raise NotImplementedError

    # -- properties

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def entry_count(self) -> int:
        return len(self._keys)

    def entries(self) -> list[tuple[int, int]]:
        """Every (key, value) entry, in order."""
        return list(zip(self._keys, self._values, strict=True))

    def first_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[0], self._values[0]

    def last_entry(self) -> tuple[int, int] | None:
        if not self._keys:
            return None
        return self._keys[-1], self._values[-1]

    # -- writing

    def _check_relative(self, offset: int) -> None:
        """Raise :class:`ValueError` when ``offset`` cannot be stored relative to the base offset."""
        if not 0 <= offset - self._base_offset <= MAX_RELATIVE_OFFSET:
            raise ValueError(
                f"{self.path}: offset {offset} does not fit relative to base {self._base_offset}"
            )

    def _append(self, key: int, value: int) -> None:
        """Add the entry ``(key, value)`` in memory and to the entries waiting for the file (written once
        :data:`PENDING_ENTRIES` wait, or at :meth:`flush` / :meth:`close`); the caller checked it."""
        entry = self._pack(key, value, self._base_offset)
        with self._pending_lock:
            pending = self._pending
            pending.append(entry)
            if len(pending) >= PENDING_ENTRIES:
                self._write_pending_locked()
        self._keys.append(key)
        self._values.append(value)

    def _write_pending_locked(self) -> None:
        """Write the waiting entries to the file in one call (the caller holds ``_pending_lock``)."""
        pending = self._pending
        if pending:
            self._file.append(pending[0] if len(pending) == 1 else b"".join(pending))
            pending.clear()

    def write_pending(self) -> None:
        """Write the entries still waiting to the file (no fsync)."""
        with self._pending_lock:
            self._write_pending_locked()

    def flush(self) -> None:
        """Write the waiting entries, then fsync the file."""
        self.write_pending()
        self._file.fsync()

    def close(self) -> None:
        """Write the waiting entries and close the file."""
        try:
            self.write_pending()
        finally:
            self._file.close()

    def delete(self) -> None:
        """Unlink the file (dropping the entries waiting for it); the descriptor closes when the last
        reference goes."""
        with self._pending_lock:
            self._pending.clear()
        self._file.path.unlink(missing_ok=True)


def check_entry_size(path: Path, data: bytes, entry_size: int) -> None:
    """Raise :class:`~broker.log.errors.CorruptIndexError` unless ``data`` is whole entries."""
    if len(data) % entry_size:
        raise CorruptIndexError(
            str(path), f"size {len(data)} is not a multiple of the entry size {entry_size}"
        )
