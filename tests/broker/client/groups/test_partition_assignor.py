"""broker/client/groups/partition_assignor.py: the range (Algorithm 1) and round-robin assignments,
exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client.groups.partition_assignor import assign, range_assign, round_robin_assign, stream_of
from broker.record.topic_partition import TopicPartition


def test_range_gives_contiguous_chunks_the_first_ones_longer() -> None:
    # the paper's example shape: 10 partitions over 3 consumers
    assert range_assign({"c": {"t": 1}, "a": {"t": 1}, "b": {"t": 1}}, {"t": 10}) == {
        "a": {"t": [[0, 1, 2, 3]]},
        "b": {"t": [[4, 5, 6]]},
        "c": {"t": [[7, 8, 9]]},
    }


def test_range_counts_streams_and_works_per_topic() -> None:
    subscriptions = {"a": {"t": 2, "u": 1}, "b": {"t": 1}}
    assert range_assign(subscriptions, {"t": 7, "u": 2}) == {
        "a": {"t": [[0, 1, 2], [3, 4]], "u": [[0, 1]]},
        "b": {"t": [[5, 6]]},
    }


def test_more_streams_than_partitions_leaves_streams_empty() -> None:
    assert range_assign({"a": {"t": 1}, "b": {"t": 1}, "c": {"t": 1}}, {"t": 2}) == {
        "a": {"t": [[0]]},
        "b": {"t": [[1]]},
        "c": {"t": [[]]},
    }


def test_topics_that_do_not_exist_assign_nothing() -> None:
    assert range_assign({"a": {"t": 1, "missing": 2}}, {"t": 1}) == {"a": {"t": [[0]]}}
    assert round_robin_assign({"a": {"missing": 1}}, {}) == {"a": {}}
    assert range_assign({}, {"t": 3}) == {}


def test_round_robin_deals_all_topics_in_turn() -> None:
    subscriptions = {"b": {"x": 1, "y": 1}, "a": {"x": 1, "y": 1}}
    assert round_robin_assign(subscriptions, {"x": 3, "y": 3}) == {
        "a": {"x": [[0, 2]], "y": [[1]]},
        "b": {"x": [[1]], "y": [[0, 2]]},
    }
    # range would give a four partitions and b two
    assert range_assign(subscriptions, {"x": 3, "y": 3}) == {
        "a": {"x": [[0, 1]], "y": [[0, 1]]},
        "b": {"x": [[2]], "y": [[2]]},
    }


def test_round_robin_skips_streams_that_do_not_subscribe() -> None:
    subscriptions = {"a": {"x": 1}, "b": {"x": 1, "y": 2}}
    assert round_robin_assign(subscriptions, {"x": 2, "y": 3}) == {
        "a": {"x": [[0]]},
        "b": {"x": [[1]], "y": [[1], [0, 2]]},
    }


def test_strategy_names_and_bad_input() -> None:
    assert assign("range", {"a": {"t": 1}}, {"t": 1}) == {"a": {"t": [[0]]}}
    assert assign("roundrobin", {"a": {"t": 1}}, {"t": 1}) == {"a": {"t": [[0]]}}
    with pytest.raises(ValueError, match="unknown partition assignment strategy 'sticky'"):
        assign("sticky", {}, {})
    with pytest.raises(ValueError, match="member 'a' subscribes to 't' with 0 streams"):
        range_assign({"a": {"t": 0}}, {"t": 1})
    with pytest.raises(ValueError, match="topic 't' has -1 partitions"):
        range_assign({"a": {"t": 1}}, {"t": -1})


def test_stream_of_flattens_an_assignment() -> None:
    assert stream_of({"a": {"t": [[0], [1]]}, "b": {"t": [[2]]}}) == {
        TopicPartition("t", 0): ("a", 0),
        TopicPartition("t", 1): ("a", 1),
        TopicPartition("t", 2): ("b", 0),
    }


members = st.dictionaries(
    st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
    st.dictionaries(st.sampled_from(["t", "u", "v"]), st.integers(1, 3), min_size=1),
    min_size=1,
)
counts = st.dictionaries(st.sampled_from(["t", "u", "v"]), st.integers(0, 40))


@given(members, counts, st.sampled_from(["range", "roundrobin"]))
def test_every_partition_goes_to_exactly_one_subscribing_stream(
    subscriptions, partition_counts, strategy
) -> None:
    assignment = assign(strategy, subscriptions, partition_counts)
    flat = [
        (topic, p, member, number)
        for member, topics in assignment.items()
        for topic, streams in topics.items()
        for number, partitions in enumerate(streams)
        for p in partitions
    ]
    subscribed = {t for topics in subscriptions.values() for t in topics}
    expected = sorted((t, p) for t, n in partition_counts.items() if t in subscribed for p in range(n))
    assert sorted((t, p) for t, p, _, _ in flat) == expected
    for topic, _, member, number in flat:
        assert number < subscriptions[member][topic]
    # the same answer whatever the order of the inputs
    reversed_subscriptions = {
        m: dict(reversed(list(s.items()))) for m, s in reversed(list(subscriptions.items()))
    }
    assert (
        assign(strategy, reversed_subscriptions, dict(reversed(list(partition_counts.items())))) == assignment
    )


@given(members, counts)
def test_range_chunks_differ_by_at_most_one(subscriptions, partition_counts) -> None:
    assignment = range_assign(subscriptions, partition_counts)
    for topic in partition_counts:
        sizes = [len(s) for topics in assignment.values() for s in topics.get(topic, [])]
        if sizes:
            assert max(sizes) - min(sizes) <= 1
