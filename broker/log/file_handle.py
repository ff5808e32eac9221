"""An open file descriptor shared by a segment and the file regions it hands out to readers.

The log never moves a file position: it appends (``O_APPEND``) and reads with ``pread`` / ``sendfile`` at
explicit positions, so one descriptor serves any number of threads.

Lifetime: :meth:`FileHandle.close` closes the descriptor at once (log shutdown). A deleted segment does
*not* close its handles: it unlinks its files and drops them, and the descriptor is closed when the last
reference (a :class:`~broker.log.file_region.FileRegion` still being sent, say) goes away. So a reader
holding a region of a segment that retention deletes finishes reading it safely: the data stays reachable
through the open descriptor until then.

Thread safety: every method may be called from any thread; appends are serialised by the owning log.
"""

from __future__ import annotations

import errno
import os
import weakref
from collections.abc import Sequence
from pathlib import Path

from broker.log.errors import LogClosedError, LogStorageError

Buffer = bytes | bytearray | memoryview

_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024, 1024)


class FileHandle:
    """An ``O_CLOEXEC`` file descriptor plus its path, closed exactly once."""

    __slots__ = ("__weakref__", "_closer", "_fd", "_path")

    def __init__(self, path: Path, fd: int) -> None:
        self._path = path
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        create: bool = False,
        exclusive: bool = False,
        append: bool = True,
        truncate: bool = False,
    ) -> FileHandle:
        """Open ``path`` read-write (appending). ``create``/``exclusive``/``truncate`` map to
        O_CREAT/O_EXCL/O_TRUNC."""
        flags = os.O_RDWR | os.O_CLOEXEC
        if append:
            flags |= os.O_APPEND
        if create:
            flags |= os.O_CREAT
        if exclusive:
            flags |= os.O_EXCL
        if truncate:
            flags |= os.O_TRUNC
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise LogStorageError(f"{path}: cannot open: {exc}") from exc
        return cls(path, fd)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def fileno(self) -> int:
        """The descriptor; raises :class:`LogClosedError` after :meth:`close`."""
        if not self._closer.alive:
            raise LogClosedError(f"{self._path}: file is closed")
        return self._fd

    def size(self) -> int:
        try:
            return os.fstat(self.fileno()).st_size
        except OSError as exc:
            raise LogStorageError(f"{self._path}: cannot stat: {exc}") from exc

    def pread(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at the end of the file)."""
        fd = self.fileno()
        try:
            data = os.pread(fd, size, position)
            if len(data) == size or not data:
                return data
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(fd, size - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            return b"".join(parts)
        except OSError as exc:
            raise LogStorageError(
                f"{self._path}: cannot read {size} bytes at position {position}: {exc}"
            ) from exc

    def pread_into(self, buffer: bytearray | memoryview, size: int, position: int) -> int:
        """Read up to ``size`` bytes at ``position`` into the start of ``buffer`` (no copy); returns how
        many (fewer only at the end of the file)."""
        fd = self.fileno()
        view = memoryview(buffer)
        got = 0
        try:
            while got < size:
                read = os.preadv(fd, [view[got:size]], position + got)
                if not read:
                    break
                got += read
        except OSError as exc:
            raise LogStorageError(
                f"{self._path}: cannot read {size} bytes at position {position}: {exc}"
            ) from exc
        return got

    def append(self, data: Buffer) -> None:
        """Append all of ``data``."""
        self.append_all((data,))

    def append_all(self, buffers: Sequence[Buffer]) -> None:
        """Append the buffers in order with as few ``writev`` calls as the OS allows."""
        fd = self.fileno()
        try:
            for start in range(0, len(buffers), _IOV_MAX):
                chunk = buffers[start : start + _IOV_MAX]
                expected = sum(len(b) for b in chunk)
                written = os.writev(fd, chunk)
                if written != expected:
                    _write_rest(fd, chunk, written)
        except OSError as exc:
            raise LogStorageError(f"{self._path}: cannot append: {exc}") from exc

    def fsync(self) -> None:
        try:
            os.fsync(self.fileno())
        except OSError as exc:
            raise LogStorageError(f"{self._path}: cannot fsync: {exc}") from exc

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self.fileno(), size)
        except OSError as exc:
            raise LogStorageError(f"{self._path}: cannot truncate to {size} bytes: {exc}") from exc

    def close(self) -> None:
        """Close the descriptor now (idempotent)."""
        self._closer()

    def __repr__(self) -> str:
        return f"FileHandle({str(self._path)!r}, fd={self._fd}{', closed' if self.closed else ''})"


def _write_rest(fd: int, buffers: Sequence[Buffer], written: int) -> None:
    """Finish a short ``writev``: write whatever of ``buffers`` lies past the first ``written`` bytes."""
    for buffer in buffers:
        view = memoryview(buffer)
        if written >= len(view):
            written -= len(view)
            continue
        view = view[written:]
        written = 0
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.EIO, "write returned 0 bytes")
            view = view[n:]


def fsync_dir(path: Path) -> None:
    """fsync a folder, so that files created, renamed or removed in it survive a power loss."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise LogStorageError(f"{path}: cannot open folder to fsync it: {exc}") from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise LogStorageError(f"{path}: cannot fsync folder: {exc}") from exc
    finally:
        os.close(fd)
