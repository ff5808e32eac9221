"""Apache Kafka as the first peer of the paper bench (issue 39): one Kafka broker and one Lumber broker, the
same clients against both, several alternated rounds.

The brokers: Apache Kafka 4.4 (``lumber.dev.kafka_server``, jars from ``make jars``), one node in KRaft
combined mode with Kafka's default server settings except what one node on 127.0.0.1 needs (its listeners,
the internal topics' replication factor 1) and the JVM as ``kafka-server-start.sh`` runs it (``-Xmx1G
-Xms1G``, G1 with the script's flags); and one Lumber broker with its default settings (``[log]
flush_ms`` 1 s, ``expose = "appended"``, four handler threads), on the paper bench's ZooKeeper. Both run
for the whole comparison but only one is driven at a time, on the same cores.

The clients, 100-byte records, one producer or one consumer at a time:

* **confluent-kafka** (librdkafka) producing to a one-partition topic at batch 1 (``linger.ms=0``,
  ``batch.num.messages=1``: one record per Produce request) and batch 50 (``linger.ms=5``,
  ``batch.num.messages=50``), each with ``acks=1`` and ``acks=all``, idempotence off; the producer is
  connected, with the topic's metadata, before the clock starts, which runs from the first ``produce()`` to
  ``flush()`` returning (every record acknowledged). Then a confluent-kafka consumer reads the batch-50
  ``acks=1`` topic from the beginning (``assign``, no group commits), connected before the clock starts;
  then another consumer, also connected before the clock, reads it again, until the phase has read at
  least ``consume_records`` (:data:`CONSUME_RECORDS`, 2 million: ten consumers one after the other over
  200,000 records, two seconds or more; one pass lasts a quarter of a second, which the machine's noise
  and the first fetch's start moved by several per cent either way). Not one consumer assigned the topic
  again: at the topic's end its next Fetch waits ``fetch.wait.max.ms`` (500 ms) in the broker, and
  librdkafka sends no other Fetch to that broker meanwhile, so each pass would wait for it.
* **kcat** (librdkafka's command-line client, a separate process) producing the same records at batch 50,
  ``acks=1``, from a file, and consuming them from the beginning (``-c N``): the process's whole run is
  timed, its start-up included, alike for both brokers.
* **Partitions**: a confluent-kafka producer at batch 50, ``acks=1``, no key (librdkafka's partitioner
  spreads the records over all partitions), to topics of 1, 4, 10 and 100 (and with
  ``--many-partitions``, 1,000) partitions, the run's records sent again until at least
  ``produce_records`` (:data:`PRODUCE_RECORDS`, 1 million: a phase of 200,000 lasted 0.17 s on Lumber,
  whose rounds then spread by a fifth, and at 1,000 partitions librdkafka's first batch to each partition
  was a large part of it); then one consumer assigned all of them reads everything, and as many consumers
  in turn as read at least ``consume_records``.
* **Extra phases** other modules give :class:`KafkaBench`: ``before_rounds`` once per broker after its
  warm-up (the memory at 1,000 partitions, :mod:`bench.paper_kafka_memory`), ``each_round`` after a
  broker's cases in every round (1, 10 and 100 client connections, :mod:`bench.paper_kafka_connections`),
  with the same helpers (:meth:`KafkaBench.phase`, :meth:`~KafkaBench.consume`, :meth:`~KafkaBench.measure`).
  Replication, three brokers each, runs after this comparison's brokers stop
  (:mod:`bench.paper_kafka_replication`, also through :class:`KafkaBench`'s helpers).

The clients' code is :mod:`bench.paper_kafka_clients`.

Every phase is checked, not only timed: no delivery error, the topic's high watermarks add up to the records
sent, the consumer received exactly that many. **Broker CPU**: utime + stime of the broker process
(``/proc/<pid>/stat``, :mod:`bench.broker_cpu`) before and after each phase, as CPU seconds per million
records: the fairest figure on a shared machine; and the broker's cores over the phase (its CPU seconds over
the wall seconds). **Client CPU**: the same per million records for this process (the driving thread and
librdkafka's) and kcat's, :func:`client_cpu_seconds`: on two cores the broker and the client share, a phase
that leaves none idle runs at about two cores over the two costs' sum, so a ratio of two phases is the inverse
ratio of their sums, the client's share included. **Machine idle**: the share of both cores' time that was
idle during each phase (``/proc/stat``, :mod:`bench.machine_idle`): a phase with a core to spare was bound by
the broker or the client, one with nothing idle by the machine, whose rate moves with whatever else ran.
**Warm-up**: before round 1 each broker takes every produce shape the rounds measure (batch 1 and 50,
``acks=1`` and ``all``, each partition count), ``warm_up_s`` seconds of traffic each, and reads back the
topics of the shapes the rounds read (:mod:`bench.paper_kafka_warmup`: a cold JVM compiles each shape's paths
only after thousands of its requests; Lumber's numba kernels compile on first use); each pass's rate is kept
in :attr:`KafkaComparison.warm_up`. Round ``r`` drives Kafka first when ``r`` is odd, Lumber first when even.
Figures: the median of the rounds with min and max (:mod:`bench.spread`); tables in
:mod:`bench.paper_kafka_report`. One thread drives it all (librdkafka's own threads and the connections
phases' client threads aside); a failed phase is recorded in :attr:`KafkaComparison.failures` and the run goes
on.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.broker_cpu import BrokersCpu, per_million
from bench.machine_idle import MachineIdle
from bench.paper_kafka_clients import (
    ConfluentProducer,
    admin_create_topic,
    confluent_consume,
    connected_consumer,
    high_watermarks,
    kcat_consume,
    kcat_produce,
    kcat_version,
)
from bench.paper_kafka_warmup import WARM_UP_SECONDS, WarmUpShape, warm_up
from bench.spread import Spread
from lumber.dev.kafka_server import KAFKA_SCRIPT_JVM_OPTIONS, KafkaCluster
from lumber.dev.peer_jars import peer_jars

log = logging.getLogger("bench.paper_kafka")

KAFKA = "Apache Kafka"
LUMBER = "Lumber"
RECORD_BYTES = 100
#: Kafka's server settings that differ from its defaults in ``lumber.dev.kafka_server`` (sized for tests),
#: set back to Kafka 4.x's defaults for the benchmark
KAFKA_DEFAULTS = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "num.recovery.threads.per.data.dir": "2",
    "log.cleaner.dedupe.buffer.size": str(128 * 1024 * 1024),
    "group.initial.rebalance.delay.ms": "3000",
}
KAFKA_HEAP_MB = 1024
#: the fewest records a consume phase reads (its topic read by one consumer after another until then): a
#: phase of two seconds or more, where one pass over 200,000 records takes a quarter of a second
CONSUME_RECORDS = 2_000_000
#: the fewest records each produce phase of the partitions' cases sends (the run's records, again and again)
PRODUCE_RECORDS = 1_000_000
#: Lumber's defaults where the tests' broker launcher (tests/support/broker_cluster.py) sets its own
LUMBER_DEFAULTS: dict[str, Any] = {"flush_ms": 1000, "num_io_threads": 4}


def benchmark_kafka(directory: Path, size: int = 1) -> KafkaCluster:
    """``size`` Kafka nodes (not started) as every Kafka comparison runs them: Kafka's defaults
    (:data:`KAFKA_DEFAULTS`) and the JVM as ``kafka-server-start.sh`` runs it (``-Xmx1G -Xms1G``, G1 with
    the script's flags)."""
    return KafkaCluster(
        directory,
        size=size,
        heap_mb=KAFKA_HEAP_MB,
        settings=KAFKA_DEFAULTS,
        jvm_options=(f"-Xms{KAFKA_HEAP_MB}m", *KAFKA_SCRIPT_JVM_OPTIONS),
    )


@dataclass(frozen=True)
class ProduceCase:
    name: str
    batch: int
    acks: str


PRODUCE_CASES = (
    ProduceCase("produce, batch 1, acks=1", 1, "1"),
    ProduceCase("produce, batch 1, acks=all", 1, "all"),
    ProduceCase("produce, batch 50, acks=1", 50, "1"),
    ProduceCase("produce, batch 50, acks=all", 50, "all"),
)
CONSUME = "consume"
KCAT_PRODUCE = "kcat produce, batch 50, acks=1"
KCAT_CONSUME = "kcat consume"


def client_cpu_seconds() -> float:
    """The clients' CPU seconds so far: this process's, every thread (the driving Python thread and the client
    libraries' own, librdkafka's), and its waited-for children's (kcat). The brokers are children too, but
    none ends inside a phase, so none is counted in one."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def partitions_case(phase: str, partitions: int) -> str:
    return f"{phase}, {partitions:,} partition{'s' if partitions != 1 else ''}"


@dataclass
class CaseResult:
    """One case on one broker, one value a round: records/s, broker CPU seconds per million records, the
    client's (:func:`client_cpu_seconds`), the broker's cores (CPU seconds over wall seconds) and the
    machine's idle share (0 to 1, every core)."""

    rate: Spread = field(default_factory=Spread)
    cpu_per_million: Spread = field(default_factory=Spread)
    client_cpu_per_million: Spread = field(default_factory=Spread)
    broker_cores: Spread = field(default_factory=Spread)
    idle: Spread = field(default_factory=Spread)


@dataclass
class KafkaComparison:
    """Every case's results by case, then by broker (``KAFKA``, ``LUMBER``), in the order run."""

    records: int
    rounds: int
    partitions: list[int]
    #: consumers that read each consume phase's topic in turn (``records`` each)
    consume_passes: int = 1
    #: how many times each produce phase of the partitions' cases sends the run's records (and so the
    #: records its consume phase reads per consumer)
    produce_passes: int = 1
    cases: dict[str, dict[str, CaseResult]] = field(default_factory=dict)
    #: client counts of the connections phases (:mod:`bench.paper_kafka_connections`), empty if not run
    connections: list[int] = field(default_factory=list)
    #: each broker's resident memory in MiB, before and after 1,000 partitions
    #: (:mod:`bench.paper_kafka_memory`)
    memory: dict[str, dict[str, float]] = field(default_factory=dict)
    #: whether the replication phases ran (:mod:`bench.paper_kafka_replication`)
    replication: bool = False
    #: the warm-up's passes, records/s each in order, by case warmed, then by broker
    #: (:mod:`bench.paper_kafka_warmup`)
    warm_up: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def result(self, case: str, broker: str) -> CaseResult:
        return self.cases.setdefault(case, {}).setdefault(broker, CaseResult())


@dataclass
class BrokerUnderTest:
    """One broker as the comparison drives it: where it listens, its process, how to make a topic."""

    name: str
    bootstrap: str
    #: the broker's process, or every broker process of a cluster (their CPU time is summed)
    pids: tuple[int, ...]
    create_topic: Callable[[str, int], None]

    @property
    def cpu(self) -> BrokersCpu:
        return BrokersCpu(self.pids)

    @property
    def slug(self) -> str:
        """``kafka`` or ``lumber``: a part of topic names."""
        return self.name.split()[-1].lower()


def lumber_create_topic(cluster: Any, broker_id: int) -> Callable[[str, int], None]:
    """A topic all of whose partitions lead on ``broker_id`` (the paper bench's cluster has more brokers)."""

    def create(topic: str, partitions: int) -> None:
        cluster.create_topic(topic, partitions, assignment={p: [broker_id] for p in range(partitions)})

    return create


def passes(fewest: int, per_pass: int) -> int:
    """The fewest passes of ``per_pass`` records that make at least ``fewest`` (one at the least)."""
    return max(1, -(-fewest // per_pass)) if per_pass else 1


def make_records(count: int) -> list[bytes]:
    """``count`` 100-byte log-line-like values (1000 distinct ones, cycled), no newline in them (kcat)."""
    distinct = [
        (b"%08d GET /api/v1/items?id=%d 200 u=%d " % (i, i * 7919, i % 97)).ljust(RECORD_BYTES, b"x")
        for i in range(1000)
    ]
    return [distinct[i % 1000] for i in range(count)]


# ------------------------------------------------------------------------------------------- the run


Report = Callable[[str], None]


#: a phase the comparison runs for one broker: before the rounds (``round_number`` 0) or in each round
ExtraPhase = Callable[["KafkaBench", BrokerUnderTest, int], None]


class KafkaBench:
    """The comparison's rounds over ``brokers`` (Kafka first); results in :attr:`comparison`.

    ``before_rounds`` phases run once per broker after its warm-up (the memory phase), ``each_round``
    phases after the standard cases of every round (the connections phases); ``standard_cases=False`` runs
    only those and the partitions (a test's quick run). The helpers a phase uses (:meth:`phase`,
    :meth:`consume`, :meth:`measure`, :meth:`failed`) record into :attr:`comparison`."""

    def __init__(
        self,
        brokers: list[BrokerUnderTest],
        records: int,
        rounds: int,
        partitions: list[int],
        scratch: Path,
        say: Report,
        *,
        comparison: KafkaComparison | None = None,
        before_rounds: Sequence[ExtraPhase] = (),
        each_round: Sequence[ExtraPhase] = (),
        standard_cases: bool = True,
        warm_up_s: float = WARM_UP_SECONDS,
        consume_records: int = CONSUME_RECORDS,
        produce_records: int = PRODUCE_RECORDS,
    ) -> None:
        self.brokers = brokers
        self.values = make_records(records)
        self.scratch = scratch
        self.say = say
        self.comparison = comparison or KafkaComparison(records, rounds, partitions)
        self.before_rounds = before_rounds
        self.each_round = each_round
        self.standard_cases = standard_cases
        self.warm_up_s = warm_up_s
        #: passes over a topic of ``records`` each consume phase of the rounds reads (at least one)
        self.consume_passes = passes(consume_records, records)
        self.comparison.consume_passes = self.consume_passes
        #: the records each produce phase of the partitions' cases sends, and its consume phase's passes
        self.produce_passes = passes(produce_records, records)
        self.comparison.produce_passes = self.produce_passes
        self.growth_values = self.values * self.produce_passes
        self.growth_consume_passes = passes(consume_records, len(self.growth_values))
        self._lines = scratch / "kcat-records.txt"

    def run(self) -> KafkaComparison:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._lines.write_bytes(b"\n".join(self.values) + b"\n")
        for broker in self.brokers:
            self.warm_up(broker)
        for broker in self.brokers:
            for extra in self.before_rounds:
                extra(self, broker, 0)
        for round_number in range(1, self.comparison.rounds + 1):
            for broker in self.round_order(round_number):
                self._round(broker, round_number)
                for extra in self.each_round:
                    extra(self, broker, round_number)
        return self.comparison

    def round_order(self, round_number: int) -> list[BrokerUnderTest]:
        """Kafka first in odd rounds, Lumber first in even ones."""
        return self.brokers if round_number % 2 else list(reversed(self.brokers))

    def warm_up_shapes(self) -> list[WarmUpShape]:
        """Every produce shape the rounds measure (see the module docstring), in the rounds' order."""
        shapes = []
        if self.standard_cases:
            shapes += [
                WarmUpShape(case.name, case.batch, case.acks, 1, 0, (case.batch, case.acks) == (50, "1"))
                for case in PRODUCE_CASES
            ]
        shapes += [
            WarmUpShape(partitions_case("produce", count), 50, "1", count, None, True)
            for count in self.comparison.partitions
        ]
        return shapes

    def warm_up(self, broker: BrokerUnderTest) -> None:
        """Every shape of :meth:`warm_up_shapes` for ``warm_up_s`` seconds, unreported but its passes'
        rates (:mod:`bench.paper_kafka_warmup`)."""
        try:
            passes = warm_up(
                broker.bootstrap,
                broker.create_topic,
                broker.slug,
                self.warm_up_shapes(),
                self.values,
                self.warm_up_s,
                self.say,
                broker.name,
            )
        except Exception as exc:
            log.debug("warm-up of %s failed", broker.name, exc_info=True)
            self.comparison.failures.append(f"{broker.name} warm-up: {type(exc).__name__}: {exc}")
            return
        for case, rates in passes.items():
            self.comparison.warm_up.setdefault(case, {})[broker.name] = rates

    def _round(self, broker: BrokerUnderTest, round_number: int) -> None:
        slug = broker.slug
        if self.standard_cases:
            self._standard_cases(broker, round_number)
        growth = len(self.growth_values)
        for partitions in self.comparison.partitions:
            topic = f"k{round_number}-{slug}-p{partitions}"
            if self.phase(
                partitions_case("produce", partitions),
                broker,
                round_number,
                topic,
                partitions,
                growth,
                partial(self.make_producer, broker, topic, 50, "1", None, self.growth_values),
            ):
                self.consume(
                    partitions_case("consume", partitions),
                    broker,
                    round_number,
                    topic,
                    partitions,
                    growth,
                    self.growth_consume_passes,
                )

    def _standard_cases(self, broker: BrokerUnderTest, round_number: int) -> None:
        n = len(self.values)
        slug = broker.slug
        for case in PRODUCE_CASES:
            topic = f"k{round_number}-{slug}-b{case.batch}-acks{case.acks}"
            self.phase(
                case.name,
                broker,
                round_number,
                topic,
                1,
                n,
                partial(self.make_producer, broker, topic, case.batch, case.acks, 0),
            )
        produced = f"k{round_number}-{slug}-b50-acks1"
        self.consume(CONSUME, broker, round_number, produced, 1, n, self.consume_passes)
        kcat_topic = f"k{round_number}-{slug}-kcat"
        if self.phase(
            KCAT_PRODUCE,
            broker,
            round_number,
            kcat_topic,
            1,
            n,
            lambda: partial(kcat_produce, broker.bootstrap, kcat_topic, self._lines, "1", 50),
        ):
            self.measure(
                KCAT_CONSUME, broker, round_number, n, lambda: kcat_consume(broker.bootstrap, kcat_topic, n)
            )

    def make_producer(
        self,
        broker: BrokerUnderTest,
        topic: str,
        batch: int,
        acks: str,
        partition: int | None,
        values: list[bytes] | None = None,
    ) -> Callable[[], None]:
        """A connected producer of ``values`` (every record of the run) to ``topic``; what it returns sends
        them."""
        sent = self.values if values is None else values
        return partial(ConfluentProducer(broker.bootstrap, topic, batch, acks).send, sent, partition)

    def phase(
        self,
        case: str,
        broker: BrokerUnderTest,
        round_number: int,
        topic: str,
        partitions: int,
        count: int,
        prepare: Callable[[], Callable[[], None]],
    ) -> bool:
        """Create ``topic``, ``prepare`` its producer (connected), run what that returns measured, then check
        that the high watermarks add up to ``count``."""
        try:
            broker.create_topic(topic, partitions)
            produce = prepare()
        except Exception as exc:
            return self.failed(case, broker, round_number, exc)
        if not self.measure(case, broker, round_number, count, produce):
            return False
        try:
            held = high_watermarks(broker.bootstrap, topic, partitions)
        except Exception as exc:
            return self.failed(case, broker, round_number, exc)
        if held != count:
            lost = RuntimeError(f"{topic}: the high watermarks add up to {held}, {count} were acknowledged")
            return self.failed(case, broker, round_number, lost)
        return True

    def consume(
        self,
        case: str,
        broker: BrokerUnderTest,
        round_number: int,
        topic: str,
        partitions: int,
        count: int,
        passes: int = 1,
    ) -> bool:
        """Read ``topic``'s ``count`` records with ``passes`` consumers connected before the clock starts,
        one after the other, timed as one phase of ``count * passes`` records."""
        consumers: list[Any] = []
        try:
            try:
                for _ in range(passes):
                    consumers.append(connected_consumer(broker.bootstrap, topic, count))  # noqa: PERF401 - closed below
            except Exception as exc:
                return self.failed(case, broker, round_number, exc)

            def read() -> None:
                for consumer in consumers:
                    confluent_consume(consumer, topic, partitions, count)

            return self.measure(case, broker, round_number, count * passes, read)
        finally:
            for consumer in consumers:
                consumer.close()

    def measure(
        self, case: str, broker: BrokerUnderTest, round_number: int, count: int, body: Callable[[], None]
    ) -> bool:
        """Run ``body``, timed, with the broker's and the clients' CPU and the machine's idle ticks read
        before and after; record it under ``case``."""
        try:
            with MachineIdle().phase() as idle, broker.cpu.phase() as spent:
                client = client_cpu_seconds()
                started = time.perf_counter()
                body()
                seconds = time.perf_counter() - started
                client = client_cpu_seconds() - client
        except Exception as exc:
            return self.failed(case, broker, round_number, exc)
        result = self.comparison.result(case, broker.name)
        result.rate.add(count / seconds)
        result.cpu_per_million.add(per_million(spent.seconds, count))
        result.client_cpu_per_million.add(per_million(client, count))
        result.broker_cores.add(spent.seconds / seconds)
        result.idle.add(idle.share)
        self.say(
            f"round {round_number} {broker.name:<13} {case:<30} {count / seconds:>10,.0f} rec/s  "
            f"broker CPU {per_million(spent.seconds, count):6.2f}, client {per_million(client, count):5.2f} "
            f"s per million ({count:,} records in {seconds:.2f} s, {spent.seconds / seconds:.2f} cores); "
            f"machine idle {idle.share:.0%}"
        )
        return True

    def failed(self, case: str, broker: BrokerUnderTest, round_number: int, exc: Exception) -> bool:
        log.debug("%s %s failed", broker.name, case, exc_info=exc)
        line = f"round {round_number} {broker.name} {case}: {type(exc).__name__}: {exc}"
        self.comparison.failures.append(line)
        self.say(f"[red]{line}")
        return False


# ------------------------------------------------------------------------------------------- the brokers


def run_kafka_comparison(
    cluster: Any,
    scratch: Path,
    records: int,
    rounds: int,
    partitions: list[int],
    say: Report,
    *,
    before_rounds: Sequence[ExtraPhase] = (),
    each_round: Sequence[ExtraPhase] = (),
    standard_cases: bool = True,
    warm_up_s: float = WARM_UP_SECONDS,
    consume_records: int = CONSUME_RECORDS,
    produce_records: int = PRODUCE_RECORDS,
) -> KafkaComparison:
    """Apache Kafka against a Lumber broker (:mod:`bench.paper_kafka`), both stopped after; the extra
    phases, ``standard_cases``, ``warm_up_s``, ``consume_records`` and ``produce_records`` as
    :class:`KafkaBench` takes them."""
    import confluent_kafka  # noqa: PLC0415

    kafka = benchmark_kafka(scratch / "kafka")
    say("starting Apache Kafka (one KRaft combined node) and a Lumber broker with its defaults")
    kafka.start()
    lumber = None
    try:
        lumber = cluster.add_broker(LUMBER_DEFAULTS)
        node = kafka.nodes[0]
        if node.pid is None or lumber.popen is None:
            raise RuntimeError("a broker of the Kafka comparison is not running")
        brokers = [
            BrokerUnderTest(
                KAFKA, kafka.bootstrap, (node.pid,), admin_create_topic(kafka.bootstrap, node.data_dir)
            ),
            BrokerUnderTest(
                LUMBER, lumber.address, (lumber.popen.pid,), lumber_create_topic(cluster, lumber.broker_id)
            ),
        ]
        comparison = KafkaBench(
            brokers,
            records,
            rounds,
            partitions,
            scratch / "kafka-bench",
            say,
            before_rounds=before_rounds,
            each_round=each_round,
            standard_cases=standard_cases,
            warm_up_s=warm_up_s,
            consume_records=consume_records,
            produce_records=produce_records,
        ).run()
        comparison.notes.append(
            f"Apache Kafka {kafka_version()} (one KRaft combined node, JVM {' '.join(node.jvm_options)} "
            f"-Xmx{node.heap_mb}m; settings beyond Kafka's defaults: listeners on 127.0.0.1, internal "
            "topics' replication factor 1); Lumber with its defaults; confluent-kafka "
            f"{confluent_kafka.version()} / librdkafka {confluent_kafka.libversion()[0]}; {kcat_version()}"
        )
    finally:
        kafka.stop()
        if lumber is not None:
            lumber.stop()
    return comparison


def kafka_version() -> str:
    for jar in peer_jars("kafka"):
        if jar.name.startswith("kafka_2.13-"):
            return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
    return "?"
