"""HDFS from Python without a JVM: :class:`NativeHdfsFileSystem` on ``hdfs-native`` (a Rust client that speaks
the NameNode's RPC and the DataNodes' data transfer protocol itself; no libhdfs, no Hadoop install).

:func:`pipeline.fs.open_filesystem` chooses it for an ``hdfs://`` URL when libhdfs cannot be loaded
(``[load] hdfs_client = "auto"``), or always with ``hdfs_client = "hdfs-native"``. Every check of
:class:`pipeline.fs.FileSystem` holds here too; this module maps the primitives onto the client:

* a rename is the NameNode's ``rename2`` without ``OVERWRITE``, atomic: the commit's manifest rename
  (:mod:`pipeline.commit`) is exactly HDFS's atomic rename;
* :meth:`~pipeline.fs.FileSystem.create` (the driver's metadata: plans, manifests, run records) writes a
  hidden ``.<name>.tmp-<hex>`` beside the file, ``hsync``-s it (the DataNode syncs the block to its disk),
  closes it and renames it over the file (``rename2`` with ``OVERWRITE``, atomic): a write that fails
  half-way (a DataNode killed) leaves the old file or none, never an empty or torn one, and its temporary
  is deleted when the NameNode still answers; the tasks' Parquet streams
  (:meth:`~pipeline.fs.FileSystem.open_output`) are closed without ``hsync``, as Hadoop's own writers close
  theirs;
* a close completes the file at the NameNode. With one DataNode the NameNode completes a file only once the
  DataNode's incremental block report arrived, which usually follows the client's first ``complete`` by a
  few milliseconds, and ``hdfs-native`` retries after 500 ms (Hadoop's Java client after 400 ms): each
  close of a file on a one-DataNode HDFS costs about half a second.

Errors: the client raises ``FileNotFoundError``, ``FileExistsError``, ``PermissionError``, ``OSError``
(connection refused) or ``RuntimeError('RPCError("<Java exception>", "<message and Java stack>")')``;
:meth:`NativeHdfsFileSystem.describe` turns each into one line (the Java exception's class and the first
line of its message), so an error reads ``create hdfs://nn:8020/w/x: AccessControlException: Permission
denied: user=...``.

Connecting: ``CLIENT_CONFIG`` bounds the client's retries of a NameNode that does not answer (Hadoop's
defaults, 15 attempts with sleeps up to 15 s, make a wrong host:port hang for three minutes) to 3 attempts
within about a second. One ``hdfs_native.Client`` per NameNode and user per process (cached by
:func:`pipeline.fs.open_filesystem`); it is safe to use from several threads, and reconnects after a
NameNode restart. The user is ``$HADOOP_USER_NAME``, else the process's user (simple authentication).
"""

from __future__ import annotations

import contextlib
import re
import secrets
from typing import Any

from pipeline.fs import FileInfo, FileSystem
from pipeline.load_errors import FileSystemError

#: ``hdfs_native.Client``'s settings (Hadoop's client keys): a NameNode that does not answer is given up on
#: after 3 attempts, 250 ms and 500 ms apart.
CLIENT_CONFIG = {
    "dfs.client.failover.max.attempts": "3",
    "dfs.client.failover.sleep.base.millis": "250",
    "dfs.client.failover.sleep.max.millis": "1000",
}

_RPC_ERROR = re.compile(r'^RPCError\("(?P<cls>[^"]+)", "(?P<msg>.*)', re.DOTALL)


def native_client(url: str) -> Any:
    """An ``hdfs_native.Client`` of the NameNode of ``url`` (``hdfs://host:port``)."""
    from hdfs_native import Client  # noqa: PLC0415 - only hdfs:// warehouses load the extension

    return Client(url, dict(CLIENT_CONFIG))


class NativeHdfsFileSystem(FileSystem):
    """An ``hdfs://`` filesystem through ``hdfs-native`` (see the module docstring)."""

    def __init__(self, url: str, client: Any) -> None:
        self._client = client
        super().__init__(url)

    @staticmethod
    def describe(exc: BaseException) -> str:
        """One line for the client's ``exc``: the Java exception's short class name and the first line of
        its message for a NameNode's error, else the Python class and the first line."""
        text = str(exc)
        found = _RPC_ERROR.match(text)
        if found:
            java_class = found.group("cls").rsplit(".", 1)[-1]
            message = found.group("msg").split("\\n")[0].split("\n")[0].rstrip('")')
            return f"{java_class}: {message}"
        first = (text.splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first}"

    def _info(self, status: Any) -> FileInfo:
        return FileInfo(self._url(status.path), bool(status.isdir), 0 if status.isdir else int(status.length))

    def _stat(self, path: str) -> FileInfo | None:
        try:
            return self._info(self._client.get_file_info(path))
        except FileNotFoundError:
            return None

    def _list(self, path: str, recursive: bool) -> list[FileInfo]:
        found = [self._info(status) for status in self._client.list_status(path, recursive)]
        return [info for info in found if not (recursive and info.is_dir)]

    def _read(self, path: str) -> bytes:
        with self._client.read(path) as reader:
            return bytes(reader.read())

    def _write(self, path: str, data: bytes) -> None:
        from hdfs_native import WriteOptions  # noqa: PLC0415

        head, _, name = path.rpartition("/")
        temporary = f"{head}/.{name}.tmp-{secrets.token_hex(4)}"
        writer = self._client.create(temporary, WriteOptions(overwrite=False))
        try:
            try:
                writer.write(data)
                writer.hsync()
            finally:
                writer.close()
            self._client.rename(temporary, path, True)
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the NameNode may be gone too
                self._client.delete(temporary, False)
            raise

    def _mkdirs(self, path: str) -> None:
        self._client.mkdirs(path, 0o755, True)

    def _move(self, src: str, dst: str) -> None:
        self._client.rename(src, dst, False)

    def _delete(self, path: str, is_dir: bool, recursive: bool) -> None:
        if not self._client.delete(path, recursive):
            raise FileSystemError(f"delete {path}: the NameNode answered false")

    def _open_output(self, path: str) -> Any:
        from hdfs_native import WriteOptions  # noqa: PLC0415

        return _NativeWriter(self._client.create(path, WriteOptions(overwrite=False)), self._url(path))


class _NativeWriter:
    """A file-like writer (``write``, ``tell``, ``flush``, ``close``) over one ``hdfs_native`` FileWriter,
    which has no ``tell`` of its own (pyarrow's Parquet writer asks for it). A failed write is a
    :class:`FileSystemError` naming the file's URL (a DataNode gone mid-write)."""

    def __init__(self, writer: Any, url: str) -> None:
        self._writer = writer
        self._url = url
        self._position = 0
        self._closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        try:
            written = int(self._writer.write(view))
        except Exception as exc:
            raise FileSystemError(f"write {self._url}: {NativeHdfsFileSystem.describe(exc)}") from exc
        if written != len(view):
            raise FileSystemError(f"write {self._url}: a write of {len(view)} bytes wrote {written}")
        self._position += written
        return written

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()
