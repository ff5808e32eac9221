"""The filesystem contract: every backend of :mod:`pipeline.fs` must pass every test here.

Each test runs on every backend that can run on this machine, and its id names the backend: ``[file]``
(pyarrow's LocalFileSystem), ``[hdfs-native]`` and ``[webhdfs]`` (the embedded HDFS of the tests, a real
NameNode and DataNode: :mod:`lumber.dev.hdfs_server`). libhdfs is not among them: no package on this
project's machines ships it (README, "HDFS"); ``LUMBER_TEST_LIBHDFS_URL`` (``hdfs://namenode:8020/tmp/x`` on
a Hadoop node) adds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from pipeline.fs import (
    HDFS_CLIENTS,
    ArrowFileSystem,
    FileSystem,
    PathExistsError,
    join,
    normalize_url,
    open_filesystem,
    relative_to,
)
from pipeline.load_config import HdfsClient
from pipeline.load_errors import FileSystemError
from pipeline.native_hdfs_file_system import NativeHdfsFileSystem
from pipeline.webhdfs_file_system import WebHdfsFileSystem
from tests.support.fs_backends import BACKENDS, backend_filesystem


@pytest.fixture(params=BACKENDS)
def fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FileSystem]:
    with backend_filesystem(request, tmp_path, "contract") as found:
        yield found


def test_urls(tmp_path: Path) -> None:
    assert normalize_url("/data/w/") == "file:/data/w"
    assert normalize_url("file:///data/w/") == "file:/data/w"
    assert normalize_url("hdfs://nn:8020/w/") == "hdfs://nn:8020/w"
    assert normalize_url("rel").startswith("file:/")
    assert join("hdfs://nn/w", "a/", "/b") == "hdfs://nn/w/a/b"
    assert relative_to("file:/w/a/b", "file:/w") == "a/b"
    with pytest.raises(FileSystemError, match="not below"):
        relative_to("file:/x/a", "file:/w")
    fs = open_filesystem(f"file://{tmp_path}")
    assert fs.root == f"file:{tmp_path}"
    assert isinstance(fs, ArrowFileSystem)
    with pytest.raises(FileSystemError, match="'s3' is not supported"):
        open_filesystem("s3://bucket/w")
    with pytest.raises(FileSystemError, match="not on the filesystem"):
        fs.exists("hdfs://nn:8020/w")


def test_the_hdfs_client_is_chosen_by_hdfs_client() -> None:
    assert get_args(HdfsClient) == HDFS_CLIENTS
    # no libhdfs here: auto falls back to hdfs-native (opening makes no request)
    assert isinstance(open_filesystem("hdfs://127.0.0.1:1/w"), NativeHdfsFileSystem)
    assert isinstance(
        open_filesystem("hdfs://127.0.0.1:1/w", hdfs_client="hdfs-native"), NativeHdfsFileSystem
    )
    with pytest.raises(FileSystemError, match=r"hdfs://127\.0\.0\.1:1/w: cannot load libhdfs .*hdfs-native"):
        open_filesystem("hdfs://127.0.0.1:1/w", hdfs_client="libhdfs")
    with pytest.raises(FileSystemError, match=r"hdfs_client = 'webhdfs' needs \[load\] webhdfs_url"):
        open_filesystem("hdfs://127.0.0.1:1/w", hdfs_client="webhdfs")
    webhdfs = open_filesystem("hdfs://127.0.0.1:1/w", webhdfs_url="http://127.0.0.1:1", hdfs_client="webhdfs")
    assert isinstance(webhdfs, WebHdfsFileSystem)


def test_create_exclusive_read_and_overwrite(fs: FileSystem) -> None:
    url = join(fs.root, "a", "b", "x.json")
    fs.write_text(url, '{"v": 1}', overwrite=False)  # creates the parents
    assert fs.read_text(url) == '{"v": 1}'
    assert fs.length_bytes(url) == 8
    assert fs.is_dir(join(fs.root, "a", "b"))
    assert not fs.is_dir(url)
    with pytest.raises(PathExistsError, match="already exists"):
        fs.write_text(url, "other", overwrite=False)
    fs.write_text(url, "other", overwrite=True)
    assert fs.read_text(url) == "other"
    with pytest.raises(PathExistsError, match="a directory"):
        fs.write_text(join(fs.root, "a"), "x", overwrite=True)
    with pytest.raises(FileSystemError, match="no such file"):
        fs.length_bytes(join(fs.root, "missing"))
    with pytest.raises(FileSystemError, match=r"missing\.json"):
        fs.read_bytes(join(fs.root, "missing.json"))
    fs.create(join(fs.root, "bin"), bytes(range(256)), overwrite=False)
    assert fs.read_bytes(join(fs.root, "bin")) == bytes(range(256))


def test_rename_is_checked(fs: FileSystem) -> None:
    src = join(fs.root, "src.bin")
    dst = join(fs.root, "deep", "er", "dst.bin")
    fs.create(src, b"\x00\x01\x02", overwrite=False)
    fs.rename(src, dst)  # creates the parent
    assert fs.read_bytes(dst) == b"\x00\x01\x02"
    assert not fs.exists(src)
    with pytest.raises(FileSystemError) as caught:
        fs.rename(src, join(fs.root, "nowhere.bin"))  # the source is gone
    assert "src.bin" in str(caught.value)
    assert "nowhere.bin" in str(caught.value)
    # rename(2) would silently replace an existing file or an empty directory: refused here
    other = join(fs.root, "other.bin")
    fs.create(other, b"x", overwrite=False)
    with pytest.raises(PathExistsError, match="destination already exists"):
        fs.rename(other, dst)
    fs.mkdirs(join(fs.root, "empty"))
    with pytest.raises(PathExistsError):
        fs.rename(other, join(fs.root, "empty"))  # HDFS would move it *into* the directory
    assert fs.is_dir(join(fs.root, "empty"))
    assert fs.list_dir(join(fs.root, "empty")) == []
    assert fs.read_bytes(dst) == b"\x00\x01\x02"
    assert fs.read_bytes(other) == b"x"
    # a directory moves with its contents
    fs.create(join(fs.root, "tree", "f"), b"f", overwrite=False)
    fs.rename(join(fs.root, "tree"), join(fs.root, "moved", "tree"))
    assert fs.read_bytes(join(fs.root, "moved", "tree", "f")) == b"f"


def test_listing_and_delete(fs: FileSystem) -> None:
    for rel in ("d/1.txt", "d/e/2.txt", "d/e/f/3.txt"):
        fs.write_text(join(fs.root, rel), rel, overwrite=False)
    files = [
        (relative_to(info.url, fs.root), info.length_bytes) for info in fs.list_files(join(fs.root, "d"))
    ]
    assert files == [("d/1.txt", 7), ("d/e/2.txt", 9), ("d/e/f/3.txt", 11)]
    entries = [(info.name, info.is_dir) for info in fs.list_dir(join(fs.root, "d"))]
    assert entries == [("1.txt", False), ("e", True)]
    assert fs.list_dir(join(fs.root, "missing")) == []
    assert fs.list_files(join(fs.root, "missing")) == []
    with pytest.raises(FileSystemError, match="no such file"):
        fs.delete(join(fs.root, "missing"))
    fs.delete(join(fs.root, "missing"), missing_ok=True)
    with pytest.raises(FileSystemError, match="not empty"):
        fs.delete(join(fs.root, "d"))
    assert fs.exists(join(fs.root, "d", "e", "f", "3.txt"))
    fs.delete(join(fs.root, "d", "1.txt"))
    assert not fs.exists(join(fs.root, "d", "1.txt"))
    fs.delete(join(fs.root, "d"), recursive=True)
    assert not fs.exists(join(fs.root, "d"))


def test_mkdirs_refuses_a_file_in_the_way(fs: FileSystem) -> None:
    fs.create(join(fs.root, "f"), b"1", overwrite=False)
    with pytest.raises(FileSystemError, match="a file is in the way"):
        fs.mkdirs(join(fs.root, "f"))
    fs.mkdirs(join(fs.root, "x", "y"))
    fs.mkdirs(join(fs.root, "x", "y"))  # again: nothing to do
    assert fs.is_dir(join(fs.root, "x", "y"))


def test_open_output_streams_a_parquet_file_readers_can_read(fs: FileSystem) -> None:
    url = join(fs.root, "t", "dt=2026-11-22", "part-0.parquet")
    table = pa.table({"a": list(range(1000)), "b": [f"v{i % 7}" for i in range(1000)]})
    with fs.open_output(url) as stream:
        pq.write_table(table, stream)
    assert fs.length_bytes(url) > 0
    assert pq.read_table(pa.BufferReader(fs.read_bytes(url))).equals(table)
    with pytest.raises(PathExistsError), fs.open_output(url):
        pass
    assert pq.read_table(pa.BufferReader(fs.read_bytes(url))).equals(table)


def test_a_rename_that_does_nothing_is_an_error(tmp_path: Path) -> None:
    class MoveDoesNothing(ArrowFileSystem):
        """A backend whose rename returns without moving: what a rename answering false amounts to."""

        def _move(self, src: str, dst: str) -> None:
            return None

    fs = MoveDoesNothing(str(tmp_path), pafs.LocalFileSystem())
    fs.create(join(fs.root, "a"), b"a", overwrite=False)
    with pytest.raises(FileSystemError, match=r"rename .*/a -> .*/b: reported done, but the source is still"):
        fs.rename(join(fs.root, "a"), join(fs.root, "b"))
