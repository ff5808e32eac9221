"""Kafka's round robin of partitions over brokers (broker/cluster/partition_assignment.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from broker.cluster.errors import InvalidPartitionsError, NoLiveBrokersError
from broker.cluster.partition_assignment import assign_partitions


def test_exact_mapping_for_a_start_index() -> None:
    assert assign_partitions(7, [3, 1, 2], start_index=1) == {
        0: (2,),
        1: (3,),
        2: (1,),
        3: (2,),
        4: (3,),
        5: (1,),
        6: (2,),
    }


def test_start_index_zero_begins_with_the_lowest_id_and_wraps() -> None:
    assert assign_partitions(4, [10, 5], start_index=0) == {0: (5,), 1: (10,), 2: (5,), 3: (10,)}
    assert assign_partitions(2, [10, 5], start_index=5) == {0: (10,), 1: (5,)}


def test_twelve_partitions_on_three_brokers_get_four_each() -> None:
    for start in range(3):
        assignment = assign_partitions(12, [1, 2, 3], start_index=start)
        assert sorted(assignment) == list(range(12))
        assert Counter(replicas[0] for replicas in assignment.values()) == {1: 4, 2: 4, 3: 4}


def test_uneven_counts_differ_by_at_most_one() -> None:
    assignment = assign_partitions(5, [1, 2, 3], start_index=2)
    assert assignment == {0: (3,), 1: (1,), 2: (2,), 3: (3,), 4: (1,)}
    assert Counter(r[0] for r in assignment.values()) == {3: 2, 1: 2, 2: 1}


def test_fewer_partitions_than_brokers() -> None:
    assert assign_partitions(2, [1, 2, 3, 4], start_index=3) == {0: (4,), 1: (1,)}


def test_bad_inputs() -> None:
    with pytest.raises(InvalidPartitionsError, match="0 partitions: a topic needs at least 1"):
        assign_partitions(0, [1], start_index=0)
    with pytest.raises(NoLiveBrokersError, match="cannot place 3 partitions: no live brokers"):
        assign_partitions(3, [], start_index=0)
    with pytest.raises(ValueError, match=r"broker ids \[1, 1\] name a broker twice"):
        assign_partitions(3, [1, 1], start_index=0)
