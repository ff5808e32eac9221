"""Topic config overrides in a real ZooKeeper (broker/cluster/topic_config_store.py): checked writes,
compare-and-set against a concurrent writer, no config for a deleted topic."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from broker.cluster import zk_paths
from broker.cluster.errors import InvalidTopicConfigError, UnknownTopicError
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.topic_config_store import TopicConfigStore
from tests.broker.cluster.helpers import add_broker
from tests.support.zookeeper import new_client


def node(zk: Any, topic: str) -> tuple[bytes, int]:
    data, stat = zk.get(zk_paths.topic_config_path(topic))
    return data, stat.version


def test_alter_creates_then_replaces_the_node_with_checked_values(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    add_broker(zk, 2, 9092)
    TopicAdmin(zk).create_topic("t", 1, replication_factor=2)
    store = TopicConfigStore(zk)
    assert TopicAdmin(zk).topic_config("t") == {}
    assert zk.exists(zk_paths.topic_config_path("t")) is None

    seen: list[tuple[dict[str, str], int]] = []

    def change(current: Mapping[str, str], replication_factor: int) -> dict[str, str | None]:
        seen.append((dict(current), replication_factor))
        return {"cleanup.policy": "Delete,Compact", "segment.bytes": " 4096 ", "min.insync.replicas": "2"}

    stored = store.alter("t", change)
    assert stored == {"cleanup.policy": "compact,delete", "min.insync.replicas": "2", "segment.bytes": "4096"}
    assert seen == [({}, 2)]
    assert node(zk, "t") == (
        (
            b'{"config":{"cleanup.policy":"compact,delete","min.insync.replicas":"2","segment.bytes":"4096"},'
            b'"version":1}'
        ),
        0,
    )
    assert TopicAdmin(zk).topic_config("t") == stored

    with pytest.raises(InvalidTopicConfigError) as refused:
        store.alter("t", lambda current, rf: {**current, "min.insync.replicas": "3"})
    assert str(refused.value) == (
        "topic 't': min.insync.replicas='3': with replication factor 2 it must be an integer from 1 to 2 "
        "(a larger one would refuse every acks=all write)"
    )
    assert node(zk, "t")[1] == 0  # nothing written

    assert store.alter("t", lambda current, rf: {"retention.ms": "-1"}, validate_only=True) == {
        "retention.ms": "-1"
    }
    assert node(zk, "t")[1] == 0

    assert store.alter("t", lambda current, rf: {}) == {}
    assert node(zk, "t") == (b'{"config":{},"version":1}', 1)

    with pytest.raises(UnknownTopicError):
        store.alter("gone", lambda current, rf: {"retention.ms": "1"})
    assert zk.exists(zk_paths.topic_config_path("gone")) is None


def test_an_alter_that_loses_the_race_reads_again_and_keeps_the_winners_key(zk_connect: str, zk: Any) -> None:
    """A's change is computed, then B writes, then A's conditional write fails and A starts over from B's
    config: both keys land (a blind write would drop B's)."""
    add_broker(zk, 1, 9091)
    TopicAdmin(zk).create_topic("race", 1, configs={"retention.ms": "1000"})
    other = new_client(zk_connect)
    try:
        computed = threading.Event()
        b_done = threading.Event()
        a_calls: list[dict[str, str]] = []

        def a_change(current: Mapping[str, str], _rf: int) -> dict[str, str | None]:
            a_calls.append(dict(current))
            if len(a_calls) == 1:
                computed.set()
                assert b_done.wait(10)
            return {**current, "segment.bytes": "8192"}

        results: list[dict[str, str]] = []
        a = threading.Thread(target=lambda: results.append(TopicConfigStore(zk).alter("race", a_change)))
        a.start()
        assert computed.wait(10)
        TopicConfigStore(other).alter("race", lambda current, _rf: {**current, "segment.ms": "60000"})
        b_done.set()
        a.join(10)
        assert a_calls == [
            {"retention.ms": "1000"},
            {"retention.ms": "1000", "segment.ms": "60000"},
        ]
        assert results == [{"retention.ms": "1000", "segment.bytes": "8192", "segment.ms": "60000"}]
        assert TopicAdmin(zk).topic_config("race") == results[0]
        assert node(zk, "race")[1] == 2
    finally:
        other.stop()
        other.close()


def test_an_alter_racing_a_topic_deletion_writes_no_config(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    admin = TopicAdmin(zk)
    admin.create_topic("doomed", 1)

    def change(current: Mapping[str, str], _rf: int) -> dict[str, str | None]:
        if zk.exists(zk_paths.topic_path("doomed")) is not None:
            admin.delete_topic("doomed")  # between this alter's read and its write
        return {"retention.ms": "1"}

    with pytest.raises(UnknownTopicError, match="topic 'doomed' does not exist"):
        TopicConfigStore(zk).alter("doomed", change)
    assert zk.exists(zk_paths.topic_config_path("doomed")) is None
