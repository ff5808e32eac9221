from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.fs import HadoopFileSystem, PathExistsError, join, normalize_url, relative_to
from pipeline.load_errors import FileSystemError


@pytest.fixture
def fs(spark: Any, tmp_path: Path) -> HadoopFileSystem:
    return HadoopFileSystem.for_spark(spark, str(tmp_path))


def test_urls() -> None:
    assert normalize_url("/data/w/") == "file:/data/w"
    assert normalize_url("hdfs://nn:8020/w/") == "hdfs://nn:8020/w"
    assert normalize_url("rel").startswith("file:/")
    assert join("hdfs://nn/w", "a/", "/b") == "hdfs://nn/w/a/b"
    assert relative_to("file:/w/a/b", "file:/w") == "a/b"
    with pytest.raises(FileSystemError, match="not below"):
        relative_to("file:/x/a", "file:/w")


def test_create_exclusive_read_and_overwrite(fs: HadoopFileSystem, tmp_path: Path) -> None:
    url = join(fs.root, "a", "b", "x.json")
    fs.write_text(url, '{"v": 1}', overwrite=False)
    assert (tmp_path / "a" / "b" / "x.json").read_text() == '{"v": 1}'
    assert fs.read_text(url) == '{"v": 1}'
    assert fs.length_bytes(url) == 8
    with pytest.raises(PathExistsError, match="already exists"):
        fs.write_text(url, "other", overwrite=False)
    fs.write_text(url, "other", overwrite=True)
    assert fs.read_text(url) == "other"


def test_rename_is_checked(fs: HadoopFileSystem, tmp_path: Path) -> None:
    src = join(fs.root, "src.bin")
    dst = join(fs.root, "deep", "er", "dst.bin")
    fs.create(src, b"\x00\x01\x02", overwrite=False)
    fs.rename(src, dst)  # creates the parent
    assert (tmp_path / "deep" / "er" / "dst.bin").read_bytes() == b"\x00\x01\x02"
    assert not (tmp_path / "src.bin").exists()
    with pytest.raises(FileSystemError) as caught:
        fs.rename(src, join(fs.root, "nowhere.bin"))  # the source is gone: Hadoop answers false
    assert "src.bin" in str(caught.value)
    assert "nowhere.bin" in str(caught.value)
    # local rename(2) would silently replace an existing file or an empty directory: refused here
    other = join(fs.root, "other.bin")
    fs.create(other, b"x", overwrite=False)
    with pytest.raises(PathExistsError, match="destination already exists"):
        fs.rename(other, dst)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PathExistsError):
        fs.rename(other, join(fs.root, "empty"))
    assert (tmp_path / "empty").is_dir()
    assert (tmp_path / "deep" / "er" / "dst.bin").read_bytes() == b"\x00\x01\x02"


def test_listing_and_delete(fs: HadoopFileSystem, tmp_path: Path) -> None:
    for rel in ("d/1.txt", "d/e/2.txt", "d/e/f/3.txt"):
        fs.write_text(join(fs.root, rel), rel, overwrite=False)
    files = [relative_to(info.url, fs.root) for info in fs.list_files(join(fs.root, "d"))]
    assert [f for f in files if not f.rsplit("/", 1)[-1].startswith(".")] == [
        "d/1.txt",
        "d/e/2.txt",
        "d/e/f/3.txt",
    ]
    entries = [
        (info.name, info.is_dir) for info in fs.list_dir(join(fs.root, "d")) if not info.name.startswith(".")
    ]
    assert entries == [("1.txt", False), ("e", True)]
    assert fs.list_dir(join(fs.root, "missing")) == []
    with pytest.raises(FileSystemError, match="no such file"):
        fs.delete(join(fs.root, "missing"))
    fs.delete(join(fs.root, "missing"), missing_ok=True)
    fs.delete(join(fs.root, "d"), recursive=True)
    assert not (tmp_path / "d").exists()
