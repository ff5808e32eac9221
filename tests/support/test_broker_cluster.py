"""The brokers of the tests' fixtures (tests/support/broker_cluster.py): retention is never checked unless a
test asks, so the fixtures' records of 2026-11-22 are not deleted by a broker that runs past 5 minutes."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

from tests.support.broker_cluster import UNCHECKED_RETENTION_INTERVAL_MS, BrokerCluster


def log_section(cluster: BrokerCluster) -> dict[str, Any]:
    section: dict[str, Any] = tomllib.loads(cluster.brokers[0].config_path.read_text())["log"]
    return section


def test_retention_is_checked_only_when_a_test_asks(start_cluster: Callable[..., BrokerCluster]) -> None:
    default, asked = start_cluster(1), start_cluster(1, retention_check_interval_ms=100)
    assert log_section(default)["retention_check_interval_ms"] == UNCHECKED_RETENTION_INTERVAL_MS
    assert log_section(asked)["retention_check_interval_ms"] == 100
    # retention_ms itself stays Lumber's default (a week), as DescribeConfigs reports it
    assert "retention_ms" not in log_section(default)
