"""The immutable cluster snapshot (broker/cluster/cluster_view.py)."""

from __future__ import annotations

import dataclasses

import pytest

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.cluster_view import EMPTY_VIEW, ClusterView
from broker.cluster.partition_state import PartitionState
from broker.record.topic_partition import TopicPartition

B1 = BrokerInfo(1, "127.0.0.1", 9091)
B3 = BrokerInfo(3, "127.0.0.1", 9093)
TP = TopicPartition
VIEW = ClusterView(
    brokers={3: B3, 1: B1},
    topics={"b": {1: (2,), 0: (1,)}, "a": {0: (3,), 1: (1,), 2: (2,)}},
    states={
        TP("a", 0): PartitionState(3, 4, (3,), 2, 7),
        TP("a", 1): PartitionState(1, 0, (1,), 1, 0),
        TP("a", 2): PartitionState(2, 1, (2,), 1, 3),
        TP("b", 0): PartitionState(3, 2, (1, 3), 2, 5),  # moved off its first replica
    },
    controller_id=3,
)


def test_controller_is_the_one_in_the_controller_node() -> None:
    assert VIEW.controller_id == 3
    assert EMPTY_VIEW.controller_id == -1
    assert ClusterView(brokers={1: B1}, topics={}).controller_id == -1  # no lowest-id rule any more


def test_leader_is_the_state_leader_while_it_is_live() -> None:
    assert VIEW.leader("a", 0) == 3
    assert VIEW.leader("a", 1) == 1
    assert VIEW.leader("a", 2) == -1  # broker 2 is not registered
    assert VIEW.leader("b", 0) == 3  # the state's leader, not the first replica
    assert VIEW.leader("b", 1) == -1  # no state node yet (a topic of an older Lumber)
    assert VIEW.leader("a", 3) == -1  # no such partition
    assert VIEW.leader("nope", 0) == -1


def test_isr_epoch_replicas_and_under_replication() -> None:
    assert VIEW.isr(TP("b", 0)) == (1, 3)
    assert VIEW.isr(TP("b", 1)) == ()
    assert VIEW.leader_epoch(TP("a", 0)) == 4
    assert VIEW.leader_epoch(TP("b", 1)) == -1
    assert VIEW.replicas(TP("b", 0)) == (1,)
    assert VIEW.replicas(TP("zz", 0)) == ()
    view = ClusterView(
        brokers={1: B1, 3: B3},
        topics={"r": {0: (1, 3), 1: (3, 1)}},
        states={TP("r", 0): PartitionState(1, 0, (1,), 1, 1), TP("r", 1): PartitionState(3, 0, (3, 1), 1, 0)},
    )
    assert view.under_replicated(TP("r", 0)) is True
    assert view.under_replicated(TP("r", 1)) is False
    assert view.under_replicated(TP("r", 2)) is False
    assert VIEW.partitions_without_state() == {"b": {1: (2,)}}
    assert view.state(TP("r", 1)) == PartitionState(3, 0, (3, 1), 1, 0)


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
            brokers={1: B1, 3: B3},
            topics={"a": {0: (3,), 1: (1,), 2: (2,)}, "b": {0: (1,), 1: (2,)}},
            states=dict(reversed(list(VIEW.states.items()))),
            controller_id=3,
        )
        == VIEW
    )
    assert ClusterView(brokers={1: B1}, topics={}) != ClusterView(
        brokers={1: BrokerInfo(1, "127.0.0.1", 1)}, topics={}
    )
    assert ClusterView(brokers={}, topics={}) == EMPTY_VIEW
    # a state's znode version is part of the value: a rewrite with the same data is a change
    one = ClusterView(
        brokers={}, topics={"t": {0: (1,)}}, states={TP("t", 0): PartitionState(1, 0, (1,), 1, 0)}
    )
    two = ClusterView(
        brokers={}, topics={"t": {0: (1,)}}, states={TP("t", 0): PartitionState(1, 0, (1,), 1, 1)}
    )
    assert one != two
    assert list(VIEW.states) == [TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0)]
    with pytest.raises(TypeError):
        VIEW.states[TP("x", 0)] = PartitionState(1, 0, (1,), 0)  # type: ignore[index]
    configs = ClusterView(brokers={}, topics={}, topic_configs={"t": {"min.insync.replicas": "2"}})
    assert configs.topic_config("t") == {"min.insync.replicas": "2"}
    assert configs.topic_config("u") == {}
    assert ClusterView(brokers={}, topics={}, shutting_down={2}).shutting_down == frozenset({2})  # type: ignore[arg-type]


def test_broker_address() -> None:
    assert B3.address == "127.0.0.1:9093"
