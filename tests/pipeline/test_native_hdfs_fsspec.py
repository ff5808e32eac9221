"""DuckDB's parallel reads of Parquet on the embedded HDFS through :mod:`pipeline.native_hdfs_fsspec`."""

from __future__ import annotations

import threading
from urllib.parse import urlparse

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.fs import join, open_filesystem
from pipeline.native_hdfs_fsspec import SharedReadHdfsFileSystem


def test_duckdb_scans_files_with_many_row_groups_on_four_threads(hdfs_url: str) -> None:
    fs = open_filesystem(hdfs_url)
    table = pa.table({"a": list(range(100_000)), "b": [f"x{i % 1000}" for i in range(100_000)]})
    for i in range(3):
        with fs.open_output(join(hdfs_url, "t", f"p{i}.parquet")) as stream:
            pq.write_table(table, stream, row_group_size=10_000)
    parsed = urlparse(hdfs_url)
    connection = duckdb.connect()
    connection.execute("SET threads TO 4")
    connection.register_filesystem(SharedReadHdfsFileSystem(host=parsed.hostname, port=parsed.port))
    found = connection.execute(
        f"SELECT count(*), sum(a), count(DISTINCT b) FROM read_parquet('{hdfs_url}/t/*.parquet')"
    ).fetchone()
    assert found == (300_000, 3 * sum(range(100_000)), 1000)


def test_one_open_file_reads_at_each_threads_own_position(hdfs_url: str) -> None:
    data = bytes(range(256)) * 4096
    fs = open_filesystem(hdfs_url)
    fs.create(join(hdfs_url, "f.bin"), data, overwrite=False)
    parsed = urlparse(hdfs_url)
    shared = SharedReadHdfsFileSystem(host=parsed.hostname, port=parsed.port).open(f"{parsed.path}/f.bin")
    wrong: list[int] = []

    def reader(start: int) -> None:
        for offset in range(start, len(data) - 4096, 65_536):
            shared.seek(offset)
            if shared.read(4096) != data[offset : offset + 4096]:
                wrong.append(offset)

    threads = [threading.Thread(target=reader, args=(n * 997,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert wrong == []
    shared.seek(-10, 2)
    assert shared.read() == data[-10:]
