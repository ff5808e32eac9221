"""Step 7 of ``lumber demo`` (:mod:`lumber.demo`): DuckDB on the Parquet files as they are, and the loaded
totals checked against what was produced.

DuckDB reads the warehouse where it is: a local folder directly, an ``hdfs://`` warehouse through fsspec
with hdfs-native's filesystem (:func:`duckdb_root`: registered with the connection, so ``read_parquet``
globs and reads the files over HDFS's RPC and data transfer protocol; nothing is copied to local disk; the
files are opened by :class:`~pipeline.native_hdfs_fsspec.SharedReadHdfsFileSystem`, whose readers take
DuckDB's parallel reads of one file)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from lumber.demo_text import count_text, format_table
from lumber.demo_traffic import TOPICS, TrafficSpec


def duckdb_root(connection: Any, warehouse_url: str) -> str:
    """What DuckDB's ``read_parquet`` paths start with for ``warehouse_url``: the local path of a ``file:``
    warehouse, or the ``hdfs://`` URL itself once hdfs-native's fsspec filesystem is registered."""
    parsed = urlparse(warehouse_url)
    if parsed.scheme != "hdfs":
        return parsed.path if parsed.scheme == "file" else warehouse_url
    from pipeline.native_hdfs_fsspec import SharedReadHdfsFileSystem  # noqa: PLC0415 - hdfs:// only

    connection.register_filesystem(SharedReadHdfsFileSystem(host=parsed.hostname, port=parsed.port))
    return warehouse_url.rstrip("/")


def query_warehouse(
    say: Callable[[str], None],
    warehouse_url: str,
    shown_warehouse: str,
    spec: TrafficSpec,
    ids: Mapping[str, int],
    expected: Mapping[str, int],
) -> bool:
    """Print the queries and their results with ``say`` (the warehouse shown as ``shown_warehouse``);
    False if a topic's loaded and quarantined rows do not add up to what was produced."""
    try:
        import duckdb  # noqa: PLC0415 - a dev dependency: `make demo` installs it
    except ImportError:
        say("  DuckDB is not installed (pip install duckdb): skipping the query")
        return True
    connection = duckdb.connect()
    warehouse = duckdb_root(connection, warehouse_url)
    root = warehouse.replace("'", "''")
    views = f"read_parquet('{root}/page_view/*/*/*.parquet', hive_partitioning = true)"
    v1 = ids["page_view"]
    queries = [
        (
            "page views per hour and host; v1 and v2 rows side by side in one table",
            (
                "SELECT dt, hr, host, count(*) AS page_views,\n"
                f"       count(*) FILTER (WHERE _schema_id = {v1}) AS v1,\n"
                f"       count(*) FILTER (WHERE _schema_id <> {v1}) AS v2,\n"
                "       round(avg(load_time_ms)) AS avg_load_time_ms\n"
                f"FROM {views}\nGROUP BY ALL ORDER BY ALL"
            ),
        ),
        (
            "the quarantined messages, with the reason the load gave",
            (
                "SELECT _topic AS topic, hr, _reason AS reason, count(*) AS messages\n"
                f"FROM read_parquet('{root}/_errors/*/*/*/*.parquet', hive_partitioning = true)\n"
                "GROUP BY ALL ORDER BY ALL"
            ),
        ),
    ]
    try:
        for title, sql in queries:
            say(f"  -- {title}")
            for line in sql.replace(root, shown_warehouse).splitlines():
                say(f"  {line}")
            relation = connection.sql(sql)
            say("")
            for line in format_table(relation.columns, relation.fetchall()):
                say(f"    {line}")
            say("")
        ok = True
        for topic in TOPICS:
            loaded = connection.execute(
                "SELECT count(*) FROM read_parquet(?)", [f"{warehouse}/{topic}/*/*/*.parquet"]
            ).fetchall()[0][0]
            quarantined = connection.execute(
                "SELECT count(*) FROM read_parquet(?) WHERE _topic = ?",
                [f"{warehouse}/_errors/*/*/*/*.parquet", topic],
            ).fetchall()[0][0]
            good = expected[topic] - (spec.malformed if topic == "page_view" else 0)
            mark = "ok" if loaded == good and loaded + quarantined == expected[topic] else "MISMATCH"
            ok &= mark == "ok"
            say(
                f"  {mark:>8}: {topic:<10} produced {count_text(expected[topic]):>6} = "
                f"loaded {count_text(loaded):>6}"
                f" + quarantined {quarantined}"
            )
    finally:
        connection.close()
    return ok
