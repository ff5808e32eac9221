"""The scheduler running real loads: two missed hours, in order, each one spark-submit against a real broker,
ZooKeeper and registry (about 20-40 s per run)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.etl_settings import submit_settings
from pipeline.schedule_config import ScheduleConfig
from pipeline.scheduler import Scheduler, ScheduleStateStore, SparkSubmitRunner
from schemas.client import SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.load_job import (
    BASE_MS,
    HOUR_MS,
    PAYLOAD_COLUMNS,
    ViewProducer,
    load_config,
    loaded_rows,
    unique_topic,
)
from tests.support.registry import RegistryProcess


class StoppingClock:
    """Starts at a given moment and stands still, except that the scheduler's first wait stops it (the
    runs themselves take real time, which this clock does not count: the hours stay the ones given)."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms
        self.sleeps_s: list[float] = []
        self.scheduler: Scheduler | None = None

    def now_ms(self) -> int:
        return self.now

    def sleep(self, seconds: float, wake: threading.Event) -> None:
        self.sleeps_s.append(seconds)
        assert self.scheduler is not None
        self.scheduler.stop()


@pytest.mark.slow
def test_the_scheduler_loads_two_missed_hours_in_order(
    broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    topic = unique_topic("page_view")
    broker_cluster.create_topic(topic, 2)
    registry = SchemaRegistryClient(load_registry.url)
    v1 = registry.register(f"{topic}-value", shipped_schema_text("page_view"))
    v2 = registry.register(f"{topic}-value", shipped_schema_text("page_view_v2"))
    producer = Producer(
        ProducerConfig(bootstrap_servers=broker_cluster.bootstrap_servers.split(","), acks="all")
    )
    views = ViewProducer(producer, AvroSerde(registry), topic, v1, v2)
    try:
        # hours 08, 09 and 10 (of BASE_MS's day); the scheduler "wakes up" at 10:15 after downtime
        for hour in range(3):
            views.views(0, 12, BASE_MS + hour * HOUR_MS + 60_000, 120_000, v2=hour > 0)
            views.views(1, 7, BASE_MS + hour * HOUR_MS + 90_000, 240_000, v2=True)
    finally:
        producer.close()
        registry.close()
    config = load_config(
        zk_connect=broker_cluster.zk_connect,
        registry_url=load_registry.url,
        bootstrap_servers=broker_cluster.bootstrap_servers.split(","),
        warehouse=tmp_path / "warehouse",
        job=unique_topic("job"),
        topics=[topic],
        spark_master="local[2]",
    )
    config = config.replace(dev=config.dev.replace(state_dir=str(tmp_path / "state")))
    said: list[str] = []
    runner = SparkSubmitRunner(submit_settings(config), say=said.append)
    store = ScheduleStateStore(tmp_path / "schedule.json", config.load.job)
    clock = StoppingClock(BASE_MS + 2 * HOUR_MS + 15 * 60_000)
    settings = ScheduleConfig(delay_ms=10 * 60_000, start_hour="2026-11-22T08")
    scheduler = Scheduler(runner, store, settings, clock=clock, say=said.append)
    clock.scheduler = scheduler

    finished = scheduler.run(max_steps=10)

    assert finished.code == 0, "\n".join(said)
    # two runs: hour 08 (cutoff 09:00) then hour 09 (cutoff 10:00); hour 10 is not over, so it waits
    assert clock.sleeps_s == [(HOUR_MS + 10 * 60_000 - 15 * 60_000) / 1000]
    manifests = sorted((tmp_path / "warehouse" / "_lumber" / config.load.job / "manifests").glob("*.json"))
    cutoffs = [json.loads(m.read_text())["cutoff_ms"] for m in manifests]
    assert cutoffs == [BASE_MS + HOUR_MS, BASE_MS + 2 * HOUR_MS]
    rows = [json.loads(m.read_text())["ranges"] for m in manifests]
    assert [sum(r["rows"] for r in ranges) for ranges in rows] == [19, 19]
    # the loaded rows are exactly those of hours 08 and 09, in their hour folders
    produced = [r for r in views.produced.rows if r["hr"] in (8, 9)]
    assert loaded_rows(tmp_path / "warehouse", topic) == sorted(
        tuple(r.get(c) for c in (*PAYLOAD_COLUMNS, "_partition", "_offset")) for r in produced
    )
    hours = sorted(p.name for p in (tmp_path / "warehouse" / topic).glob("dt=*/hr=*"))
    assert hours == ["hr=08", "hr=09"]
    state = json.loads(store.path.read_text())
    assert state["loaded_until"] == "2026-11-22T10"
    assert [(h["until"], h["outcome"]) for h in state["history"]] == [
        ("2026-11-22T09", "committed"),
        ("2026-11-22T10", "committed"),
    ]
    assert any("catching up: 2 runs are due" in line for line in said)
    assert any("planned: 2 ranges, 19 records" in line for line in said)
