"""A real confluent-kafka consumer in a Kafka-protocol group, for the tests of the tools that look at groups
(``lumber groups lag``, the console's group pages): it joins, reads a known number of records, commits
known offsets and stays a member until the ``with`` block ends."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition


@contextmanager
def confluent_group_member(
    bootstrap_servers: Sequence[str],
    group: str,
    topic: str,
    records: int,
    commit: dict[int, int],
    client_id: str = "confluent-member",
    timeout_s: float = 60,
) -> Iterator[Any]:
    """Join ``group`` subscribed to ``topic``, read ``records`` records, commit ``commit`` (partition ->
    offset) synchronously, and yield the consumer; it leaves the group (LeaveGroup) on exit."""
    consumer = Consumer(
        {
            "bootstrap.servers": ",".join(bootstrap_servers),
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 3_600_000,  # a member for the whole test without polling again
        }
    )
    try:
        consumer.subscribe([topic])
        read = 0
        deadline = time.monotonic() + timeout_s
        while read < records:
            assert time.monotonic() < deadline, f"{group}: read {read} of {records} records of {topic}"
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                read += 1
        committed = consumer.commit(
            offsets=[ConfluentPartition(topic, p, offset) for p, offset in sorted(commit.items())],
            asynchronous=False,
        )
        assert [(c.partition, c.offset, c.error) for c in committed or []] == [
            (p, offset, None) for p, offset in sorted(commit.items())
        ]
        yield consumer
    finally:
        consumer.close()
