"""The immutable cluster snapshot (broker/cluster/cluster_view.py)."""

from __future__ import annotations

import dataclasses

import pytest

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.cluster_view import EMPTY_VIEW, ClusterView
from broker.record.topic_partition import TopicPartition

B1 = BrokerInfo(1, "127.0.0.1", 9091)
B3 = BrokerInfo(3, "127.0.0.1", 9093)
VIEW = ClusterView(
    brokers={3: B3, 1: B1},
    topics={"b": {1: (2,), 0: (1,)}, "a": {0: (3,), 1: (1,), 2: (2,)}},
)


def test_controller_is_the_lowest_live_broker() -> None:
    assert VIEW.controller_id == 1
    assert EMPTY_VIEW.controller_id == -1


def test_leader_is_the_first_replica_while_it_is_live() -> None:
    assert VIEW.leader("a", 0) == 3
    assert VIEW.leader("a", 1) == 1
    assert VIEW.leader("a", 2) == -1  # broker 2 is not registered
    assert VIEW.leader("a", 3) == -1  # no such partition
    assert VIEW.leader("nope", 0) == -1


def test_partitions_of_a_broker_sorted() -> None:
    assert VIEW.partitions_of(1) == [TopicPartition("a", 1), TopicPartition("b", 0)]
    assert VIEW.partitions_of(2) == [TopicPartition("a", 2), TopicPartition("b", 1)]
    assert VIEW.partitions_of(3) == [TopicPartition("a", 0)]
    assert VIEW.partitions_of(4) == []


def test_immutable_ordered_and_compared_by_value() -> None:
    assert list(VIEW.brokers) == [1, 3]
    assert list(VIEW.topics) == ["a", "b"]
    assert list(VIEW.topics["b"]) == [0, 1]
    with pytest.raises(TypeError):
        VIEW.brokers[2] = B1  # type: ignore[index]
    with pytest.raises(TypeError):
        VIEW.topics["a"][5] = (1,)  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        VIEW.brokers = {}  # type: ignore[misc]
    source = {"t": {0: [1]}}
    view = ClusterView(brokers={}, topics=source)  # type: ignore[arg-type]
    source["t"][0].append(2)
    assert view.topics == {"t": {0: (1,)}}
    assert (
        ClusterView(
            brokers={1: B1, 3: B3}, topics={"a": {0: (3,), 1: (1,), 2: (2,)}, "b": {0: (1,), 1: (2,)}}
        )
        == VIEW
    )
    assert ClusterView(brokers={1: B1}, topics={}) != ClusterView(
        brokers={1: BrokerInfo(1, "127.0.0.1", 1)}, topics={}
    )
    assert ClusterView(brokers={}, topics={}) == EMPTY_VIEW


def test_broker_address() -> None:
    assert B3.address == "127.0.0.1:9093"
