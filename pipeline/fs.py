"""Hadoop filesystems from the driver, through Spark's JVM gateway: every operation checked.

The load job's metadata (plans, manifests, the CURRENT pointer) and its moves of staged files go through
``org.apache.hadoop.fs.FileSystem``, the same client Spark writes Parquet with, so any Hadoop filesystem
works: ``file://`` by default, ``hdfs://`` on a cluster (and s3a://, abfs://... where their jars are on
Spark's classpath). :meth:`HadoopFileSystem.for_spark` uses a running SparkSession's Hadoop configuration;
:func:`launched_filesystem` starts a bare JVM gateway (no SparkContext) for tools such as
``lumber etl status``.

Checked means: a call that returns ``false`` (Hadoop's way of failing ``rename``, ``delete``, ``mkdirs``)
raises :class:`~pipeline.load_errors.FileSystemError` naming the path(s), and Java exceptions are mapped to
it too (``raise ... from``). Camus let a failed rename pass silently; this module never does.

Rename semantics differ between filesystems, so :meth:`HadoopFileSystem.rename` pins them down:

* HDFS renames a file onto an existing file by failing (``false``), and *into* an existing directory by
  moving the source below it; the local filesystem (``java.io.File.renameTo``, i.e. ``rename(2)``)
  silently replaces an existing file or an empty directory, and falls back to copy-and-delete when the
  rename itself fails (e.g. across mounts). Here the destination must not exist (checked first, and the
  caller holds the job lock, so nothing races the check), its parent is created, and after the call the
  source must be gone and the destination present.
* :meth:`HadoopFileSystem.create` with ``overwrite=False`` is create-exclusive: HDFS makes that atomic in
  the NameNode; on the local filesystem it is check-then-create (again: under the job lock).

Paths are URLs (``file:/abs/path``, ``hdfs://nn:8020/path``); :func:`normalize_url` turns a plain path into
an absolute ``file:`` URL. Not thread-safe per instance beyond what Hadoop's FileSystem is (it is).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.load_errors import FileSystemError


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
    """``location`` as a URL: a plain (relative or absolute) path becomes ``file:<absolute path>``."""
    parsed = urlparse(location)
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
    """The part of ``url`` below ``base`` (both as Hadoop qualifies them)."""
    stripped = base.rstrip("/") + "/"
    if not url.startswith(stripped):
        raise FileSystemError(f"{url} is not below {base}")
    return url[len(stripped) :]


class HadoopFileSystem:
    """Checked operations on one Hadoop filesystem (see the module docstring)."""

    def __init__(self, jvm: Any, hadoop_conf: Any, url: str) -> None:
        self._jvm = jvm
        self._conf = hadoop_conf
        self._Path = jvm.org.apache.hadoop.fs.Path
        self.url = normalize_url(url)
        try:
            root = self._Path(self.url)
            self._fs = root.getFileSystem(hadoop_conf)
            #: ``url`` as the filesystem qualifies it (what listings return).
            self.root = str(self._fs.makeQualified(root).toString())
        except Exception as exc:  # py4j's Py4JJavaError and friends
            raise FileSystemError(f"{self.url}: cannot open the filesystem: {_java_message(exc)}") from exc

    @classmethod
    def for_spark(cls, spark: Any, url: str) -> HadoopFileSystem:
        """The filesystem of ``url`` with the Hadoop configuration of the running SparkSession."""
        return cls(spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration(), url)

    # ------------------------------------------------------------------------------ helpers

    def qualify(self, url: str) -> str:
        """``url`` as the filesystem qualifies it (``file:/x`` for ``file:///x``)."""
        return str(self._fs.makeQualified(self._Path(url)).toString())

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            message = _java_message(exc)
            if "FileAlreadyExistsException" in message:
                raise PathExistsError(f"{what}: already exists ({message})") from exc
            raise FileSystemError(f"{what}: {message}") from exc

    # ------------------------------------------------------------------------------ queries

    def exists(self, url: str) -> bool:
        return bool(self._call(f"exists {url}", self._fs.exists, self._Path(url)))

    def is_dir(self, url: str) -> bool:
        return bool(self._call(f"is a directory {url}", self._fs.isDirectory, self._Path(url)))

    def length_bytes(self, url: str) -> int:
        status = self._call(f"stat {url}", self._fs.getFileStatus, self._Path(url))
        return int(status.getLen())

    def list_dir(self, url: str) -> list[FileInfo]:
        """The entries of the directory ``url``, sorted by URL; a missing directory lists as empty."""
        if not self.exists(url):
            return []
        statuses = self._call(f"list {url}", self._fs.listStatus, self._Path(url))
        out = [
            FileInfo(str(s.getPath().toString()), bool(s.isDirectory()), int(s.getLen())) for s in statuses
        ]
        return sorted(out, key=lambda info: info.url)

    def list_files(self, url: str) -> list[FileInfo]:
        """Every file below ``url`` (recursively), sorted by URL; a missing directory lists as empty."""
        if not self.exists(url):
            return []
        out: list[FileInfo] = []
        iterator = self._call(f"list {url}", self._fs.listFiles, self._Path(url), True)
        while self._call(f"list {url}", iterator.hasNext):
            status = iterator.next()
            out.append(FileInfo(str(status.getPath().toString()), False, int(status.getLen())))
        return sorted(out, key=lambda info: info.url)

    def read_bytes(self, url: str) -> bytes:
        stream = self._call(f"open {url}", self._fs.open, self._Path(url))
        try:
            data = self._call(f"read {url}", self._jvm.org.apache.commons.io.IOUtils.toByteArray, stream)
        finally:
            self._call(f"close {url}", stream.close)
        return bytes(data)

    def read_text(self, url: str) -> str:
        try:
            return self.read_bytes(url).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileSystemError(f"{url}: not UTF-8 text: {exc}") from exc

    # ------------------------------------------------------------------------------ changes

    def mkdirs(self, url: str) -> None:
        if not self._call(f"mkdirs {url}", self._fs.mkdirs, self._Path(url)):
            raise FileSystemError(f"mkdirs {url}: the filesystem answered false")

    def create(self, url: str, data: bytes, *, overwrite: bool) -> None:
        """Write ``data`` to ``url`` and close it (``hsync`` first: durable when this returns).

        ``overwrite=False`` is create-exclusive: :class:`PathExistsError` when ``url`` exists.
        """
        if not overwrite and self.exists(url):
            raise PathExistsError(f"create {url}: already exists")
        self.mkdirs(self.parent(url))
        stream = self._call(f"create {url}", self._fs.create, self._Path(url), overwrite)
        try:
            self._call(f"write {url}", stream.write, bytearray(data))
            self._call(f"sync {url}", stream.hsync)
        finally:
            self._call(f"close {url}", stream.close)
        written = self.length_bytes(url)
        if written != len(data):
            raise FileSystemError(f"create {url}: expected {len(data)} bytes written, found {written}")

    def write_text(self, url: str, text: str, *, overwrite: bool) -> None:
        self.create(url, text.encode("utf-8"), overwrite=overwrite)

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, which must not exist (see the module docstring for why)."""
        if self.exists(dst):
            raise PathExistsError(f"rename {src} -> {dst}: the destination already exists")
        self.mkdirs(self.parent(dst))
        if not self._call(f"rename {src} -> {dst}", self._fs.rename, self._Path(src), self._Path(dst)):
            raise FileSystemError(f"rename {src} -> {dst}: the filesystem answered false")
        if self.exists(src) or not self.exists(dst):
            raise FileSystemError(
                f"rename {src} -> {dst}: reported done, but the source "
                f"{'is still there' if self.exists(src) else 'is gone'} and the destination "
                f"{'exists' if self.exists(dst) else 'does not exist'}"
            )

    def delete(self, url: str, *, recursive: bool = False, missing_ok: bool = False) -> None:
        """Delete ``url``; a missing path raises unless ``missing_ok``."""
        if not self.exists(url):
            if missing_ok:
                return
            raise FileSystemError(f"delete {url}: no such file or directory")
        if not self._call(f"delete {url}", self._fs.delete, self._Path(url), recursive):
            raise FileSystemError(f"delete {url}: the filesystem answered false")

    @staticmethod
    def parent(url: str) -> str:
        stripped = url.rstrip("/")
        head, _, _ = stripped.rpartition("/")
        return head or stripped


@contextlib.contextmanager
def launched_filesystem(url: str) -> Iterator[HadoopFileSystem]:
    """The filesystem of ``url`` in a bare JVM with Spark's jars (no SparkContext), for tools; the JVM is
    stopped on exit. Takes a few seconds to start."""
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415 - only tools pay for it

    gateway: Any = launch_gateway()  # type: ignore[no-untyped-call]
    try:
        jvm = gateway.jvm
        yield HadoopFileSystem(jvm, jvm.org.apache.hadoop.conf.Configuration(), url)
    finally:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
                proc.wait(timeout=30)


def _java_message(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return f"{java.getClass().getName()}: {java.getMessage()}"
    return f"{type(exc).__name__}: {exc}"
