"""The body every index of a segment shares (Kafka's ``AbstractIndex``): a file of fixed-size entries,
mirrored in memory.

An index file is a sequence of fixed-size big-endian entries, no header, no checksum; each entry holds two
numbers, one of them an offset stored relative to the segment's base offset (an int32, so at most
:data:`MAX_RELATIVE_OFFSET` past it). The formats themselves are documented by the subclasses:
:mod:`broker.log.offset_index` (``.index``) and :mod:`broker.log.time_index` (``.timeindex``).

What lives here: opening an existing file and checking it (:meth:`IndexFile._load`, with the subclass's
parser; a broken invariant raises :class:`~broker.log.errors.CorruptIndexError` so the loader rebuilds the
index from the log), writing a fresh one atomically (:meth:`IndexFile.create`: a ``.tmp`` file, fsync,
rename, fsync of the folder; :meth:`IndexFile.create_empty` for files flushed before they count),
appending an entry (file and memory; the entries of one multi-batch append written to the file at once,
:meth:`IndexFile.batched_writes`), the entries as two ``array('q')`` columns (``_keys``, the column
binary searches run on, and ``_values``), flush, close and delete.

Thread safety: appends come from the owning log under its lock; lookups are lock-free (entries are only
ever added, the arrays only grow, and readers only use entries below the size the log has published).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path

__all__ = ["MAX_RELATIVE_OFFSET", "IndexFile", "check_entry_size"]

MAX_RELATIVE_OFFSET = 2**31 - 1


class IndexFile:
    """One index file of a segment and its entries in memory: ``(key, value)`` pairs in ``_keys`` and
    ``_values``, both strictly ordered by key."""

    __slots__ = ("_base_offset", "_batched", "_file", "_keys", "_values")

    def __init__(self, file: FileHandle, base_offset: int, keys: array[int], values: array[int]) -> None:
        self._file = file
        self._base_offset = base_offset
        self._keys = keys
        self._values = values
        #: Entries appended inside :meth:`batched_writes`, not yet written to the file.
        self._batched: list[bytes] | None = None

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
        """A new, empty index at ``path``, which must not exist: neither written through a ``.tmp`` file
        nor fsynced, for an index whose segment is flushed before anything relies on it (the log
        cleaner's ``.cleaned`` segments: :meth:`flush` fsyncs it before the swap)."""
        return cls(FileHandle.open(path, create=True, exclusive=True), base_offset, array("q"), array("q"))

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
        """Write the entry ``(key, value)`` to the file (inside :meth:`batched_writes`: at its end), then
        add it in memory (the caller checked it)."""
        entry = self._pack(key, value, self._base_offset)
        if self._batched is None:
            self._file.append(entry)
        else:
            self._batched.append(entry)
        self._keys.append(key)
        self._values.append(value)

    @contextmanager
    def batched_writes(self) -> Iterator[None]:
        """Entries appended inside are written to the file at the end, in one write (a segment's append
        of many batches: the log cleaner's chunks). They are in memory at once; the file is what recovery
        reads, and it rebuilds the indexes past the recovery point anyway."""
        self._batched = []
        try:
            yield
        finally:
            pending, self._batched = self._batched, None
            if pending:
                self._file.append(b"".join(pending))

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        """Unlink the file; the descriptor closes when the last reference goes."""
        self._file.path.unlink(missing_ok=True)


def check_entry_size(path: Path, data: bytes, entry_size: int) -> None:
    """Raise :class:`~broker.log.errors.CorruptIndexError` unless ``data`` is whole entries."""
    if len(data) % entry_size:
        raise CorruptIndexError(
            str(path), f"size {len(data)} is not a multiple of the entry size {entry_size}"
        )
