"""One producer to 1 and to 4 partitions, on Apache Kafka and on Lumber: where the 4-partition throughput goes
(issue 39's goal "4 partitions at least 1.0x of 1 partition for one producer").

Run from the repository root (take the machine's benchmark lock; Kafka's jars from ``make jars`` or
``LUMBER_JARS_DIR``)::

    flock /work/bench.lock .venv/bin/python bench/partition_spread.py [--records 300000] [--rounds 3]
    .venv/bin/python bench/partition_spread.py --systems lumber --rounds 1     # Lumber's broker only

The brokers are the Kafka comparison's (``bench/paper_kafka.py``): one Kafka node (``benchmark_kafka``) and
one Lumber broker with its defaults (``LUMBER_DEFAULTS``) on a ZooKeeper of its own, both up for the whole
run, driven one at a time, alternated by round (Kafka first in odd rounds). Each broker first takes an
unreported produce. The cases, each to a new topic, ``--records`` 100-byte records
(``bench.paper_kafka.make_records``), checked by the topic's high watermarks:

* **librdkafka** (confluent-kafka; ``bench.paper_kafka_clients.producer_config``: batch 50, ``linger.ms``
  5, ``acks=1``, idempotence off) with ``statistics.interval.ms`` 100 and a ``stats_cb``
  (:mod:`bench.rdkafka_stats`):

  * *1 partition, partitioner* and *4 partitions, partitioner*: no partition given, librdkafka's keyless
    partitioner (sticky: one partition for ``sticky.partitioning.linger.ms``, twice ``linger.ms``) picks
    it, as the comparison's partitions rows run;
  * *1 partition, partition 0*: the comparison's batch-50 produce rows (the record's partition given);
  * *4 partitions, 50 each in turn*: record ``i`` to partition ``(i // 50) % 4`` given with the record,
    no partitioner.

* **Lumber's producer** (``broker.client.producer``, ``bench.clients.producer_config``: ``acks=1``,
  ``linger_ms`` 5, 128 KiB batches; ``send_many`` of 50 records at a time, as ``bench/paper.py`` drives
  it): *1 partition* and *4 partitions, 50 each in turn*.

Per case and round: records/s (the clock from the first record handed over to the last acknowledged), the
broker's CPU (utime + stime, ``/proc/<pid>/stat``), this process's CPU (the client: the Python caller and
the client library's threads) and its calling thread's alone (``time.thread_time``), the machine's idle
share (``/proc/stat``'s idle + iowait over both cores) and, for librdkafka, its statistics over the phase:
Produce requests, records and message sets per request, bytes per request, the round trip, a record's
time in librdkafka's queue, requests in flight. Printed as a table of medians (``--rounds``) with the
4 / 1 partition ratios of each system.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.broker_cpu import BrokersCpu, stat_cpu_seconds
from bench.clients import producer_config as lumber_producer_config
from bench.machine_idle import MachineIdle
from bench.paper_kafka import (
    LUMBER_DEFAULTS,
    benchmark_kafka,
    lumber_create_topic,
    make_records,
)
from bench.paper_kafka_clients import PHASE_TIMEOUT_S, admin_create_topic, high_watermarks, producer_config
from bench.rdkafka_stats import RdkafkaStats
from bench.spread import Spread
from broker.client.producer.producer import Producer as LumberProducer
from lumber.dev.broker_cluster import bench_cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer

BATCH = 50
STATS_INTERVAL_MS = 100
#: case name -> (client, partitions of the topic, how a record's partition is chosen)
CASES: dict[str, tuple[str, int, str]] = {
    "librdkafka, 1 partition, partitioner": ("rdkafka", 1, "partitioner"),
    "librdkafka, 4 partitions, partitioner": ("rdkafka", 4, "partitioner"),
    "librdkafka, 1 partition, partition 0": ("rdkafka", 1, "in turn"),
    "librdkafka, 4 partitions, 50 each in turn": ("rdkafka", 4, "in turn"),
    "Lumber's producer, 1 partition": ("lumber", 1, "in turn"),
    "Lumber's producer, 4 partitions, 50 each in turn": ("lumber", 4, "in turn"),
}
#: The machine's idle ticks (``/proc/stat``), read around every phase.
MACHINE = MachineIdle()
STATS_COLUMNS = ("records_per_request", "sets_per_request", "rtt_ms", "int_latency_ms", "in_flight")


@dataclass
class CaseFigures:
    rate: Spread = field(default_factory=Spread)
    broker_cpu: Spread = field(default_factory=Spread)  # us per 1,000 records
    client_cpu: Spread = field(default_factory=Spread)  # us per 1,000 records, this process
    caller_cpu: Spread = field(default_factory=Spread)  # us per 1,000 records, the calling thread
    broker_share: Spread = field(default_factory=Spread)  # broker CPU / wall (cores)
    client_share: Spread = field(default_factory=Spread)
    idle: Spread = field(default_factory=Spread)  # the machine's idle share
    broker_thread: Spread = field(default_factory=Spread)  # the broker's busiest thread, cores
    client_thread: Spread = field(default_factory=Spread)  # this process's busiest thread, cores
    stats: dict[str, Spread] = field(default_factory=dict)


def thread_seconds(pid: int | str) -> dict[str, float]:
    """CPU seconds of each thread of process ``pid`` (``self`` for this one), by ``<tid> <name>``."""
    found: dict[str, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            line = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended
        name = line[line.index("(") + 1 : line.rindex(")")]
        found[f"{task.name} {name}"] = stat_cpu_seconds(line, ticks)
    return found


def busiest(before: dict[str, float], after: dict[str, float], wall: float) -> tuple[str, float]:
    """The thread that spent the most CPU between two readings: its name and its share of ``wall``."""
    spent = {key: after[key] - before.get(key, 0.0) for key in after}
    key = max(spent, key=lambda k: spent[k])
    return key.split(" ", 1)[1], spent[key] / wall if wall else 0.0


class Meter:
    """The clock and the CPU readings of one phase: :meth:`start` just before the first record is handed
    over, :meth:`stop` once the last is acknowledged."""

    def __init__(self, cpu: BrokersCpu) -> None:
        self.cpu = cpu
        self._start: tuple[float, float, float, float, int, int] | None = None
        self.wall = self.broker = self.client = self.caller = 0.0
        self.idle_share = 0.0
        #: the broker's and this process's busiest thread over the phase: name, share of the wall time
        self.broker_thread = self.client_thread = ("", 0.0)
        self._threads: tuple[dict[str, float], dict[str, float]] = ({}, {})

    def _thread_readings(self) -> tuple[dict[str, float], dict[str, float]]:
        return thread_seconds(self.cpu.pids[0]), thread_seconds("self")

    @staticmethod
    def _read(cpu: BrokersCpu) -> tuple[float, float, float, float, int, int]:
        own = os.times()
        idle, ticks = MACHINE.ticks()
        return time.perf_counter(), cpu.seconds(), own.user + own.system, time.thread_time(), idle, ticks

    def start(self) -> None:
        self._threads = self._thread_readings()
        self._start = self._read(self.cpu)

    def stop(self) -> None:
        end = self._read(self.cpu)
        threads = self._thread_readings()
        if self._start is None:
            raise RuntimeError("a phase stopped that never started")
        wall, broker, client, caller, idle, ticks = (b - a for a, b in zip(self._start, end, strict=True))
        self.wall, self.broker, self.client, self.caller = wall, broker, client, caller
        self.idle_share = idle / ticks if ticks else 1.0
        self.broker_thread = busiest(self._threads[0], threads[0], wall)
        self.client_thread = busiest(self._threads[1], threads[1], wall)


def rdkafka_send(
    bootstrap: str, topic: str, values: list[bytes], mode: str
) -> Callable[[Meter | None], RdkafkaStats]:
    """A connected librdkafka producer with statistics; what it returns sends ``values`` (metered) and
    returns the statistics of the phase."""
    stats = RdkafkaStats(topic)
    producer = Producer(
        {
            **producer_config(bootstrap, BATCH, "1"),
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": stats.callback,
        }
    )
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    deadline = time.monotonic() + 10
    while not stats.emissions and time.monotonic() < deadline:
        producer.poll(0.05)

    def send(meter: Meter | None) -> RdkafkaStats:
        produce, poll = producer.produce, producer.poll
        stats.mark()
        if meter is not None:
            meter.start()
        if mode == "partitioner":
            for i, value in enumerate(values):
                produce(topic, value)
                if not i % 5000:
                    poll(0)
        else:
            for i, value in enumerate(values):
                produce(topic, value, partition=(i // BATCH) % partitions)
                if not i % 5000:
                    poll(0)
        left = producer.flush(PHASE_TIMEOUT_S)
        if meter is not None:
            meter.stop()
        if left:
            raise RuntimeError(f"{topic} at {bootstrap}: {left} records unacknowledged")
        # two emissions more: the first may have been made before the last response was counted and
        # served only now; the second was made after ``flush`` returned, its windows close the phase
        emitted = stats.emissions
        wait_until = time.monotonic() + 50 * STATS_INTERVAL_MS / 1000  # a loaded machine delays its timer
        while stats.emissions < emitted + 2:
            if time.monotonic() > wait_until:
                raise TimeoutError(f"{topic}: librdkafka emitted no statistics after the phase")
            producer.poll(0.02)
        return stats

    return send


def lumber_send(
    bootstrap: str, topic: str, values: list[bytes], partitions: int
) -> Callable[[Meter | None], None]:
    """Lumber's producer, connected; what it returns sends ``values`` 50 at a time, partitions in turn."""
    producer = LumberProducer(lumber_producer_config([bootstrap]))
    producer.partitions_for(topic)
    chunks = [values[i : i + BATCH] for i in range(0, len(values), BATCH)]

    def send(meter: Meter | None) -> None:
        try:
            send_many = producer.send_many
            if meter is not None:
                meter.start()
            for i, chunk in enumerate(chunks):
                send_many(topic, chunk, partition=i % partitions)
            producer.flush(PHASE_TIMEOUT_S)
            if meter is not None:
                meter.stop()
        finally:
            producer.close()

    return send


def run_case(
    name: str,
    bootstrap: str,
    cpu: BrokersCpu,
    create: Callable[[str, int], None],
    topic: str,
    values: list[bytes],
) -> tuple[Meter, RdkafkaStats | None]:
    """One case to a new ``topic``, checked by its high watermarks: its meter and librdkafka's statistics."""
    client, partitions, mode = CASES[name]
    create(topic, partitions)
    meter = Meter(cpu)
    stats = None
    if client == "rdkafka":
        stats = rdkafka_send(bootstrap, topic, values, mode)(meter)
    else:
        lumber_send(bootstrap, topic, values, partitions)(meter)
    held = high_watermarks(bootstrap, topic, partitions)
    if held != len(values):
        raise RuntimeError(f"{topic}: the high watermarks add up to {held}, {len(values)} were sent")
    return meter, stats


@dataclass(frozen=True)
class System:
    """A broker under test: where it listens, its process's CPU, how to make a topic on it."""

    bootstrap: str
    cpu: BrokersCpu
    create: Callable[[str, int], None]


def record(f: CaseFigures, meter: Meter, stats: RdkafkaStats | None, records: int) -> str:
    """Add one case's readings to ``f``; the line that reports them."""
    f.rate.add(records / meter.wall)
    f.broker_cpu.add(meter.broker / records * 1e9)
    f.client_cpu.add(meter.client / records * 1e9)
    f.caller_cpu.add(meter.caller / records * 1e9)
    f.broker_share.add(meter.broker / meter.wall)
    f.client_share.add(meter.client / meter.wall)
    f.idle.add(meter.idle_share)
    line = (
        f"{records / meter.wall:>9,.0f} rec/s  broker {meter.broker / meter.wall:.2f} cores  client "
        f"{meter.client / meter.wall:.2f} cores  idle {meter.idle_share:.2f}  busiest threads: broker "
        f"{meter.broker_thread[0]} {meter.broker_thread[1]:.2f}, client {meter.client_thread[0]} "
        f"{meter.client_thread[1]:.2f}"
    )
    f.broker_thread.add(meter.broker_thread[1])
    f.client_thread.add(meter.client_thread[1])
    if stats is not None:
        summary = stats.summary()
        for key, value in summary.items():
            f.stats.setdefault(key, Spread()).add(value)
        line += "  " + " ".join(f"{k}={summary[k]:.2f}" for k in STATS_COLUMNS)
        line += f" by partition {stats.records_by_partition()}"
    return line


def run_rounds(
    systems: dict[str, System], cases: list[str], values: list[bytes], rounds: int
) -> tuple[dict[str, dict[str, CaseFigures]], list[tuple[float, float, float]]]:
    """Warm each system up, then ``rounds`` alternated rounds of ``cases``: the figures and load averages."""
    figures: dict[str, dict[str, CaseFigures]] = {}
    loads = [os.getloadavg()]
    for name, system in systems.items():
        topic = f"warm-{name.lower()}"
        system.create(topic, 4)
        warm = values[: max(50_000, len(values) // 3)]
        rdkafka_send(system.bootstrap, topic, warm, "partitioner")(None)
        lumber_send(system.bootstrap, topic, warm, 4)(None)
    for round_number in range(1, rounds + 1):
        for name in list(systems) if round_number % 2 else list(reversed(systems)):
            system = systems[name]
            for number, case in enumerate(cases):
                topic = f"spread-{name.lower()}-r{round_number}-c{number}"
                meter, stats = run_case(case, system.bootstrap, system.cpu, system.create, topic, values)
                f = figures.setdefault(case, {}).setdefault(name, CaseFigures())
                line = record(f, meter, stats, len(values))
                print(f"round {round_number} {name:<6} {case:<50} {line}", flush=True)
        loads.append(os.getloadavg())
    return figures, loads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default="kafka,lumber", help="kafka, lumber or both (comma-separated)")
    parser.add_argument("--cases", default=",".join(CASES), help="the case names to run (comma-separated)")
    args = parser.parse_args()
    names = args.systems.split(",")
    cases = [c for c in CASES if c in args.cases]
    values = make_records(args.records)
    with tempfile.TemporaryDirectory(prefix="lumber-partition-spread-") as scratch:
        kafka = benchmark_kafka(Path(scratch) / "kafka") if "kafka" in names else None
        with bench_cluster(Path(scratch) / "lumber", 0) as cluster:
            systems: dict[str, System] = {}
            try:
                if kafka is not None:
                    kafka.start()
                    pid = kafka.nodes[0].pid
                    assert pid is not None
                    systems["Kafka"] = System(
                        kafka.bootstrap,
                        BrokersCpu((pid,)),
                        admin_create_topic(kafka.bootstrap, kafka.nodes[0].data_dir),
                    )
                if "lumber" in names:
                    lumber = cluster.add_broker(LUMBER_DEFAULTS)
                    assert lumber.popen is not None
                    systems["Lumber"] = System(
                        lumber.address,
                        BrokersCpu((lumber.popen.pid,)),
                        lumber_create_topic(cluster, lumber.broker_id),
                    )
                figures, loads = run_rounds(systems, cases, values, args.rounds)
            finally:
                if kafka is not None:
                    kafka.stop()
    report(figures, args.records, args.rounds, loads)
    return 0


def report(
    figures: dict[str, dict[str, CaseFigures]],
    records: int,
    rounds: int,
    loads: list[tuple[float, float, float]],
) -> None:
    ones = [load[0] for load in loads]
    print(
        f"\nload average (1 min) {min(ones):.2f}-{max(ones):.2f}; {records:,} records a case, medians of "
        f"{rounds} rounds; CPU in us per 1,000 records; shares in cores of the 2"
    )
    print(
        "| case | system | rec/s | broker CPU | client CPU | caller thread | broker cores | its busiest "
        "thread | client cores | its busiest thread | machine idle | records / request | sets / request | "
        "rtt ms | queue ms | in flight |"
    )
    print("| --- | --- |" + " ---: |" * 14)
    for name, by_system in figures.items():
        for system, f in by_system.items():
            cells = [
                f.rate.text(),
                f"{f.broker_cpu.median:.0f}",
                f"{f.client_cpu.median:.0f}",
                f"{f.caller_cpu.median:.0f}",
                f"{f.broker_share.median:.2f}",
                f"{f.broker_thread.median:.2f}",
                f"{f.client_share.median:.2f}",
                f"{f.client_thread.median:.2f}",
                f"{f.idle.median:.2f}",
            ]
            cells += [f"{f.stats[k].median:.2f}" if k in f.stats else "" for k in STATS_COLUMNS]
            print(f"| {name} | {system} | " + " | ".join(cells) + " |")
    pairs = [
        ("librdkafka, 4 partitions, partitioner", "librdkafka, 1 partition, partitioner"),
        ("librdkafka, 4 partitions, 50 each in turn", "librdkafka, 1 partition, partition 0"),
        ("Lumber's producer, 4 partitions, 50 each in turn", "Lumber's producer, 1 partition"),
    ]
    print("\n| 4 / 1 partitions (median rates) | " + " | ".join(next(iter(figures.values()), {})) + " |")
    for four, one in pairs:
        if four in figures and one in figures:
            ratios = [
                f"{figures[four][s].rate.median / figures[one][s].rate.median:.2f}x"
                for s in figures[four]
                if s in figures[one]
            ]
            print(f"| {four} / {one} | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    sys.exit(main())
