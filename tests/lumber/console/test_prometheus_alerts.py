"""The alerting rules (lumber/console/prometheus_alerts.yml) are valid for Prometheus (Debian's promtool)
and query only metrics that a real broker and the lag exporter's collector export."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml  # type: ignore[import-untyped]  # PyYAML, via schemathesis (dev); no stubs
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.client.groups.lag_evaluation import LagWindow
from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from pipeline.lag_metrics import LagCollector
from tests.support.broker_cluster import BrokerCluster

RULES = Path(__file__).resolve().parents[3] / "lumber/console/prometheus_alerts.yml"
#: Series Prometheus itself makes (scrape health), not an exporter
PROMETHEUS_OWN = {"up"}
#: PromQL words that are not metric names
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool"}


def names_in(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def queried(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    expr = re.sub(r'"[^"]*"', "", expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping labels
    words = re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b\s*(\(?)", expr)
    return {word for word, call in words if not call and word not in PROMQL_WORDS}


def rules() -> list[dict[str, object]]:
    loaded = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def test_promtool_accepts_the_rules() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 9 rules found" in checked.stdout


def test_every_alert_queries_exported_metrics(start_cluster: Callable[..., BrokerCluster]) -> None:
    port = free_port()
    start_cluster(1, metrics_port=port)
    exported = names_in(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)

    collector = LagCollector()
    window = LagWindow(3)
    now_ms = time.time_ns() // 1_000_000
    tp = TopicPartition("page_view", 0)
    window.observe(now_ms, {tp: (5, now_ms)}, {tp: 9})
    collector.update("readers", "kafka", window.evaluate(now_ms), window.samples())
    registry = CollectorRegistry()
    registry.register(collector)
    exported |= names_in(generate_latest(registry).decode())

    alerts = rules()
    assert len(alerts) == 9
    wanted = {
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_controller_controllerstats_leaderelections_total",
        "kafka_server_replicafetchermanager_maxlag",
        "kafka_consumergroup_lag_sum",
    }
    used = {name for rule in alerts for name in queried(str(rule["expr"]))}
    assert wanted <= used
    assert sorted(used - exported - PROMETHEUS_OWN) == []
    assert queried('sum by (instance) (rate(a_total{x="y"}[5m])) > 0 and on (z) b') == {"a_total", "b"}
