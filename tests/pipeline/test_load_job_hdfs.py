"""The load job (the session's local[2] Spark) writing to the embedded HDFS (a real NameNode and DataNode):
the scenarios of ``test_load_job.py`` on ``hdfs://``, read back by Spark's own Hadoop client, pyarrow and
DuckDB (hdfs-native's fsspec filesystem), never through :mod:`pipeline.fs`."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from lumber.dev.hdfs_server import HdfsServer
from pipeline.load_errors import InjectedFault
from pipeline.load_job import run_load
from tests.support.hdfs_warehouse import duckdb_count, hdfs_files, hdfs_offsets, hdfs_rows
from tests.support.load_job import BASE_MS, HOUR_MS, PAGE_VIEW_DDL, LoadStack, load_stack
from tests.support.registry import RegistryProcess

pytestmark = pytest.mark.hdfs


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def assert_loaded_exactly(stack: LoadStack, spark: Any, warehouse: str) -> None:
    """Spark, pyarrow and DuckDB all read exactly the produced rows from HDFS; offsets match the data."""
    produced = stack.views.produced
    table = spark.read.parquet(f"{warehouse}/{stack.topic}")
    assertDataFrameEqual(table, spark.createDataFrame(produced.rows, PAGE_VIEW_DDL))
    assert hdfs_rows(warehouse, stack.topic) == produced.row_tuples()
    assert duckdb_count(warehouse, stack.topic) == (
        len(produced.rows),
        sum(r["_offset"] for r in produced.rows),
    )
    everything = [(stack.topic, p) for p in range(2)]
    assert hdfs_offsets(warehouse, stack.job) == produced.end_offsets(everything)


def test_loads_exactly_quarantines_reruns_and_late_data_on_hdfs(
    stack: LoadStack, spark: Any, hdfs_server: HdfsServer, hdfs_url: str
) -> None:
    warehouse = f"{hdfs_url}/warehouse"
    config = stack.config(warehouse=warehouse)
    views = stack.views
    views.views(0, 30, BASE_MS + 1000, 60_000, v2=False)  # 08:00:01 .. 08:29:01
    views.views(1, 20, BASE_MS + 50 * 60_000, 10 * 60_000, v2=False)  # 08:50 .. 11:00
    views.views(0, 25, BASE_MS + HOUR_MS + 7, 90_000, v2=True)  # 09:00 .. 09:36, v2
    views.malformed(1, BASE_MS + 2 * HOUR_MS + 1)
    outcome = run_load(spark, config, progress=lambda _: None)
    assert outcome.record.outcome == "committed"
    assert (outcome.record.rows, outcome.record.quarantined) == (75, 4)
    assert_loaded_exactly(stack, spark, warehouse)
    ends = {p: end for (_, p), end in views.produced.end_offsets().items()}
    expected_files = {
        f"{stack.topic}/dt={row['dt']}/hr={row['hr']:02d}/{stack.topic}+{row['_partition']}+0+"
        f"{ends[row['_partition']]}+0.parquet"
        for row in views.produced.rows
    } | {f"_errors/{stack.topic}/dt=2026-11-22/hr=10/{stack.topic}+1+0+{ends[1]}+0.parquet"}
    data_files = {f for f in hdfs_files(warehouse) if not f.startswith("_lumber/")}
    assert data_files == expected_files
    # quarantined records: exactly the malformed ones, with their raw bytes
    errors = spark.read.parquet(f"{warehouse}/_errors/{stack.topic}").select(
        "_partition", "_offset", "_reason"
    )
    assert sorted(tuple(r) for r in errors.collect()) == sorted(
        (p, o, reason) for _, p, o, reason, _ in views.produced.errors
    )
    # nothing staged is left, and the commit point is the renamed manifest
    assert hdfs_files(warehouse, f"_lumber/{stack.job}/staging") == set()
    assert hdfs_files(warehouse, f"_lumber/{stack.job}/manifests") == {
        f"_lumber/{stack.job}/manifests/{1:020d}.json"
    }

    # a rerun adds nothing
    again = run_load(spark, config, progress=lambda _: None)
    assert again.record.outcome == "nothing_to_load"
    assert_loaded_exactly(stack, spark, warehouse)

    # late data: records of hour 08, already loaded, arrive now: only they are added, in hr=08
    views.views(1, 7, BASE_MS + 5 * 60_000, 1000, v2=True)
    late = run_load(spark, config, progress=lambda _: None)
    assert (late.record.outcome, late.record.rows, late.manifest and late.manifest.sequence) == (
        "committed",
        7,
        2,
    )
    assert_loaded_exactly(stack, spark, warehouse)
    hour_08 = hdfs_files(warehouse, f"{stack.topic}/dt=2026-11-22/hr=08")
    ranges = sorted(tuple(int(n) for n in f.rsplit("/", 1)[1].split("+")[1:4]) for f in hour_08)
    late_ranges = [
        (start, until) for partition, start, until in ranges if partition == 1 and start >= ends[1]
    ]
    assert late_ranges[0][0] == ends[1]
    assert late_ranges[-1][1] == ends[1] + 7
    assert all(a[1] == b[0] for a, b in itertools.pairwise(late_ranges))


def test_a_failure_before_and_after_the_manifest_rename_then_a_rerun_loads_exactly_once_on_hdfs(
    stack: LoadStack, spark: Any, hdfs_url: str
) -> None:
    warehouse = f"{hdfs_url}/warehouse"
    views = stack.views
    for index, step in enumerate(("manifest_tmp", "manifest", "move:1")):
        views.views(0, 6, BASE_MS + index * HOUR_MS, 600_000, v2=True)
        views.views(1, 2, BASE_MS + index * HOUR_MS + 5, 1000, v2=True)
        faulty = stack.config(warehouse=warehouse, fault_injection=[f"commit:{step}"])
        with pytest.raises(InjectedFault, match=step):
            run_load(spark, faulty, progress=lambda _: None)
        rerun = run_load(spark, stack.config(warehouse=warehouse), progress=lambda _: None)
        assert rerun.record.outcome == ("committed" if step == "manifest_tmp" else "nothing_to_load"), step
        assert_loaded_exactly(stack, spark, warehouse)
        assert hdfs_files(warehouse, f"_lumber/{stack.job}/staging") == set(), step
