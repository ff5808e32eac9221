"""Reassignment plans: Kafka's JSON parsed and refused with the file and entry named, and the planners'
results checked against hand-counted assignments (replica and preferred-leader counts, racks)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from broker.cluster.errors import InvalidReplicaAssignmentError
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.cluster.reassignment_plan import (
    ReassignmentPlan,
    decommission_plan,
    rebalance_plan,
    replication_factor_plan,
)
from broker.record.topic_partition import TopicPartition


def test_reassign_to_is_kafkas_example_and_a_cancel_goes_back() -> None:
    moving = PartitionReassignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert moving == PartitionReassignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert (moving.origin_replicas, moving.target_replicas) == ((1, 2, 3), (4, 5, 6))
    assert moving.completed() == PartitionReassignment((4, 5, 6))
    assert moving.reassign_to(moving.origin_replicas) == PartitionReassignment((1, 2, 3))
    assert not moving.reassign_to(moving.origin_replicas).moving


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "plan.json: expected a JSON object, found [1]"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', "plan.json: partitions[0] is not {'topic'"),
        (
            (
                '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, '
                '{"topic": "t", "partition": 0, "replicas": [2]}]}'
            ),
            "plan.json: partitions[1]: t-0 is named twice",
        ),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
            "plan.json: partitions[0]: log_dirs ['/d']: Lumber has one log dir per broker",
        ),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]}', "replicas ['1'] are not"),
    ],
)
def test_a_plan_that_is_not_kafkas_json_is_refused_naming_the_entry(text: str, message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as raised:
        ReassignmentPlan.parse("plan.json", text)
    assert message in str(raised.value)


def test_a_plan_round_trips_through_kafkas_json() -> None:
    plan = ReassignmentPlan({TopicPartition("t", 1): (3, 1), TopicPartition("t", 0): (2,)})
    assert json.loads(plan.to_json()) == {
        "version": 1,
        "partitions": [
            {"partition": 0, "replicas": [2], "topic": "t"},
            {"partition": 1, "replicas": [3, 1], "topic": "t"},
        ],
    }
    assert ReassignmentPlan.parse("again", plan.to_json()) == plan


def test_replication_factor_up_adds_the_least_loaded_and_down_keeps_the_first() -> None:
    up = replication_factor_plan("t", {0: (1,), 1: (2,)}, 3, {1: 5, 2: 5, 3: 0, 4: 1})
    # t-0 takes 3 (no replica) then 4 (one); t-1 then 3 and 4 again (two each), not 1 (five)
    assert up.targets == {TopicPartition("t", 0): (1, 3, 4), TopicPartition("t", 1): (2, 3, 4)}
    down = replication_factor_plan("t", {0: (3, 1, 2), 1: (1, 2, 3)}, 1, {1: 2, 2: 2, 3: 2})
    assert down.targets == {TopicPartition("t", 0): (3,), TopicPartition("t", 1): (1,)}
    with pytest.raises(InvalidReplicaAssignmentError, match="replication factor 4 is invalid"):
        replication_factor_plan("t", {0: (1,)}, 4, {1: 0, 2: 0, 3: 0})


def test_rebalance_over_two_new_brokers_evens_replicas_and_preferred_leaders() -> None:
    assignments = {"t": {p: ((p % 3), (p + 1) % 3) for p in range(10)}}  # 20 replicas on brokers 0-2
    plan = rebalance_plan(assignments, [0, 1, 2, 3, 4])
    after = {p: plan.targets.get(TopicPartition("t", p), r) for p, r in assignments["t"].items()}
    replicas = Counter(b for r in after.values() for b in r)
    leaders = Counter(r[0] for r in after.values())
    assert replicas == {0: 4, 1: 4, 2: 4, 3: 4, 4: 4}
    assert leaders == {0: 2, 1: 2, 2: 2, 3: 2, 4: 2}
    assert all(len(set(r)) == 2 for r in after.values())
    moved = sum(len(set(after[p]) - set(assignments["t"][p])) for p in after)
    assert moved == 8  # the fewest replica copies: brokers 3 and 4 get 4 each, nothing else moves
    assert rebalance_plan({"t": after}, [0, 1, 2, 3, 4]).targets == {}


def test_decommission_keeps_the_place_and_avoids_the_racks_in_use() -> None:
    assignments = {"t": {0: (0, 2), 1: (1, 0), 2: (1, 2)}}
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c"}
    plan = decommission_plan(assignments, 0, [0, 1, 2, 3, 4], racks)
    # t-0's other replica is on rack b: broker 3 (rack b) is refused, 1 (rack a) and 4 (rack c) remain, 4
    # holds fewer; t-1's other is on rack a: 4 (now 1 replica) or 2, 3 (rack b): 3 holds none
    assert plan.targets == {TopicPartition("t", 0): (4, 2), TopicPartition("t", 1): (1, 3)}
    with pytest.raises(InvalidReplicaAssignmentError, match="cannot hold them all"):
        decommission_plan({"t": {0: (0, 1, 2)}}, 0, [0, 1, 2])
