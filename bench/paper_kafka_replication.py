"""Replication against Apache Kafka (issue 39): three brokers each, RF 3 with ``acks=all`` against RF 1 with
``acks=1``, the same client against both.

Run by ``bench/paper.py`` (``--replication``, on by default) after the one-broker comparison of
:mod:`bench.paper_kafka`, whose brokers are stopped by then:

* **Kafka**: three Kafka 4.4 nodes in KRaft combined mode (``KafkaCluster(size=3)``: each a broker and a
  voter of a three-voter quorum), each as the one-broker comparison runs its node (Kafka's defaults but
  the listeners on 127.0.0.1, ``-Xmx1G -Xms1G`` and G1 with the start script's flags); the internal
  topics' replication factor is 3, Kafka's default. **Lumber**: three more brokers with Lumber's defaults
  on the paper bench's ZooKeeper (as ``bench/replication.py`` runs three).
* **Cases**, each a topic of 3 partitions whose leaders are on the three brokers (Kafka's assignment; for
  Lumber partition ``p`` leads on the ``p``-th broker and its followers are the next ones): a
  confluent-kafka producer at batch 50 (the comparison's batch-50 settings) spreads the run's records over
  the partitions (librdkafka's partitioner) to an **RF 1** topic with ``acks=1`` and to an **RF 3** topic
  with ``acks=all`` (answered once every in-sync replica has the records; each topic created with its
  full ISR before the clock starts); then one consumer reads each topic from offset 0. Checked like every
  phase: no delivery error, the high watermarks add up to the records acknowledged (for RF 3 with
  ``acks=all``: the records are on every replica of the ISR), the consumer receives exactly that many.
* **Rounds** alternate as the comparison's do (Kafka first in odd rounds); before them each cluster runs
  both cases once, unreported (every broker leads a partition, so each JVM compiles its leader's paths).
  Broker CPU is the three broker processes' together, per million records.

Issue 39's goal: Lumber's ratio RF 3 ``acks=all`` / RF 1 ``acks=1`` (of the medians) at least Kafka's own
ratio in the same run. Both clusters run on the same two cores as the client: a follower's fetches compete
with its leader for CPU, which three machines would not.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.paper_kafka import (
    KAFKA,
    LUMBER,
    LUMBER_DEFAULTS,
    BrokerUnderTest,
    KafkaBench,
    KafkaComparison,
    Report,
    benchmark_kafka,
)
from bench.paper_kafka_clients import admin_create_topic, confluent_consume, connected_consumer
from lumber.dev.kafka_server import KafkaCluster

BROKERS = 3
PARTITIONS = 3
#: (replication factor, acks) of the baseline and of the replicated case
BASELINE = (1, "1")
REPLICATED = (3, "all")


def replication_case(phase: str, replication_factor: int, acks: str | None = None) -> str:
    suffix = f", acks={acks}" if acks is not None else ""
    return f"replication: {phase}, RF {replication_factor}{suffix}"


def lumber_create_replicated(
    cluster: Any, broker_ids: list[int], replication_factor: int
) -> Callable[[str, int], None]:
    """Partition ``p`` on ``broker_ids[p], broker_ids[p + 1], ...`` (its leader first); returns once every
    partition's ISR holds all its replicas."""

    def create(topic: str, partitions: int) -> None:
        count = len(broker_ids)
        assignment = {
            p: [broker_ids[(p + r) % count] for r in range(replication_factor)] for p in range(partitions)
        }
        cluster.create_topic(topic, partitions, assignment=assignment)
        for p, replicas in assignment.items():
            cluster.wait_for_isr(topic, p, replicas, timeout_s=60)

    return create


def warm_up(bench: KafkaBench, views: dict[int, BrokerUnderTest]) -> None:
    """Each case once, unreported, the run's records spread over the partitions and read back: every broker
    leads a partition, so each JVM compiles its leader's paths (a one-partition warm-up would warm one
    leader); topic names of their own (the one-broker comparison's Lumber broker used the same ZooKeeper)."""
    for replication_factor, acks in (BASELINE, REPLICATED):
        view = views[replication_factor]
        topic = f"warmup-replication-{view.slug}-rf{replication_factor}"
        try:
            view.create_topic(topic, PARTITIONS)
            bench.make_producer(view, topic, 50, acks, None)()
            consumer = connected_consumer(view.bootstrap, topic, len(bench.values))
            try:
                confluent_consume(consumer, topic, PARTITIONS, len(bench.values))
            finally:
                consumer.close()
        except Exception as exc:
            bench.comparison.failures.append(
                f"replication: {view.name} warm-up, RF {replication_factor}: {type(exc).__name__}: {exc}"
            )


def run_rounds(bench: KafkaBench, systems: dict[str, dict[int, BrokerUnderTest]]) -> None:
    """Warm-up, then the alternated rounds of the two cases on each system (``systems[name][rf]``: the
    system's view creating topics of that replication factor)."""
    n = len(bench.values)
    for views in systems.values():
        warm_up(bench, views)
    for round_number in range(1, bench.comparison.rounds + 1):
        for system in bench.round_order(round_number):
            for replication_factor, acks in (BASELINE, REPLICATED):
                view = systems[system.name][replication_factor]
                topic = f"r{round_number}-{view.slug}-rf{replication_factor}"
                if bench.phase(
                    replication_case("produce", replication_factor, acks),
                    view,
                    round_number,
                    topic,
                    PARTITIONS,
                    n,
                    partial(bench.make_producer, view, topic, 50, acks, None),
                ):
                    bench.consume(
                        replication_case("consume", replication_factor),
                        view,
                        round_number,
                        topic,
                        PARTITIONS,
                        n,
                    )


def _systems(cluster: Any, kafka: KafkaCluster, lumber: list[Any]) -> dict[str, dict[int, BrokerUnderTest]]:
    """Each system's views by replication factor: the same brokers, topics created with that factor."""
    kafka_pids = tuple(node.pid for node in kafka.nodes if node.pid is not None)
    lumber_pids = tuple(broker.popen.pid for broker in lumber if broker.popen is not None)
    if len(kafka_pids) != BROKERS or len(lumber_pids) != BROKERS:
        raise RuntimeError("a broker of the replication comparison is not running")
    lumber_ids = [broker.broker_id for broker in lumber]
    lumber_bootstrap = ",".join(broker.address for broker in lumber)
    factors = (BASELINE[0], REPLICATED[0])
    return {
        KAFKA: {
            rf: BrokerUnderTest(
                KAFKA, kafka.bootstrap, kafka_pids, admin_create_topic(kafka.bootstrap, replication_factor=rf)
            )
            for rf in factors
        },
        LUMBER: {
            rf: BrokerUnderTest(
                LUMBER, lumber_bootstrap, lumber_pids, lumber_create_replicated(cluster, lumber_ids, rf)
            )
            for rf in factors
        },
    }


def run_replication(cluster: Any, scratch: Path, comparison: KafkaComparison, say: Report) -> None:
    """Three Kafka nodes against three Lumber brokers on ``cluster``'s ZooKeeper, the results into
    ``comparison``; every broker started here is stopped before it returns."""
    kafka = benchmark_kafka(scratch / "kafka-replication", BROKERS)
    say(f"replication: starting {BROKERS} Kafka nodes (KRaft, combined) and {BROKERS} Lumber brokers")
    lumber: list[Any] = []
    try:
        kafka.start()
        lumber.extend(cluster.add_broker(LUMBER_DEFAULTS) for _ in range(BROKERS))
        systems = _systems(cluster, kafka, lumber)
        kafka_view, lumber_view = systems[KAFKA][BASELINE[0]], systems[LUMBER][BASELINE[0]]
        bench = KafkaBench(
            [kafka_view, lumber_view],
            comparison.records,
            comparison.rounds,
            [],
            scratch / "kafka-replication-bench",
            say,
            comparison=comparison,
        )
        comparison.replication = True
        run_rounds(bench, systems)
        comparison.notes.append(
            f"replication: {BROKERS} Kafka nodes (KRaft, each broker and controller, settings and JVM as the "
            f"one node's; internal topics' replication factor 3) against {BROKERS} Lumber brokers with their "
            f"defaults; topics of {PARTITIONS} partitions, broker CPU of the {BROKERS} processes together"
        )
    except Exception as exc:
        comparison.failures.append(f"replication: {type(exc).__name__}: {exc}")
        say(f"[red]replication: {type(exc).__name__}: {exc}")
    finally:
        kafka.stop()
        for broker in lumber:
            broker.stop()
