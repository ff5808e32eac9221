"""The filesystem backends a test can run on, and a way to look at their files from outside
:mod:`pipeline.fs`.

* :data:`BACKENDS`: ``file`` (pyarrow's LocalFileSystem), ``hdfs-native`` and ``webhdfs`` (the embedded HDFS
  of the tests, the session's ``hdfs_server`` fixture: a real NameNode and DataNode), each HDFS one marked
  ``hdfs``; ``libhdfs`` too when ``LUMBER_TEST_LIBHDFS_URL`` names a folder on a Hadoop node's HDFS.
  Parametrize a fixture with ``params=BACKENDS`` and open the filesystem with :func:`backend_filesystem`:
  test ids then name the backend (``[file]``, ``[hdfs-native]``, ``[webhdfs]``). An HDFS backend starts
  the session's Spark first (see :func:`backend_filesystem`).
* :class:`Outside`: one folder's files listed, read and written by pathlib (``file:``) or hdfs-native's
  fsspec filesystem (``hdfs://``), never through :mod:`pipeline.fs`, so a test sees what is on disk and can
  put there what another program would.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from lumber.dev.hdfs_server import HdfsServer
from pipeline.fs import FileSystem, join, open_filesystem
from pipeline.native_hdfs_file_system import NativeHdfsFileSystem
from pipeline.webhdfs_file_system import WebHdfsFileSystem
from tests.support.hdfs_warehouse import fsspec_of

BACKENDS = [
    "file",
    pytest.param("hdfs-native", marks=pytest.mark.hdfs),
    pytest.param("webhdfs", marks=pytest.mark.hdfs),
]
if os.environ.get("LUMBER_TEST_LIBHDFS_URL"):
    BACKENDS.append("libhdfs")


@contextlib.contextmanager
def backend_filesystem(request: pytest.FixtureRequest, tmp_path: Path, folder: str) -> Iterator[FileSystem]:
    """A filesystem of the backend ``request.param`` rooted at a new, empty folder (under ``tmp_path`` for
    ``file``, ``/<folder>/<hex>`` on HDFS), deleted afterwards. HDFS backends use the session's
    ``hdfs_server``."""
    if request.param == "file":
        yield open_filesystem(str(tmp_path))
        return
    if request.param == "libhdfs":
        base = join(os.environ["LUMBER_TEST_LIBHDFS_URL"], secrets.token_hex(4))
        found = open_filesystem(base, hdfs_client="libhdfs")
    else:
        server: HdfsServer = request.getfixturevalue("hdfs_server")
        base = f"{server.url}/{folder}/{secrets.token_hex(4)}"
        found = open_filesystem(base, webhdfs_url=server.webhdfs_url, hdfs_client=request.param)
        assert isinstance(
            found, NativeHdfsFileSystem if request.param == "hdfs-native" else WebHdfsFileSystem
        )
    found.mkdirs(base)
    try:
        yield found
    finally:
        found.delete(base, recursive=True, missing_ok=True)


class Outside:
    """The folder ``url`` (``file:`` or ``hdfs://``) seen without :mod:`pipeline.fs`."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        self.url = url
        self.path = parsed.path.rstrip("/")
        self._hdfs = fsspec_of(url) if parsed.scheme == "hdfs" else None

    def names(self) -> list[str]:
        """The names in the folder, sorted (none when it does not exist)."""
        if self._hdfs is None:
            folder = Path(self.path)
            return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        if not self._hdfs.exists(self.path):
            return []
        return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in self._hdfs.ls(self.path, detail=False))

    def read(self, name: str) -> bytes:
        if self._hdfs is None:
            return Path(self.path, name).read_bytes()
        return bytes(self._hdfs.cat_file(f"{self.path}/{name}"))

    def write(self, name: str, data: bytes) -> None:
        """``data`` as the file ``name`` (the folder created), as another program would leave it."""
        if self._hdfs is None:
            Path(self.path).mkdir(parents=True, exist_ok=True)
            Path(self.path, name).write_bytes(data)
            return
        self._hdfs.makedirs(self.path, exist_ok=True)
        self._hdfs.pipe_file(f"{self.path}/{name}", data)
