"""The load job through a leader failover (issue 19): three real brokers with every partition on all
three, the leader of a partition killed with kill -9 as the load starts; the load waits for the new
leader and commits exactly what was produced (Spark's session, pyarrow and DuckDB all count it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from pipeline.load_job import run_load
from tests.support.broker_cluster import BrokerCluster
from tests.support.load_job import BASE_MS, HOUR_MS, load_stack
from tests.support.registry import RegistryProcess


def test_a_load_through_a_leader_failover_commits_exactly_what_was_produced(
    start_cluster: Callable[..., BrokerCluster], load_registry: RegistryProcess, tmp_path: Path, spark: Any
) -> None:
    cluster = start_cluster(3, replica_lag_time_max_ms=3000, replica_fetch_wait_max_ms=200)
    with load_stack(cluster, load_registry, tmp_path, replication_factor=3) as stack:
        views = stack.views
        views.views(0, 400, BASE_MS + 1000, 9_000, v2=False)
        views.views(1, 300, BASE_MS + HOUR_MS + 5, 12_000, v2=True)
        for p in range(2):
            cluster.wait_for_isr(stack.topic, p, [0, 1, 2])
        leader = cluster.leader_of(stack.topic, 0)
        leader.kill()  # its session is still alive: the load starts against a dead leader
        outcome = run_load(spark, stack.config(), progress=lambda _: None)
        assert outcome.record.outcome == "committed"
        assert (outcome.record.rows, outcome.record.quarantined) == (700, 0)
        assert cluster.state_of(stack.topic, 0).leader not in (-1, leader.broker_id)
        stack.assert_rows_and_offsets()
        query = (
            f"SELECT count(*), count(DISTINCT event_id) FROM read_parquet('{stack.warehouse / stack.topic}"
            "/*/*/*.parquet', hive_partitioning = true)"
        )
        assert duckdb.connect().execute(query).fetchone() == (700, 700)
        leader.start()
        cluster.wait_for_isr(stack.topic, 0, [0, 1, 2], timeout_s=60)
