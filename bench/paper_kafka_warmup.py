"""The Kafka comparison's warm-up (:mod:`bench.paper_kafka`): every produce shape the rounds measure, for a
while, before round 1, unreported.

A cold JVM interprets Kafka's request paths, compiles the hot ones after some thousands of calls (C1, then
C2 with profiles) and, on a busy two-core machine, waits for its compiler threads; each shape of request
(one record per request or fifty, ``acks=1`` or ``acks=all``, one partition per request or several) runs
code of its own. One produce of 50,000 records at batch 50 (a tenth of a second for Kafka) warmed neither
the batch-1 nor the ``acks=all`` paths nor the partitioner's requests, and Kafka's first rounds spread
widely. So each broker now takes, before round 1, every :class:`WarmUpShape` the run measures:

* a confluent-kafka producer of that shape (:class:`~bench.paper_kafka_clients.ConfluentProducer`, the
  measured phases' client and settings) to a topic of its own (``warmup-<slug>-<n>``, the shape's
  partitions) sends passes of :data:`PASS_RECORDS` records (at most the run's), each until acknowledged,
  until the passes add up to ``seconds`` of traffic (at least one pass, at most :data:`MAX_PASSES`);
* a shape whose topic the rounds read back (:attr:`WarmUpShape.consume`) is then read from the beginning
  by a confluent-kafka consumer, every record produced to it (counted exactly).

Lumber takes the same warm-up (its numba kernels compile on first use; the rest is Python). Each pass's
rate is kept (:attr:`WarmUpShape.case` -> list of records/s), so that the report shows how far a broker's
rate moved while it warmed. A failure raises; the caller records it and the run goes on. One thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.paper_kafka_clients import ConfluentProducer, confluent_consume, connected_consumer

#: records per warm-up pass (the run's records if fewer)
PASS_RECORDS = 50_000
#: the most passes a shape takes, whatever its rate
MAX_PASSES = 200
#: traffic per shape by default
WARM_UP_SECONDS = 3.0


@dataclass(frozen=True)
class WarmUpShape:
    """One shape of produce request the rounds measure: the case it warms, its client settings, its
    topic's partitions, the partition given with each record (None: librdkafka's partitioner) and whether
    the rounds read such a topic back."""

    case: str
    batch: int
    acks: str
    partitions: int
    partition: int | None
    consume: bool


def warm_up(
    bootstrap: str,
    create_topic: Callable[[str, int], None],
    slug: str,
    shapes: Sequence[WarmUpShape],
    values: Sequence[bytes],
    seconds: float,
    say: Callable[[str], None],
    name: str,
) -> dict[str, list[float]]:
    """Warm broker ``name`` (at ``bootstrap``) with every shape; returns each case's passes' records/s."""
    chunk = list(values[:PASS_RECORDS])
    if not chunk:
        raise ValueError("a warm-up needs at least one record")
    passes: dict[str, list[float]] = {}
    for index, shape in enumerate(shapes):
        topic = f"warmup-{slug}-{index}"
        create_topic(topic, shape.partitions)
        producer = ConfluentProducer(bootstrap, topic, shape.batch, shape.acks)
        rates = passes[shape.case] = []
        spent = 0.0
        while not rates or (spent < seconds and len(rates) < MAX_PASSES):
            started = time.perf_counter()
            producer.send(chunk, shape.partition)
            took = time.perf_counter() - started
            spent += took
            rates.append(len(chunk) / took)
        produced = len(chunk) * len(rates)
        if shape.consume:
            consumer = connected_consumer(bootstrap, topic, produced)
            try:
                confluent_consume(consumer, topic, shape.partitions, produced)
            finally:
                consumer.close()
        say(
            f"warm-up {name:<13} {shape.case:<30} {len(rates):>3} passes of {len(chunk):,} "
            f"in {spent:5.2f} s: first {rates[0]:,.0f}, last {rates[-1]:,.0f} rec/s"
            + (f"; read back {produced:,}" if shape.consume else "")
        )
    return passes
