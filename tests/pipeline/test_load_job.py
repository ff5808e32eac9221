"""The load job in-process (the session's local[2] Spark) against real brokers, ZooKeeper and registry."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.record.topic_partition import TopicPartition
from lumber.cli import main as lumber
from pipeline.faults import COMMIT_STEPS
from pipeline.job_lock import JobLock
from pipeline.load_errors import InjectedFault, JobLockedError, OffsetOutOfRangeError
from pipeline.load_job import parse_until_hour, run_load
from tests.support.broker_cluster import servers, wait_for
from tests.support.load_job import (
    BASE_MS,
    HOUR_MS,
    PAGE_VIEW_DDL,
    LoadStack,
    committed_offsets,
    load_stack,
    loaded_rows,
)
from tests.support.registry import RegistryProcess
from tests.support.zookeeper import new_client


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def assert_loaded_exactly(stack: LoadStack, spark: Any) -> None:
    """Spark, pyarrow and DuckDB all read exactly the produced rows; offsets match the data."""
    produced = stack.views.produced
    table = spark.read.parquet(str(stack.warehouse / stack.topic))
    assertDataFrameEqual(table, spark.createDataFrame(produced.rows, PAGE_VIEW_DDL))
    assert loaded_rows(stack.warehouse, stack.topic) == produced.row_tuples()
    query = (
        f"SELECT count(*), sum(_offset) FROM read_parquet('{stack.warehouse / stack.topic}/*/*/*.parquet', "
        "hive_partitioning = true)"
    )
    found = duckdb.connect().execute(query).fetchone()
    assert found is not None
    count, offsets = found
    assert (count, offsets) == (len(produced.rows), sum(r["_offset"] for r in produced.rows))
    # every partition of the topic is committed, an empty one at 0
    everything = [(stack.topic, p) for p in range(2)]
    assert committed_offsets(stack.warehouse, stack.job) == produced.end_offsets(everything)


def test_loads_v1_and_v2_exactly_with_the_error_dataset_and_counts(stack: LoadStack, spark: Any) -> None:
    views = stack.views
    views.views(0, 30, BASE_MS + 1000, 60_000, v2=False)  # 08:00:01 .. 08:29:01
    views.views(1, 20, BASE_MS + 50 * 60_000, 10 * 60_000, v2=False)  # 08:50 .. 11:00
    views.views(0, 25, BASE_MS + HOUR_MS + 7, 90_000, v2=True)  # 09:00 .. 09:36, v2
    views.malformed(1, BASE_MS + 2 * HOUR_MS + 1)
    outcome = run_load(spark, stack.config(), progress=lambda _: None)
    assert outcome.record.outcome == "committed"
    assert (outcome.record.rows, outcome.record.quarantined) == (75, 4)
    assert_loaded_exactly(stack, spark)

    # the layout: hourly folders by event time, names from (topic, partition, from, until, hour)
    ends = {p: end for (_, p), end in views.produced.end_offsets().items()}
    expected_files = {
        f"{stack.topic}/dt={row['dt']}/hr={row['hr']:02d}/{stack.topic}+{row['_partition']}+0+"
        f"{ends[row['_partition']]}+0.parquet"
        for row in views.produced.rows
    } | {f"_errors/{stack.topic}/dt=2026-11-22/hr=10/{stack.topic}+1+0+{ends[1]}+0.parquet"}
    files = {p.relative_to(stack.warehouse).as_posix() for p in stack.warehouse.rglob("*.parquet")}
    assert {f for f in files if not f.startswith("_lumber/")} == expected_files
    assert len(expected_files) == 8

    # the error dataset: raw bytes, offsets and reasons
    errors = ds.dataset(str(stack.warehouse / "_errors" / stack.topic), format="parquet", partitioning="hive")
    table = errors.to_table()
    columns = [table.column(c).to_pylist() for c in ("_partition", "_offset", "_reason", "_value")]
    found = sorted(zip(*columns, strict=True))
    assert found == sorted((p, o, reason, value) for _, p, o, reason, value in views.produced.errors)

    # the audit counts in the manifest: per partition and 10-minute window, by record timestamp
    manifest = outcome.manifest
    assert manifest is not None
    expected: dict[tuple[int, int], list[int]] = {}
    for row in views.produced.rows:
        key = (row["_partition"], row["_timestamp"] // 600_000 * 600_000)
        expected.setdefault(key, [0, 0])[0] += 1
    for _, partition, _, _, _ in views.produced.errors:
        expected.setdefault((partition, (BASE_MS + 2 * HOUR_MS) // 600_000 * 600_000), [0, 0])[1] += 1
    assert {(c.partition, c.window_start_ms): [c.rows, c.quarantined] for c in manifest.counts} == expected
    # every published file is the one its task reported: bytes, CRC-32 and rows, never read back by the load
    for published in manifest.files:
        path = stack.warehouse / published.final
        data = path.read_bytes()
        assert (len(data), zlib.crc32(data)) == (published.bytes, published.crc32), published.final
        assert pq.ParquetFile(path).metadata.num_rows == published.rows
    assert sum(f.rows or 0 for f in manifest.files) == 79

    # nothing new: no manifest; then more data: only the new records, no duplicates
    again = run_load(spark, stack.config(), progress=lambda _: None)
    assert again.record.outcome == "nothing_to_load"
    views.views(1, 7, BASE_MS + 3 * HOUR_MS, 1000, v2=True)
    third = run_load(spark, stack.config(), progress=lambda _: None)
    assert (third.record.outcome, third.record.rows, third.manifest and third.manifest.sequence) == (
        "committed",
        7,
        2,
    )
    assert_loaded_exactly(stack, spark)


def test_a_cutoff_hour_loads_only_what_came_before_it(stack: LoadStack, spark: Any) -> None:
    views = stack.views
    views.views(0, 10, BASE_MS + 10, 60_000, v2=True)  # hour 08
    views.views(0, 10, BASE_MS + HOUR_MS + 10, 60_000, v2=True)  # hour 09
    cutoff = parse_until_hour("2026-11-22T09")
    assert cutoff == BASE_MS + HOUR_MS
    outcome = run_load(spark, stack.config(), cutoff_ms=cutoff, progress=lambda _: None)
    assert outcome.record.rows == 10
    assert committed_offsets(stack.warehouse, stack.job)[(stack.topic, 0)] == 10
    assert {p.parent.name for p in (stack.warehouse / stack.topic).rglob("*.parquet")} == {"hr=08"}
    run_load(spark, stack.config(), progress=lambda _: None)
    assert_loaded_exactly(stack, spark)


def test_a_failure_at_every_commit_step_then_a_rerun_loads_exactly_once(stack: LoadStack, spark: Any) -> None:
    views = stack.views
    meta = stack.warehouse / "_lumber" / stack.job
    steps = [s for s in COMMIT_STEPS if s != "move:<i>"] + ["move:1", "move:2"]
    for index, step in enumerate(steps):
        views.views(0, 6, BASE_MS + index * HOUR_MS, 600_000, v2=index % 2 == 0)  # two hours in partition 0
        views.views(1, 2, BASE_MS + index * HOUR_MS + 5, 1000, v2=True)
        with pytest.raises(InjectedFault, match=step):
            run_load(spark, stack.config(fault_injection=[f"commit:{step}"]), progress=lambda _: None)
        last = json.loads((meta / "LAST_RUN").read_text())["run_id"]
        assert json.loads((meta / "runs" / f"{last}.json").read_text())["outcome"] == "failed"
        rerun = run_load(spark, stack.config(), progress=lambda _: None)
        committed_before = steps.index(step) >= steps.index("manifest")
        assert rerun.record.outcome == ("nothing_to_load" if committed_before else "committed"), step
        assert_loaded_exactly(stack, spark)
        assert not list((meta / "staging").glob("*")), step


def test_a_second_run_is_refused_while_the_lock_is_held(stack: LoadStack, spark: Any) -> None:
    stack.views.views(0, 3, BASE_MS, 1000, v2=True)
    holder = new_client(stack.cluster.zk_connect)
    try:
        with JobLock(holder, stack.job, "another-host pid 42 run r0"):
            with pytest.raises(JobLockedError, match="another-host pid 42 run r0"):
                run_load(spark, stack.config(), progress=lambda _: None)
            assert not (stack.warehouse / "_lumber" / stack.job / "runs").exists()
    finally:
        holder.stop()
        holder.close()
    assert run_load(spark, stack.config(), progress=lambda _: None).record.rows == 3


def test_etl_status_shows_offsets_lag_and_the_last_run(
    stack: LoadStack, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.views.views(0, 4, BASE_MS, 1000, v2=True)
    stack.views.views(1, 2, BASE_MS, 1000, v2=True)
    config = stack.config()
    outcome = run_load(spark, config, progress=lambda _: None)
    stack.views.views(1, 3, BASE_MS, 1000, v2=True)  # not loaded yet: lag 3
    path = tmp_path / "lumber.toml"
    path.write_text(
        f'[zookeeper]\nconnect = "{stack.cluster.zk_connect}"\n\n[load]\njob = "{stack.job}"\n'
        f'warehouse_url = "{stack.warehouse}"\nbootstrap_servers = {json.dumps(servers(stack.cluster))}\n'
    )
    capsys.readouterr()
    assert lumber(["--config", str(path), "etl", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [
        (p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"]) for p in status["partitions"]
    ] == [
        (0, 4, 4, 0),
        (1, 2, 5, 3),
    ]
    assert status["last_run"]["run_id"] == outcome.record.run_id
    assert (status["last_run"]["outcome"], status["last_run"]["rows"]) == ("committed", 6)
    assert lumber(["--config", str(path), "etl", "status"]) == 0
    text = capsys.readouterr().out
    assert f"last run: {outcome.record.run_id} COMMITTED" in text


def test_both_out_of_range_policies_against_real_retention(
    start_cluster: Any, load_registry: RegistryProcess, tmp_path: Path, spark: Any
) -> None:
    # tiny segments and a retention that keeps about two of them: loading falls behind the log start
    cluster = start_cluster(
        1, segment_bytes=2048, retention_bytes=4096, retention_check_interval_ms=100, retention_ms=-1
    )
    with load_stack(cluster, load_registry, tmp_path, partitions=1, linger_ms=0) as stack:
        topic, views = stack.topic, stack.views
        views.views(0, 10, BASE_MS, 1000, v2=False)
        assert run_load(spark, stack.config(), progress=lambda _: None).record.rows == 10
        for i in range(12):  # small batches, so that segments roll and retention deletes whole ones
            views.views(0, 5, BASE_MS + 10_000 + 5000 * i, 1000, v2=False)
        reader = Consumer(ConsumerConfig(bootstrap_servers=servers(cluster)))
        try:
            tp = TopicPartition(topic, 0)
            seen: list[int] = []

            def settled() -> bool:  # past offset 10, and unchanged over a few retention checks
                seen.append(reader.beginning_offsets([tp])[tp])
                time.sleep(0.2)
                return seen[-1] > 10 and len(seen) >= 4 and len(set(seen[-4:])) == 1

            wait_for(settled, 30, "retention to delete past offset 10 and settle")
            log_start = seen[-1]
        finally:
            reader.close()

        with pytest.raises(OffsetOutOfRangeError) as caught:
            run_load(spark, stack.config(), progress=lambda _: None)
        message = str(caught.value)
        assert f"{topic}-0" in message
        assert f"[10, {log_start})" in message
        assert committed_offsets(stack.warehouse, stack.job) == {(topic, 0): 10}

        outcome = run_load(spark, stack.config(on_out_of_range="earliest"), progress=lambda _: None)
        assert outcome.record.outcome == "committed"
        assert outcome.record.rows == 70 - log_start
        manifest = outcome.manifest
        assert manifest is not None
        assert [
            (loss.partition, loss.from_offset, loss.until_offset, loss.reason) for loss in manifest.losses
        ] == [(0, 10, log_start, "out_of_range")]
        assert committed_offsets(stack.warehouse, stack.job) == {(topic, 0): 70}
        kept = [row for row in views.produced.row_tuples() if not 10 <= row[-1] < log_start]
        assert loaded_rows(stack.warehouse, topic) == kept
