"""Broker memory with 1,000 partitions (issue 39's growth), a phase of the Kafka comparison.

Once per broker, after its warm-up and before the rounds (:class:`bench.paper_kafka.KafkaBench`'s
``before_rounds``; the brokers then hold only their warm-up topic):

1. the broker's resident memory (``VmRSS``, :mod:`bench.broker_rss`) is read;
2. a topic of ``partitions`` (1,000) partitions is created, a confluent-kafka producer at batch 50,
   ``acks=1`` writes the run's records spread over them (librdkafka's partitioner, as the partitions
   phases), checked as every phase is (no delivery error, the high watermarks add up to the records);
3. one consumer assigned all the partitions reads every record back (exactly that many);
4. the resident memory is read again.

Both readings go into :attr:`~bench.paper_kafka.KafkaComparison.memory` (MiB, by broker), the produce and
consume rates under ``memory: ...`` cases. One reading a broker, not a median: a second 1,000-partition
topic would measure 2,000. RSS counts what the process has touched (a JVM's heap grows into its ``-Xms``
as it is used) and mapped, not the page cache of its segment files; the rounds that follow run with the
topic in place, on both brokers alike.
"""

from __future__ import annotations

from functools import partial

from bench.broker_rss import BrokerRss
from bench.paper_kafka import BrokerUnderTest, KafkaBench, partitions_case

#: issue 39: broker memory (RSS) at 1,000 partitions
MEMORY_PARTITIONS = 1000


def memory_case(phase: str, partitions: int) -> str:
    return f"memory: {partitions_case(phase, partitions)}"


class MemoryPhase:
    """The phase :class:`~bench.paper_kafka.KafkaBench` runs once per broker before the rounds."""

    def __init__(self, partitions: int = MEMORY_PARTITIONS) -> None:
        self.partitions = partitions

    def __call__(self, bench: KafkaBench, broker: BrokerUnderTest, round_number: int) -> None:
        rss = BrokerRss(broker.pids)
        case = memory_case("produce", self.partitions)
        try:
            before = rss.mib()
        except Exception as exc:
            bench.failed(case, broker, round_number, exc)
            return
        topic = f"mem-{broker.slug}-p{self.partitions}"
        count = len(bench.values)
        if not bench.phase(
            case,
            broker,
            round_number,
            topic,
            self.partitions,
            count,
            partial(bench.make_producer, broker, topic, 50, "1", None),
        ):
            return
        if not bench.consume(
            memory_case("consume", self.partitions), broker, round_number, topic, self.partitions, count
        ):
            return
        try:
            after = rss.mib()
        except Exception as exc:
            bench.failed(case, broker, round_number, exc)
            return
        bench.comparison.memory[broker.name] = {
            "partitions": float(self.partitions),
            "before_mib": before,
            "after_mib": after,
        }
        bench.say(
            f"memory {broker.name:<13} RSS {before:,.0f} MiB -> {after:,.0f} MiB with {self.partitions:,} "
            "partitions created, written and read"
        )
