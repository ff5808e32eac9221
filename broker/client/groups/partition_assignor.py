"""Who in a consumer group consumes which partition: pure functions, no I/O (paper section 3.2, Algorithm 1).

A member subscribes to each topic with a number of *streams* (``create_message_streams({"events": 2})``
asks for two); the unit that gets partitions is a stream, named ``(member id, stream number)`` and ordered
by member id, then number. An assignment gives each stream of each member, per topic, its partitions::

    {"member-a": {"events": [[0, 1, 2], [3, 4]]}, "member-b": {"events": [[5, 6], [7, 8]]}}

Both strategies are deterministic: the same subscriptions and partition counts give the same assignment
whatever the order of the inputs, so any member computing it gets the same answer.

* :func:`range_assign` (the default, Algorithm 1): per topic, the partitions in order are cut into as many
  contiguous chunks as there are streams subscribing to the topic, the first ``n % streams`` chunks one
  partition longer, and the sorted streams take the chunks in order. With 10 partitions and 3 streams:
  ``[0-3], [4-6], [7-9]``.
* :func:`round_robin_assign`: every ``(topic, partition)`` in order goes to the next stream, in circular
  sorted order, that subscribes to its topic (streams that do not are skipped). With identical
  subscriptions, stream totals over all topics differ by at most one, where range can leave the first
  streams one partition ahead on every topic.

Every partition of a topic that has at least one subscribing stream is assigned to exactly one stream; a
topic missing from ``partition_counts`` (not created yet) assigns nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from broker.record.topic_partition import TopicPartition

#: member id -> topic -> how many streams the member consumes the topic with (at least 1)
Subscriptions = Mapping[str, Mapping[str, int]]
#: member id -> topic -> the partitions of each of the member's streams for that topic (stream number =
#: list index); every subscribed topic that exists has one list per stream, possibly empty
Assignment = dict[str, dict[str, list[list[int]]]]
Strategy = Literal["range", "roundrobin"]
Assignor = Callable[[Subscriptions, Mapping[str, int]], Assignment]
#: one of a member's own streams, as its application asked for them: (topic, stream number)
StreamKey = tuple[str, int]


def range_assign(subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> Assignment:
    """Algorithm 1: per topic, contiguous chunks of the sorted partitions to the sorted streams."""
    assignment = _empty(subscriptions, partition_counts)
    for topic in sorted(partition_counts):
        streams = _streams_of(subscriptions, topic)
        if not streams:
            continue
        per_stream, extra = divmod(partition_counts[topic], len(streams))
        for k, (member, number) in enumerate(streams):
            start = k * per_stream + min(k, extra)
            length = per_stream + (1 if k < extra else 0)
            assignment[member][topic][number] = list(range(start, start + length))
    return assignment


def round_robin_assign(subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> Assignment:
    """Every topic-partition in order to the next subscribing stream, in circular sorted order."""
    assignment = _empty(subscriptions, partition_counts)
    circle = sorted(
        {
            (member, number)
            for member, topics in subscriptions.items()
            for number in range(max(topics.values(), default=0))
        }
    )
    cursor = 0
    for topic in sorted(partition_counts):
        if not _streams_of(subscriptions, topic):
            continue
        for partition in range(partition_counts[topic]):
            while True:
                member, number = circle[cursor % len(circle)]
                cursor += 1
                if number < subscriptions[member].get(topic, 0):
                    assignment[member][topic][number].append(partition)
                    break
    return assignment


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": round_robin_assign}


def assign(strategy: str, subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> Assignment:
    """The assignment by ``strategy`` (``"range"`` or ``"roundrobin"``)."""
    try:
        assignor = ASSIGNORS[strategy]
    except KeyError:
        raise ValueError(
            f"unknown partition assignment strategy {strategy!r}: use one of {sorted(ASSIGNORS)}"
        ) from None
    return assignor(subscriptions, partition_counts)


def stream_of(assignment: Assignment) -> dict[TopicPartition, tuple[str, int]]:
    """Each assigned partition's ``(member id, stream number)``."""
    owners: dict[TopicPartition, tuple[str, int]] = {}
    for member, topics in assignment.items():
        for topic, streams in topics.items():
            for number, partitions in enumerate(streams):
                for partition in partitions:
                    owners[TopicPartition(topic, partition)] = (member, number)
    return owners


def _check(subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> None:
    for member, topics in subscriptions.items():
        for topic, streams in topics.items():
            if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
                raise ValueError(
                    f"member {member!r} subscribes to {topic!r} with {streams!r} streams: need >= 1"
                )
    for topic, count in partition_counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"topic {topic!r} has {count!r} partitions: need an integer >= 0")


def _empty(subscriptions: Subscriptions, partition_counts: Mapping[str, int]) -> Assignment:
    _check(subscriptions, partition_counts)
    return {
        member: {
            topic: [[] for _ in range(streams)]
            for topic, streams in sorted(topics.items())
            if topic in partition_counts
        }
        for member, topics in sorted(subscriptions.items())
    }


def _streams_of(subscriptions: Subscriptions, topic: str) -> list[tuple[str, int]]:
    """The streams subscribing to ``topic``, sorted by member id, then stream number."""
    return sorted(
        (member, number) for member, topics in subscriptions.items() for number in range(topics.get(topic, 0))
    )
