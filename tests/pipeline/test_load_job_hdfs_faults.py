"""The load job when HDFS fails under it (a NameNode and a DataNode of their own per test, killed with
kill -9): the run fails naming HDFS and the path, nothing half-committed is visible, and once the daemons
are back the next run loads every record exactly once (DuckDB over the warehouse on HDFS, counted against
the producer's offsets). Bounded: one kill per test, every wait with a deadline."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from pipeline.load_job import run_load
from tests.support.hdfs_warehouse import duckdb_count, fsspec_of, hdfs_files, hdfs_offsets
from tests.support.load_job import BASE_MS, HOUR_MS, LoadStack, load_stack
from tests.support.registry import RegistryProcess

pytestmark = [pytest.mark.slow, pytest.mark.hdfs]


@pytest.fixture
def own_hdfs(tmp_path: Path) -> Iterator[HdfsServer]:
    server = HdfsServer(tmp_path / "hdfs", HdfsPorts.free())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def produce(stack: LoadStack, per_partition: int) -> None:
    for partition in (0, 1):
        stack.views.views(partition, per_partition, BASE_MS + partition, HOUR_MS // per_partition, v2=True)


def assert_exactly_once(stack: LoadStack, warehouse: str) -> None:
    rows = stack.views.produced.rows
    assert duckdb_count(warehouse, stack.topic) == (len(rows), sum(r["_offset"] for r in rows))
    assert hdfs_offsets(warehouse, stack.job) == stack.views.produced.end_offsets()
    assert hdfs_files(warehouse, f"_lumber/{stack.job}/staging") == set()


def assert_nothing_committed(stack: LoadStack, warehouse: str) -> None:
    assert hdfs_offsets(warehouse, stack.job) == {}
    assert hdfs_files(warehouse, stack.topic) == set()


def test_kill_9_of_the_datanode_during_the_task_writes(
    stack: LoadStack, spark: Any, own_hdfs: HdfsServer
) -> None:
    warehouse = f"{own_hdfs.url}/warehouse"
    config = stack.config(warehouse=warehouse)
    produce(stack, 3000)
    # task 0 stalls with its files open, so the kill lands in its write however fast the machine is
    stalled = stack.config(warehouse=warehouse, fault_injection=["task:0:stall"])
    staging = f"/warehouse/_lumber/{stack.job}/staging"
    fs = fsspec_of(warehouse)
    killed = threading.Event()

    def kill_when_tasks_write() -> None:
        for _ in range(1200):  # 60 s at most
            if fs.exists(staging) and any("attempt=" in p for p in fs.find(staging, withdirs=True)):
                own_hdfs.kill_datanode()
                killed.set()
                return
            threading.Event().wait(0.05)

    killer = threading.Thread(target=kill_when_tasks_write, daemon=True)
    killer.start()
    with pytest.raises(Exception) as caught:
        run_load(spark, stalled, progress=lambda _: None)
    killer.join(60)
    assert killed.is_set()
    message = str(caught.value)
    assert type(caught.value).__name__ == "ReadError", message[-3000:]
    # "run R: a Spark task failed: FileSystemError: write hdfs://.../staging/R/<topic>/task=N/...: ..."
    assert re.fullmatch(
        rf"run \S+: a Spark task failed: FileSystemError: \w+ {re.escape(warehouse)}/_lumber/{stack.job}/"
        r"staging/\S+: .+",
        message,
    ), message
    assert_nothing_committed(stack, warehouse)

    own_hdfs.start_datanode()
    outcome = run_load(spark, config, progress=lambda _: None)
    assert (outcome.record.outcome, outcome.record.rows) == ("committed", 6000)
    assert_exactly_once(stack, warehouse)


def test_kill_9_of_the_namenode_during_the_commit(stack: LoadStack, spark: Any, own_hdfs: HdfsServer) -> None:
    warehouse = f"{own_hdfs.url}/warehouse"
    config = stack.config(warehouse=warehouse)
    produce(stack, 500)

    def kill_at_the_commit(message: str) -> None:
        if message.startswith("staged:"):  # the tasks are done; the manifest is written next
            own_hdfs.kill_namenode()

    with pytest.raises(Exception) as caught:
        run_load(spark, config, progress=kill_at_the_commit)
    message = str(caught.value)
    assert type(caught.value).__name__ == "FileSystemError"
    # the commit's first look at the NameNode (is the manifest's name free?) finds nobody
    assert re.fullmatch(
        rf"(stat|create|list) {re.escape(warehouse)}/_lumber/{stack.job}/manifests\S*: OSError: Connection "
        r"refused \(os error 111\)",
        message,
    ), message

    own_hdfs.start_namenode()  # the DataNode is still up: HDFS is ready once it reported its blocks
    assert_nothing_committed(stack, warehouse)
    outcome = run_load(spark, config, progress=lambda _: None)
    assert (outcome.record.outcome, outcome.record.rows) == ("committed", 1000)
    assert outcome.recovery is not None
    assert outcome.recovery.discarded_staging
    assert_exactly_once(stack, warehouse)
