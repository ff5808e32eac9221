"""What replication costs and how fast it fails over (issue 19), in one run on three broker processes.

Run from the repository root::

    .venv/bin/python bench/replication.py [--messages 300000] [--rounds 3] [--failovers 5]
                                          [--scale-partitions 1000] [--skip-scale]
                                          [--skip-failover] [--flush-ms 1000]

It starts a real ZooKeeper and three real Lumber broker processes on 127.0.0.1
(``tests/support/broker_cluster.py``: 4 s ZooKeeper sessions) and measures:

1. **produce**, Lumber's producer, ``send_many()`` of 50 values of 200 bytes (the paper's batch),
   ``linger_ms`` 5, ``batch_size`` 128 KiB, idempotence off, to a 3-partition topic: **RF 1 with acks=1**
   (the baseline) against **RF 3 with acks=all** (every record on three brokers before it is answered),
   and RF 3 with acks=1 between them (the same copying, answered by the leader alone), with the CPU
   seconds the brokers and the producer spent per million messages.
   Cases alternate within a round; the best of ``--rounds`` counts. Anchor: Kafka 0.8.1 on three machines
   went from 821k to 421k records/s (0.51x); goal >= 0.5x. Here the three brokers and the producer share
   two cores, so the followers' fetches compete with the leader for CPU, which three machines do not.
   The brokers flush as Lumber's defaults say (``[log] flush_ms`` 1000, ``flush_messages`` 10,000, the
   paper's S and M; the anchor's Kafka ran with its own defaults, which never fsync on a timer);
   ``--flush-ms 20`` runs the test fixtures' 20 ms instead, whose fsyncs cost a broker per partition
   replica and per second whatever the traffic, so they weigh three times on RF 3.
2. **consume** each produced topic from offset 0 with Lumber's consumer (200 KiB prefetch,
   ``poll_values``): RF 3 against RF 1 (goal: within 10 %).
3. **failover**: a confluent-kafka producer (idempotent, acks=all) writes a 1-partition RF 3 topic
   continuously; the partition's leader is killed (kill -9) ``--failovers`` times, each time restarted and
   waited for back in the ISR. Measured: from the kill to the first record acknowledged after it (goal:
   within the session timeout + 1 s). Then a **controlled shutdown** (SIGTERM) of the leader: the time the
   broker reports for moving leadership (goal < 1 s) and the producer's failed deliveries (goal 0).
4. **scale** (unless ``--skip-scale``): a topic of ``--scale-partitions`` partitions with RF 3: time to
   create it until every partition has its full ISR; each broker's RSS and open files before and after
   (per partition replica); a restart of every broker (SIGTERM, start; until all are registered and every
   ISR is full again); and a kill -9 of the controller to the moment every partition it led has a new
   leader.

Everything is printed; BENCHMARKS.md ("Replication") records the runs with their date.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import values
from bench.paper_common import cpu_seconds, own_cpu_seconds
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from tests.support.broker_cluster import BROKER_SESSION_TIMEOUT_MS, BrokerCluster, bench_cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer as ConfluentProducer

BATCH = 50
PARTITIONS = 3
PREFETCH_BYTES = 200 * 1024
REPLICATION = {
    "replica_lag_time_max_ms": 5000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
}


def wait(predicate: Any, timeout_s: float, what: str) -> float:
    """Poll ``predicate`` (every 10 ms) for up to ``timeout_s``; returns the seconds it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def produce(servers: list[str], topic: str, payload: list[bytes], acks: Literal["1", "all"]) -> float:
    config = ProducerConfig(
        bootstrap_servers=servers,
        acks=acks,
        enable_idempotence=False,
        linger_ms=5,
        batch_size=128 * 1024,
        buffer_memory=64 * 1024 * 1024,
        host_name="bench-host",
    )
    with Producer(config) as producer:
        producer.partitions_for(topic)
        started = time.perf_counter()
        send_many = producer.send_many
        for n, i in enumerate(range(0, len(payload), BATCH)):
            send_many(topic, payload[i : i + BATCH], partition=n % PARTITIONS)
        producer.flush()
        return time.perf_counter() - started


def consume(servers: list[str], topic: str, count: int) -> float:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    config = ConsumerConfig(
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=PREFETCH_BYTES,
        max_prefetch_bytes=PREFETCH_BYTES,
    )
    with Consumer(config, partitions=tps) as consumer:
        for tp in tps:
            consumer.seek(tp, 0)
        wait(
            lambda: sum(consumer.end_offsets(tps).values()) >= count,
            60,
            f"{count} messages exposed in {topic}",
        )
        seen = 0
        started = time.perf_counter()
        deadline = time.monotonic() + 300
        while seen < count:
            for chunk in consumer.poll_values(timeout_ms=1000):
                seen += len(chunk.values)
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {seen} of {count} messages of {topic}")
        seconds = time.perf_counter() - started
    if seen != count:
        raise RuntimeError(f"consumed {seen} messages of {topic}, expected {count}")
    return seconds


def throughput(cluster: BrokerCluster, messages: int, rounds: int) -> None:
    payload = values(messages)
    servers = [b.address for b in cluster.brokers]
    cases: list[tuple[str, int, Literal["1", "all"]]] = [
        ("RF 1, acks=1  ", 1, "1"),
        ("RF 3, acks=1  ", 3, "1"),
        ("RF 3, acks=all", 3, "all"),
    ]
    produced: dict[str, list[float]] = {name: [] for name, _rf, _acks in cases}
    consumed: dict[str, list[float]] = {name: [] for name, _rf, _acks in cases}
    #: CPU seconds of the three broker processes and of this (producing) process, per million messages
    cpu: dict[str, list[tuple[float, float]]] = {name: [] for name, _rf, _acks in cases}
    pids = [b.popen.pid for b in cluster.brokers if b.popen is not None]
    for round_number in range(rounds):
        for number, (name, rf, acks) in enumerate(cases):
            topic = f"repl-r{round_number}-c{number}"
            cluster.create_topic(topic, PARTITIONS, replication_factor=rf)
            for p in range(PARTITIONS):
                cluster.wait_for_isr(topic, p, cluster.admin.describe_topic(topic)[p])
            brokers0, own0 = sum(cpu_seconds(pid) for pid in pids), own_cpu_seconds()
            rate = messages / produce(servers, topic, payload, acks)
            brokers1, own1 = sum(cpu_seconds(pid) for pid in pids), own_cpu_seconds()
            per_million = 1_000_000 / messages
            cpu[name].append(((brokers1 - brokers0) * per_million, (own1 - own0) * per_million))
            produced[name].append(rate)
            read = messages / consume(servers, topic, messages)
            consumed[name].append(read)
            print(
                f"round {round_number + 1}: {name}: produce {rate:9,.0f} msg/s, consume {read:10,.0f} msg/s",
                flush=True,
            )
    base, replicated = cases[0][0], cases[2][0]
    print(
        f"\nproduce, best of {rounds}, {messages:,} x 200 bytes, batches of {BATCH}, {PARTITIONS} partitions:"
    )
    print(f"  {base}: {max(produced[base]):9,.0f} msg/s")
    print(f"  {cases[1][0]}: {max(produced[cases[1][0]]):9,.0f} msg/s (replicated, answered by the leader)")
    print(f"  {replicated}: {max(produced[replicated]):9,.0f} msg/s")
    for name, _rf, _acks in cases:
        brokers_cpu = statistics.median(b for b, _o in cpu[name])
        own_cpu = statistics.median(o for _b, o in cpu[name])
        print(
            f"  {name}: CPU s per million messages (median): brokers {brokers_cpu:.1f}, "
            f"producer {own_cpu:.1f}"
        )
    print(
        f"  ratio RF 3 acks=all / RF 1 acks=1: "
        f"{max(produced[replicated]) / max(produced[base]):.2f} (goal >= 0.5)"
    )
    print(f"consume, best of {rounds}:")
    print(f"  {base}: {max(consumed[base]):10,.0f} msg/s")
    print(f"  {replicated}: {max(consumed[replicated]):10,.0f} msg/s")
    print(
        f"  ratio RF 3 / RF 1: {max(consumed[replicated]) / max(consumed[base]):.2f} (goal >= 0.9)",
        flush=True,
    )


class AckClock:
    """A confluent-kafka producer writing continuously, with the time of every acknowledgement."""

    def __init__(self, cluster: BrokerCluster, topic: str) -> None:
        #: (sent, acknowledged) times of every acknowledged record
        self.acks: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = ConfluentProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 1,
                "message.timeout.ms": 60_000,
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, sent_at: float) -> Any:
        def delivered(error: Any, _message: Any) -> None:
            if error is None:
                self.acks.append((sent_at, time.monotonic()))
            else:
                self.errors.append(str(error))

        return delivered

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(BufferError):
                self._producer.produce(
                    self._topic, b"x" * 200, partition=0, on_delivery=self._delivered(time.monotonic())
                )
            self._producer.poll(0.002)

    def start(self) -> AckClock:
        self._thread.start()
        return self

    def first_ack_after(self, moment: float, timeout_s: float) -> float:
        """Seconds from ``moment`` to the first acknowledgement of a record sent after it (an answer to a
        record sent before may still arrive from the old leader)."""
        wait(
            lambda: any(sent > moment for sent, _t in self.acks[-2000:]), timeout_s, "a write after the fault"
        )
        return min(t for sent, t in self.acks[-2000:] if sent > moment) - moment

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return int(self._producer.flush(60))


def failover(cluster: BrokerCluster, rounds: int) -> None:
    topic = "failover"
    cluster.create_topic(topic, 1, replication_factor=3)
    cluster.wait_for_isr(topic, 0, [0, 1, 2])
    clock = AckClock(cluster, topic).start()
    wait(lambda: len(clock.acks) > 200, 30, "the producer to be acknowledged")
    goal = BROKER_SESSION_TIMEOUT_MS / 1000 + 1
    seconds = []
    for n in range(rounds):
        time.sleep(1.0)
        leader = cluster.leader_of(topic, 0)
        killed = time.monotonic()
        leader.kill()
        took = clock.first_ack_after(killed, 60)
        seconds.append(took)
        elected = cluster.state_of(topic, 0)
        print(
            f"failover {n + 1}: kill -9 of leader {leader.broker_id}, broker {elected.leader} leads epoch "
            f"{elected.leader_epoch}: first acks=all write acknowledged {took:.2f} s after the kill",
            flush=True,
        )
        leader.start()
        cluster.wait_for_isr(topic, 0, [0, 1, 2], timeout_s=60)
    print(
        f"kill -9 of the leader to the first acknowledged write: median {statistics.median(seconds):.2f} s, "
        f"max {max(seconds):.2f} s (goal: within the {BROKER_SESSION_TIMEOUT_MS / 1000:.0f} s session "
        f"timeout + 1 s = {goal:.0f} s)",
        flush=True,
    )
    errors_before = len(clock.errors)
    time.sleep(1.0)
    leader = cluster.leader_of(topic, 0)
    stopped = time.monotonic()
    leader.stop()
    took = clock.first_ack_after(stopped, 30)
    text = leader.log()
    marker = "leadership moved to other replicas in "
    moved = text.split(marker)[1].split(" ms")[0] if marker in text else "(not reported)"
    time.sleep(2.0)
    unsent = clock.stop()
    print(
        f"controlled shutdown (SIGTERM) of leader {leader.broker_id}: leadership moved in {moved} ms; first "
        f"write acknowledged {took:.2f} s after the SIGTERM; failed deliveries during it: "
        f"{len(clock.errors) - errors_before}, undelivered at the end: {unsent}",
        flush=True,
    )
    leader.start()


def process_figures(pid: int) -> tuple[int, int]:
    """(RSS bytes, open file descriptors) of process ``pid``."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def scale(cluster: BrokerCluster, partitions: int) -> None:
    topic = "scale"
    pids = {b.broker_id: b.popen.pid for b in cluster.brokers if b.popen is not None}
    before = {b: process_figures(pid) for b, pid in pids.items()}

    def all_in_sync() -> bool:
        states = cluster.admin.describe_states(topic)
        return len(states) == partitions and all(len(s.isr) == 3 and s.leader >= 0 for s in states.values())

    def all_created() -> bool:
        return all(
            sum(1 for d in broker.log_dir.iterdir() if d.name.startswith(f"{topic}-")) == partitions
            for broker in cluster.brokers
        )

    started = time.monotonic()
    cluster.admin.create_topic(topic, partitions, replication_factor=3)
    created = wait(all_created, 600, f"the {partitions} partitions' logs on every broker")
    took = time.monotonic() - started
    print(
        f"\nscale: created {partitions} partitions x 3 replicas; every broker had all its logs "
        f"{took:.1f} s after the create began ({created:.1f} s after it returned)"
    )
    time.sleep(2.0)
    after = {b: process_figures(pid) for b, pid in pids.items()}
    for b in sorted(pids):
        rss = (after[b][0] - before[b][0]) / partitions
        fds = (after[b][1] - before[b][1]) / partitions
        print(
            f"  broker {b}: RSS {before[b][0] / 2**20:.0f} -> {after[b][0] / 2**20:.0f} MiB "
            f"({rss / 1024:.1f} KiB per partition replica), open files {before[b][1]} -> {after[b][1]} "
            f"({fds:.2f} per partition replica)"
        )
    started = time.monotonic()
    for broker in cluster.brokers:
        began = time.monotonic()
        broker.stop()
        stopped = time.monotonic() - began
        began = time.monotonic()
        broker.start(timeout_s=300)
        print(
            f"  restart of broker {broker.broker_id}: stop {stopped:.1f} s, start until registered "
            f"{time.monotonic() - began:.1f} s",
            flush=True,
        )
    wait(all_in_sync, 600, "every ISR full after the restarts")
    print(
        f"  rolling restart of the three brokers until every ISR is full: {time.monotonic() - started:.1f} s"
    )
    cluster.admin.request_preferred_election(None)  # leadership back where it was before the restarts

    def balanced() -> bool:
        states = cluster.admin.describe_states(topic)
        assignment = cluster.admin.describe_topic(topic)
        return all(states[p].leader == assignment[p][0] for p in states)

    took = wait(balanced, 120, "every partition led by its preferred replica again")
    print(f"  preferred-replica election of all {partitions} partitions: {took:.2f} s", flush=True)
    controller = cluster.controller_id()
    led = [p for p, s in cluster.admin.describe_states(topic).items() if s.leader == controller]
    cluster.brokers[controller].kill()

    def re_elected() -> bool:
        if cluster.controller_id() in (-1, controller):
            return False
        states = cluster.admin.describe_states(topic)
        return all(states[p].leader not in (-1, controller) for p in led)

    took = wait(re_elected, 120, f"new leaders for the {len(led)} partitions the controller led")
    new_controller = cluster.controller_id()
    print(
        f"  kill -9 of the controller (broker {controller}, leading {len(led)} partitions): all of them led "
        f"elsewhere {took:.2f} s after the kill (new controller: broker {new_controller}; the session "
        f"timeout is {BROKER_SESSION_TIMEOUT_MS / 1000:.0f} s of it)",
        flush=True,
    )
    cluster.brokers[controller].start(timeout_s=300)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--scale-partitions", type=int, default=1000)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument(
        "--flush-ms", type=int, default=1000, help="the brokers' [log] flush_ms (default: Lumber's 1000)"
    )
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-repl-") as base,
        bench_cluster(Path(base), 3, **REPLICATION, flush_ms=args.flush_ms) as cluster,
    ):
        print(
            f"3 brokers, ZooKeeper session {BROKER_SESSION_TIMEOUT_MS / 1000:.0f} s, {os.cpu_count()} cores, "
            f"flush_ms {args.flush_ms}",
            flush=True,
        )
        throughput(cluster, args.messages, args.rounds)
        if not args.skip_failover:
            failover(cluster, args.failovers)
        if not args.skip_scale:
            scale(cluster, args.scale_partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
