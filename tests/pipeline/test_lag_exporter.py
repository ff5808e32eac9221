"""The lag exporter's HTTP server (pipeline/lag_exporter.py) on a real port: the metrics of its collector
in Prometheus' text format, and each watched group's window of samples as JSON at /lag-history."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.client.groups.lag_evaluation import LagWindow
from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from pipeline.lag_exporter import start_lag_exporter
from pipeline.lag_metrics import LagCollector

TP = TopicPartition("events", 0)


@pytest.fixture
def exporter() -> Iterator[tuple[str, LagCollector]]:
    collector = LagCollector()
    port = free_port()
    server = start_lag_exporter(collector, port)
    try:
        yield f"http://127.0.0.1:{port}", collector
    finally:
        server.stop()


def test_metrics_and_lag_history(exporter: tuple[str, LagCollector]) -> None:
    url, collector = exporter
    window = LagWindow(window=2)
    for t, (committed, end) in enumerate([(3, 10), (5, 12), (9, 12)]):
        window.observe(1000 * t, {TP: (committed, 1000 * t)}, {TP: end})
    collector.update("audit", "zookeeper", window.evaluate(2500), window.samples())

    metrics = {
        (s.name, s.labels.get("consumergroup")): s.value
        for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=5).text)
        for s in family.samples
        if s.name in ("kafka_consumergroup_lag", "kafka_consumergroup_current_offset")
    }
    assert metrics == {
        ("kafka_consumergroup_lag", "audit"): 3,
        ("kafka_consumergroup_current_offset", "audit"): 9,
    }

    samples = [
        {
            "observed_at_ms": 1000,
            "committed_offset": 5,
            "committed_at_ms": 1000,
            "log_end_offset": 12,
            "lag": 7,
            "no_commit": False,
        },
        {
            "observed_at_ms": 2000,
            "committed_offset": 9,
            "committed_at_ms": 2000,
            "log_end_offset": 12,
            "lag": 3,
            "no_commit": False,
        },
    ]
    every = httpx.get(f"{url}/lag-history", timeout=5)
    assert (every.status_code, every.headers["content-type"]) == (200, "application/json")
    assert every.json() == {
        "groups": [
            {
                "group": "audit",
                "kind": "zookeeper",
                "partitions": [{"topic": "events", "partition": 0, "samples": samples}],
            }
        ]
    }
    one = httpx.get(f"{url}/lag-history", params={"group": "audit", "kind": "zookeeper"}, timeout=5)
    assert one.json() == every.json()
    other_kind = httpx.get(f"{url}/lag-history", params={"group": "audit", "kind": "kafka"}, timeout=5)
    assert (other_kind.status_code, other_kind.json()) == (
        404,
        {"groups": [], "error": "group 'audit' of kind 'kafka' is not watched by this lag exporter"},
    )
    collector.forget("audit", "zookeeper")
    assert httpx.get(f"{url}/lag-history", timeout=5).json() == {"groups": []}
