"""broker/client/groups/group_config.py: the [group] section's defaults and checks."""

from __future__ import annotations

import pytest

from broker.client.errors import ClientConfigError
from broker.client.groups.group_config import GroupConfig


def test_defaults() -> None:
    config = GroupConfig()
    assert (
        config.session_timeout_ms,
        config.auto_commit_interval_ms,
        config.partition_assignment_strategy,
    ) == (
        6000,
        1000,
        "range",
    )


def test_bad_values_name_the_field() -> None:
    with pytest.raises(
        ClientConfigError, match=r"GroupConfig\.session_timeout_ms must be at least 1000, got 10"
    ):
        GroupConfig(session_timeout_ms=10)
    with pytest.raises(
        ClientConfigError, match="partition_assignment_strategy must be one of 'range', 'roundrobin'"
    ):
        GroupConfig(partition_assignment_strategy="sticky")  # type: ignore[arg-type]
    with pytest.raises(ClientConfigError, match="member_id_prefix must not contain '/'"):
        GroupConfig(member_id_prefix="a/b")
    with pytest.raises(
        ClientConfigError, match=r"retry_backoff_max_ms \(10\) must be at least retry_backoff_ms"
    ):
        GroupConfig(retry_backoff_ms=100, retry_backoff_max_ms=10)


def test_kafka_protocol_keys_have_kafkas_defaults() -> None:
    zookeeper, kafka = GroupConfig(), GroupConfig(protocol="kafka")
    assert (zookeeper.protocol, zookeeper.session_timeout_ms) == ("zookeeper", 6000)
    assert (
        kafka.session_timeout_ms,
        kafka.heartbeat_interval_ms,
        kafka.max_poll_interval_ms,
        kafka.group_instance_id,
    ) == (45_000, 3000, 300_000, "")
    assert GroupConfig(protocol="kafka", session_timeout_ms=10_000).session_timeout_ms == 10_000
    assert GroupConfig.from_table({"protocol": "kafka"}).session_timeout_ms == 45_000


def test_kafka_protocol_checks_name_the_keys() -> None:
    with pytest.raises(ClientConfigError, match="protocol must be one of 'zookeeper', 'kafka'"):
        GroupConfig(protocol="paxos")  # type: ignore[arg-type]
    with pytest.raises(
        ClientConfigError,
        match=r"heartbeat_interval_ms \(7000\) must be below session_timeout_ms \(6000\)",
    ):
        GroupConfig(protocol="kafka", session_timeout_ms=6000, heartbeat_interval_ms=7000)
