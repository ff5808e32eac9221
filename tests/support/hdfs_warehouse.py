"""Reading a warehouse on the embedded HDFS the way its users do, never through :mod:`pipeline.fs`: Spark
(its own Hadoop client), pyarrow and DuckDB through hdfs-native's fsspec filesystem."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

import duckdb
import pyarrow.dataset as ds

from pipeline.native_hdfs_fsspec import SharedReadHdfsFileSystem
from tests.support.load_job import PAYLOAD_COLUMNS


def fsspec_of(url: str) -> SharedReadHdfsFileSystem:
    parsed = urlparse(url)
    return SharedReadHdfsFileSystem(host=parsed.hostname, port=parsed.port)


def hdfs_rows(warehouse_url: str, topic: str) -> list[tuple[Any, ...]]:
    """The loaded rows of ``topic`` read with pyarrow over fsspec (:meth:`Produced.row_tuples`'s shape)."""
    fs = fsspec_of(warehouse_url)
    root = f"{urlparse(warehouse_url).path}/{topic}"
    if not fs.exists(root):
        return []
    table = ds.dataset(root, filesystem=fs, format="parquet", partitioning="hive").to_table()
    columns = [table.column(c).to_pylist() for c in (*PAYLOAD_COLUMNS, "_partition", "_offset")]
    return sorted(zip(*columns, strict=True))


def hdfs_offsets(warehouse_url: str, job: str) -> dict[tuple[str, int], int]:
    """The offsets of the latest manifest, read straight from HDFS."""
    fs = fsspec_of(warehouse_url)
    folder = f"{urlparse(warehouse_url).path}/_lumber/{job}/manifests"
    listed = [str(p) for p in fs.ls(folder, detail=False)] if fs.exists(folder) else []
    names = sorted(p for p in listed if p.endswith(".json"))
    if not names:
        return {}
    offsets = json.loads(fs.cat_file(names[-1]))["offsets"]
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


def hdfs_files(warehouse_url: str, below: str = "") -> set[str]:
    """Every file below ``warehouse_url/below``, relative to the warehouse."""
    fs = fsspec_of(warehouse_url)
    root = urlparse(warehouse_url).path
    start = f"{root}/{below}".rstrip("/")
    if not fs.exists(start):
        return set()
    return {path[len(root) + 1 :] for path in fs.find(start)}


def duckdb_count(warehouse_url: str, topic: str) -> tuple[int, int]:
    """``count(*), sum(_offset)`` of ``topic``'s Parquet read by DuckDB from HDFS (fsspec, no copy)."""
    connection = duckdb.connect()
    connection.register_filesystem(fsspec_of(warehouse_url))
    found = connection.execute(
        f"SELECT count(*), sum(_offset) FROM read_parquet('{warehouse_url}/{topic}/*/*/*.parquet', "
        "hive_partitioning = true)"
    ).fetchone()
    assert found is not None
    return int(found[0]), int(found[1] or 0)
