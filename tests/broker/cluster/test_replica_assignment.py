"""Kafka's replica placement (broker/cluster/replica_assignment.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.cluster.errors import InvalidPartitionsError, InvalidReplicationFactorError, NoLiveBrokersError
from broker.cluster.replica_assignment import assign_replicas


def test_kafka_admin_utils_test_expected_layout() -> None:
    # Kafka 2.8 AdminRackAwareTest.testReplicaAssignment: brokers 0..4, 10 partitions, factor 3, fixed index 0
    assert assign_replicas(10, 3, [0, 1, 2, 3, 4], start_index=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_kafka_invalid_replication_factors() -> None:
    # the same Kafka test: factor 0 and factor 6 on five brokers are refused
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(10, 0, [0, 1, 2, 3, 4], topic="t")
    assert str(info.value) == "topic 't': replication factor 0 is invalid: it must be at least 1"
    with pytest.raises(InvalidReplicationFactorError) as info:
        assign_replicas(10, 6, [4, 3, 2, 1, 0], topic="t")
    assert str(info.value) == (
        "topic 't': replication factor 6 is invalid: it exceeds the 5 live brokers [0, 1, 2, 3, 4]"
    )


def test_fixed_start_index_shifts_followers_each_round() -> None:
    # start index 1 on ids [3, 1, 2] (sorted to [1, 2, 3]), worked by hand from Kafka's loop
    assert assign_replicas(7, 2, [3, 1, 2], start_index=1) == {
        0: (2, 1),  # shift 1: first 1, follower (1 + 1 + 1 % 2) % 3 = 0
        1: (3, 2),
        2: (1, 3),
        3: (2, 3),  # round 2, shift 2: follower (1 + 1 + 0) % 3 = 2
        4: (3, 1),
        5: (1, 2),
        6: (2, 1),  # round 3, shift 3
    }


def test_factor_one_is_the_round_robin() -> None:
    assert assign_replicas(4, 1, [10, 5], start_index=0) == {0: (5,), 1: (10,), 2: (5,), 3: (10,)}
    assert assign_replicas(2, 1, [1, 2, 3, 4], start_index=3) == {0: (4,), 1: (1,)}


@pytest.mark.parametrize("seed", range(5))
def test_random_layouts_spread_leaders_and_replicas_evenly(seed: int) -> None:
    assignment = assign_replicas(12, 3, [1, 2, 3, 4], rng=random.Random(seed))
    assert sorted(assignment) == list(range(12))
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == {1: 3, 2: 3, 3: 3, 4: 3}
    assert Counter(b for r in assignment.values() for b in r) == {1: 9, 2: 9, 3: 9, 4: 9}


def test_bad_inputs() -> None:
    with pytest.raises(InvalidPartitionsError, match="0 partitions: a topic needs at least 1"):
        assign_replicas(0, 1, [1], start_index=0)
    with pytest.raises(NoLiveBrokersError, match="cannot place 3 partitions: no live brokers"):
        assign_replicas(3, 1, [], start_index=0)
    with pytest.raises(ValueError, match=r"broker ids \[1, 1\] name a broker twice"):
        assign_replicas(3, 1, [1, 1], start_index=0)
