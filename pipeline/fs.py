"""The warehouse's filesystems from Python, without a JVM: one small checked interface, four backends.

:class:`FileSystem` is everything the load job needs of a filesystem: the driver's metadata (plans,
manifests, the CURRENT pointer, run records) and its moves of staged files, the tasks' Parquet output
(:meth:`FileSystem.open_output`), and the tools that only read manifests (``lumber etl status``).
:func:`open_filesystem` picks the backend from the URL of ``[load] warehouse_url``:

* ``file:`` (or a plain path): :class:`ArrowFileSystem` on ``pyarrow.fs.LocalFileSystem``; files written by
  :meth:`~FileSystem.create` and :meth:`~FileSystem.rename` are ``fsync``-ed (file, then its folder), which
  is what HDFS's ``hsync`` gives the metadata on a cluster;
* ``hdfs://namenode:port/path``, chosen by ``[load] hdfs_client`` (:data:`HDFS_CLIENTS`):

  - ``auto`` (the default): libhdfs where it loads, else hdfs-native;
  - ``libhdfs``: :class:`ArrowFileSystem` on ``pyarrow.fs.HadoopFileSystem`` (libhdfs ships with Hadoop,
    on every Hadoop node; pyarrow finds it through ``ARROW_LIBHDFS_DIR`` or ``HADOOP_HOME``, and the Hadoop
    jars through ``CLASSPATH``, as pyarrow documents; no package on this project's machines ships it);
  - ``hdfs-native``: :class:`~pipeline.native_hdfs_file_system.NativeHdfsFileSystem`, a Rust client of
    HDFS's own RPC (no JVM, no libhdfs);
  - ``webhdfs``: :class:`~pipeline.webhdfs_file_system.WebHdfsFileSystem` over the WebHDFS REST API at
    ``[load] webhdfs_url`` (``http://namenode:9870``), for clusters that only open HTTP.

  Every client acts as ``$HADOOP_USER_NAME``, else the process's user (simple authentication).

Checked means: every call that fails raises :class:`~pipeline.load_errors.FileSystemError` naming the
path(s) (``raise ... from`` the backend's error), and so does a call that reports success without doing it:
a rename after which the source is still there or the destination is not, a write whose length differs.
Camus let a failed rename pass silently; this module never does.

Rename semantics differ between filesystems, so :meth:`FileSystem.rename` pins them down: HDFS renames a
file onto an existing file by failing and *into* an existing directory by moving the source below it; the
local ``rename(2)`` silently replaces an existing file or an empty directory. Here the destination must not
exist (checked first; the caller holds the job lock, so nothing races the check), its parent is created,
and after the call the source must be gone and the destination present. :meth:`FileSystem.create` with
``overwrite=False`` is create-exclusive the same way (check, then create, under the job lock).

Paths are URLs (``file:/abs/path``, ``hdfs://nn:8020/path``); :func:`normalize_url` turns a plain path into
an absolute ``file:`` URL. A backend maps a URL to its own path (the URL's path part), and listings map back.

What ran where: the contract suite (``tests/pipeline/test_fs.py``) runs every test against ``file:``,
hdfs-native and WebHDFS, the last two on the embedded HDFS of the tests (:mod:`lumber.dev.hdfs_server`). The
libhdfs path of :class:`ArrowFileSystem` has not run here: nothing on these machines ships libhdfs (README,
"HDFS").

Instances are safe to use from several threads as far as their backend is (pyarrow's filesystems, the
``hdfs_native`` and ``hdfs`` clients are); tasks open their own through :func:`open_filesystem` (one client
per worker process and NameNode).
"""

from __future__ import annotations

import contextlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.load_errors import FileSystemError

if TYPE_CHECKING:
    from pipeline.load_config import HdfsClient

#: The values of ``[load] hdfs_client`` (see the module docstring; ``HdfsClient`` types them).
HDFS_CLIENTS = ("auto", "libhdfs", "hdfs-native", "webhdfs")


class PathExistsError(FileSystemError):
    """A create-exclusive or a rename found its destination already there."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a listing."""

    url: str
    is_dir: bool
    length_bytes: int

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def normalize_url(location: str) -> str:
    """``location`` as a URL: a plain (relative or absolute) path becomes ``file:<absolute path>``;
    ``file:///x`` becomes ``file:/x``."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return "file:" + (os.path.normpath(parsed.path) if parsed.path else "/")
    if parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        return location.rstrip("/") or location
    return "file:" + str(Path(location).absolute())


def join(base: str, *parts: str) -> str:
    """``base/part/part``: URL joining that keeps the scheme and authority."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def relative_to(url: str, base: str) -> str:
    """The part of ``url`` below ``base`` (both qualified)."""
    stripped = base.rstrip("/") + "/"
    if not url.startswith(stripped):
        raise FileSystemError(f"{url} is not below {base}")
    return url[len(stripped) :]


def parent(url: str) -> str:
    stripped = url.rstrip("/")
    head, _, _ = stripped.rpartition("/")
    return head or stripped


class FileSystem(ABC):
    """Checked operations on one filesystem (see the module docstring).

    Subclasses implement the ``_``-prefixed primitives on paths; this class holds every check, so each
    backend behaves the same (``tests/pipeline/test_fs.py`` is the contract).
    """

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        parsed = urlparse(self.url)
        #: ``scheme:`` or ``scheme://authority``: what a path is prefixed with to make a URL.
        self._prefix = f"{parsed.scheme}://{parsed.netloc}" if parsed.netloc else f"{parsed.scheme}:"
        #: ``url`` qualified (what listings return).
        self.root = self.qualify(self.url)

    # ------------------------------------------------------------------------------ URLs

    def qualify(self, url: str) -> str:
        """``url`` as this filesystem names it (``file:/x`` for ``file:///x``)."""
        return self._prefix + self.path(url)

    def path(self, url: str) -> str:
        """The backend's path of ``url`` (which must be on this filesystem)."""
        normal = normalize_url(url)
        parsed = urlparse(normal)
        mine = urlparse(self.url)
        if parsed.scheme != mine.scheme or (parsed.netloc and parsed.netloc != mine.netloc):
            raise FileSystemError(f"{url} is not on the filesystem of {self.url}")
        path = os.path.normpath(parsed.path or "/")
        return path if path.startswith("/") else "/" + path

    def _url(self, path: str) -> str:
        return self._prefix + path

    @staticmethod
    def describe(exc: BaseException) -> str:
        """The backend's error ``exc`` in one line (its class and its message's first line)."""
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FileSystemError:
            raise
        except Exception as exc:  # the backend's OSError, ArrowException, HdfsError...
            raise FileSystemError(f"{what}: {self.describe(exc)}") from exc

    # ------------------------------------------------------------------------------ primitives

    @abstractmethod
    def _stat(self, path: str) -> FileInfo | None:
        """The entry at ``path``, ``None`` when there is none."""

    @abstractmethod
    def _list(self, path: str, recursive: bool) -> list[FileInfo]:
        """Entries below the existing directory ``path`` (files only when ``recursive``)."""

    @abstractmethod
    def _read(self, path: str) -> bytes: ...

    @abstractmethod
    def _write(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` with ``data``, durably, the parent existing."""

    @abstractmethod
    def _mkdirs(self, path: str) -> None: ...

    @abstractmethod
    def _move(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def _delete(self, path: str, is_dir: bool, recursive: bool) -> None: ...

    @abstractmethod
    def _open_output(self, path: str) -> Any:
        """A writable binary stream (``write``, ``close``) of a new file."""

    # ------------------------------------------------------------------------------ queries

    def stat(self, url: str) -> FileInfo | None:
        return self._call(f"stat {url}", self._stat, self.path(url))  # type: ignore[no-any-return]

    def exists(self, url: str) -> bool:
        return self.stat(url) is not None

    def is_dir(self, url: str) -> bool:
        found = self.stat(url)
        return found is not None and found.is_dir

    def length_bytes(self, url: str) -> int:
        found = self.stat(url)
        if found is None:
            raise FileSystemError(f"stat {url}: no such file")
        return found.length_bytes

    def list_dir(self, url: str) -> list[FileInfo]:
        """The entries of the directory ``url``, sorted by URL; a missing directory lists as empty."""
        if not self.is_dir(url):
            return []
        found: list[FileInfo] = self._call(f"list {url}", self._list, self.path(url), False)
        return sorted(found, key=lambda info: info.url)

    def list_files(self, url: str) -> list[FileInfo]:
        """Every file below ``url`` (recursively), sorted by URL; a missing directory lists as empty."""
        if not self.is_dir(url):
            return []
        found: list[FileInfo] = self._call(f"list {url}", self._list, self.path(url), True)
        return sorted(found, key=lambda info: info.url)

    def read_bytes(self, url: str) -> bytes:
        return self._call(f"read {url}", self._read, self.path(url))  # type: ignore[no-any-return]

    def read_text(self, url: str) -> str:
        try:
            return self.read_bytes(url).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileSystemError(f"{url}: not UTF-8 text: {exc}") from exc

    # ------------------------------------------------------------------------------ changes

    def mkdirs(self, url: str) -> None:
        found = self.stat(url)
        if found is not None and not found.is_dir:
            raise FileSystemError(f"mkdirs {url}: a file is in the way")
        if found is None:
            self._call(f"mkdirs {url}", self._mkdirs, self.path(url))
            if not self.is_dir(url):
                raise FileSystemError(f"mkdirs {url}: reported done, but there is no directory")

    def create(self, url: str, data: bytes, *, overwrite: bool) -> None:
        """Write ``data`` to ``url`` durably. ``overwrite=False`` is create-exclusive: raises
        :class:`PathExistsError` when ``url`` exists."""
        found = self.stat(url)
        if found is not None and (not overwrite or found.is_dir):
            raise PathExistsError(f"create {url}: already exists{' (a directory)' if found.is_dir else ''}")
        self.mkdirs(parent(url))
        self._call(f"create {url}", self._write, self.path(url), bytes(data))
        written = self.length_bytes(url)
        if written != len(data):
            raise FileSystemError(f"create {url}: expected {len(data)} bytes written, found {written}")

    def write_text(self, url: str, text: str, *, overwrite: bool) -> None:
        self.create(url, text.encode("utf-8"), overwrite=overwrite)

    @contextlib.contextmanager
    def open_output(self, url: str) -> Iterator[Any]:
        """A new file at ``url`` to stream into (create-exclusive; the parent is created), closed on exit."""
        if self.exists(url):
            raise PathExistsError(f"create {url}: already exists")
        self.mkdirs(parent(url))
        stream = self._call(f"create {url}", self._open_output, self.path(url))
        try:
            yield stream
        finally:
            self._call(f"close {url}", stream.close)

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, which must not exist (see the module docstring for why)."""
        if self.exists(dst):
            raise PathExistsError(f"rename {src} -> {dst}: the destination already exists")
        if not self.exists(src):
            raise FileSystemError(f"rename {src} -> {dst}: the source does not exist")
        self.mkdirs(parent(dst))
        self._call(f"rename {src} -> {dst}", self._move, self.path(src), self.path(dst))
        src_there, dst_there = self.exists(src), self.exists(dst)
        if src_there or not dst_there:
            raise FileSystemError(
                f"rename {src} -> {dst}: reported done, but the source "
                f"{'is still there' if src_there else 'is gone'} and the destination "
                f"{'exists' if dst_there else 'does not exist'}"
            )

    def delete(self, url: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        """Delete ``url``; a missing path raises unless ``missing_ok``; a non-empty directory needs
        ``recursive``."""
        found = self.stat(url)
        if found is None:
            if missing_ok:
                return
            raise FileSystemError(f"delete {url}: no such file or directory")
        if found.is_dir and not recursive and self.list_dir(url):
            raise FileSystemError(f"delete {url}: a directory that is not empty (recursive=False)")
        self._call(f"delete {url}", self._delete, self.path(url), found.is_dir, recursive)
        if self.exists(url):
            raise FileSystemError(f"delete {url}: reported done, but it is still there")

    @staticmethod
    def parent(url: str) -> str:
        return parent(url)


class ArrowFileSystem(FileSystem):
    """A pyarrow filesystem: ``LocalFileSystem`` for ``file:``, ``HadoopFileSystem`` (libhdfs) for
    ``hdfs://``."""

    def __init__(self, url: str, backend: pafs.FileSystem) -> None:
        self._fs = backend
        self._local = isinstance(backend, pafs.LocalFileSystem)
        super().__init__(url)

    def _info(self, info: pafs.FileInfo) -> FileInfo:
        is_dir = info.type == pafs.FileType.Directory
        return FileInfo(self._url(info.path), is_dir, 0 if is_dir else int(info.size or 0))

    def _stat(self, path: str) -> FileInfo | None:
        info = self._fs.get_file_info(path)
        return None if info.type == pafs.FileType.NotFound else self._info(info)

    def _list(self, path: str, recursive: bool) -> list[FileInfo]:
        found = self._fs.get_file_info(pafs.FileSelector(path, recursive=recursive))
        return [self._info(info) for info in found if not recursive or info.type == pafs.FileType.File]

    def _read(self, path: str) -> bytes:
        with self._fs.open_input_stream(path, compression=None) as stream:
            return bytes(stream.read())

    def _write(self, path: str, data: bytes) -> None:
        with self._fs.open_output_stream(path, compression=None) as stream:
            stream.write(data)
        if self._local:
            _fsync(path)

    def _mkdirs(self, path: str) -> None:
        self._fs.create_dir(path, recursive=True)

    def _move(self, src: str, dst: str) -> None:
        self._fs.move(src, dst)
        if self._local:
            _fsync(parent(dst))
            _fsync(parent(src))

    def _delete(self, path: str, is_dir: bool, recursive: bool) -> None:
        if is_dir:
            self._fs.delete_dir(path)
        else:
            self._fs.delete_file(path)

    def _open_output(self, path: str) -> Any:
        stream = self._fs.open_output_stream(path, compression=None)
        return _SyncOnClose(stream, path) if self._local else stream


class _SyncOnClose:
    """A local output stream that ``fsync``-s its file when closed (what ``hsync`` + close give on HDFS)."""

    def __init__(self, stream: pa.NativeFile, path: str) -> None:
        self._stream = stream
        self._path = path

    def write(self, data: Any) -> int:
        return int(self._stream.write(data))

    def tell(self) -> int:
        return int(self._stream.tell())

    def flush(self) -> None:
        self._stream.flush()

    @property
    def closed(self) -> bool:
        return bool(self._stream.closed)

    def close(self) -> None:
        if not self._stream.closed:
            self._stream.close()
            _fsync(self._path)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_BACKENDS: dict[tuple[str, ...], Any] = {}
_BACKENDS_LOCK = threading.Lock()


def open_filesystem(url: str, *, webhdfs_url: str = "", hdfs_client: HdfsClient = "auto") -> FileSystem:
    """The filesystem of ``url`` (see the module docstring for the choice). The backend (a libhdfs
    connection, an hdfs-native or a WebHDFS client) is opened once per process, NameNode and user."""
    normal = normalize_url(url)
    parsed = urlparse(normal)
    if parsed.scheme == "file":
        return ArrowFileSystem(normal, pafs.LocalFileSystem())
    if parsed.scheme != "hdfs":
        raise FileSystemError(
            f"{url}: filesystem {parsed.scheme!r} is not supported; the warehouse must be a local path, "
            "file:/..., or hdfs://namenode:port/..."
        )
    if hdfs_client not in HDFS_CLIENTS:
        raise FileSystemError(f"{url}: hdfs_client {hdfs_client!r} is not one of {', '.join(HDFS_CLIENTS)}")
    if hdfs_client == "webhdfs":
        from pipeline.webhdfs_file_system import WebHdfsFileSystem, webhdfs_client  # noqa: PLC0415

        if not webhdfs_url:
            raise FileSystemError(f"{url}: hdfs_client = 'webhdfs' needs [load] webhdfs_url (http://nn:9870)")
        client = _cached(("webhdfs", webhdfs_url), lambda: webhdfs_client(webhdfs_url))
        return WebHdfsFileSystem(normal, webhdfs_url, client=client)
    namenode = f"hdfs://{parsed.netloc}"
    if hdfs_client in ("auto", "libhdfs"):
        libhdfs = _cached(("libhdfs", namenode), lambda: _load_libhdfs(parsed))
        if isinstance(libhdfs, pafs.FileSystem):
            return ArrowFileSystem(normal, libhdfs)
        if hdfs_client == "libhdfs":
            first_line = (str(libhdfs).splitlines() or [type(libhdfs).__name__])[0]
            raise FileSystemError(
                f"{url}: cannot load libhdfs ({first_line}); on a Hadoop node set HADOOP_HOME (or "
                "ARROW_LIBHDFS_DIR) and CLASSPATH=$(hadoop classpath --glob), or set [load] hdfs_client = "
                "'hdfs-native'"
            ) from libhdfs
    from pipeline.native_hdfs_file_system import NativeHdfsFileSystem, native_client  # noqa: PLC0415

    return NativeHdfsFileSystem(normal, _cached(("hdfs-native", namenode), lambda: native_client(namenode)))


def _cached(key: tuple[str, ...], make: Any) -> Any:
    """The backend of ``key`` (and of ``$HADOOP_USER_NAME``) made once per process."""
    full = (*key, os.environ.get("HADOOP_USER_NAME", ""))
    with _BACKENDS_LOCK:
        if full not in _BACKENDS:
            _BACKENDS[full] = make()
        return _BACKENDS[full]


def _load_libhdfs(parsed: Any) -> pafs.FileSystem | Exception:
    """pyarrow's libhdfs filesystem of the NameNode ``parsed`` names, or why libhdfs cannot be loaded."""
    try:
        return pafs.HadoopFileSystem(parsed.hostname or "default", parsed.port or 8020)
    except (OSError, pa.ArrowException) as exc:
        return exc
