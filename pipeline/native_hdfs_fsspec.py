"""An ``hdfs://`` fsspec filesystem for readers that read one open file from several threads (DuckDB):
:class:`SharedReadHdfsFileSystem`, hdfs-native's fsspec filesystem with a reader that keeps its position per
thread and reads with positional reads only.

Why: hdfs-native's file reader is one Rust object; ``seek`` needs it exclusively while a ``read`` on
another thread holds it (the read releases the interpreter lock while it waits on the DataNode), so
DuckDB's parallel scan of one Parquet file fails with ``RuntimeError: Already borrowed``. DuckDB reads a
range as ``seek(offset)`` then ``read(n)`` on one thread; :class:`_SharedReader` keeps that thread's offset
in a thread-local and answers ``read`` with the reader's ``read_range`` (a shared, positional read), so
threads never contend for the Rust object and each gets the bytes at its own offset.

Writes, listings and everything else are hdfs-native's own. Use::

    connection.register_filesystem(SharedReadHdfsFileSystem(host="namenode", port=8020))
    connection.sql("SELECT count(*) FROM read_parquet('hdfs://namenode:8020/warehouse/t/*/*/*.parquet')")
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any

from hdfs_native.fsspec import HdfsFileSystem


class SharedReadHdfsFileSystem(HdfsFileSystem):
    """hdfs-native's fsspec filesystem whose files opened for reading take reads from several threads."""

    def _open(
        self,
        path: str,
        mode: Any = "rb",
        overwrite: Any = True,
        replication: int | None = None,
        block_size: int | None = None,
        **kwargs: Any,
    ) -> Any:
        if mode != "rb":
            return super()._open(path, mode, overwrite, replication, block_size, **kwargs)
        return _SharedReader(self.client.read(self._strip_protocol(path)))


class _SharedReader(io.RawIOBase):
    """A read-only file over one hdfs-native reader: a position per thread, positional reads."""

    def __init__(self, reader: Any) -> None:
        super().__init__()
        self._reader = reader
        self._length = len(reader)
        self._local = threading.local()

    @property
    def _position(self) -> int:
        return int(getattr(self._local, "position", 0))

    @property
    def size(self) -> int:
        return self._length

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._length}.get(whence)
        if base is None:
            raise ValueError(f"whence {whence}: expected SEEK_SET, SEEK_CUR or SEEK_END")
        position = max(0, base + offset)
        self._local.position = position
        return position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        start = self._position
        end = self._length if size is None or size < 0 else min(self._length, start + size)
        if end <= start:
            return b""
        data = bytes(self._reader.read_range(start, end - start))
        self._local.position = start + len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer).cast("B")[: len(data)] = data
        return len(data)
