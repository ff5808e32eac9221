"""Lumber's own producer spreading over partitions (issue 39's finding "more partitions halve produce
throughput"), with py-spy profiles of the broker and of the producer's process to say which loses it.

Run from the repository root (under the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/partitions.py                    # 1, 2, 4 partitions
    flock /work/bench.lock .venv/bin/python bench/partitions.py --profile /tmp/p   # and py-spy profiles

One Lumber broker with its defaults on a ZooKeeper of its own (``tests/support/broker_cluster.py``), a topic
per partition count with every partition on it; Lumber's producer as ``bench/paper.py`` drives it: 200-byte
values, ``acks=0``, batches of exactly 50 records handed over with ``send_many``, the partitions taken in
turn (batch ``i`` to partition ``i mod P``). The clock stops when the broker's end offsets add up to every
record (ListOffsets). Counts alternate, ``--rounds`` times; medians with min and max, the broker's and this
process's CPU seconds per million records beside them.

``--profile DIR`` runs ``py-spy record`` (``pip install py-spy``; not a Lumber dependency) on the broker and
on this process (the producer's caller and its sender thread) during each count's last round, writes the
raw collapsed stacks to ``DIR`` (flame graphs stay out of the repository) and prints, per process and
count, the functions holding the largest shares of the samples (inclusive): relative costs, meaningful
even on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.broker_cpu import BrokerCpu, per_million
from bench.paper_common import make_values, own_cpu_seconds, wait_for
from bench.paper_targets import exact_batch_size
from bench.spread import Spread
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition

BATCH = 50


def produce_round_robin(server: str, topic: str, partitions: int, values: list[bytes]) -> None:
    """Batches of ``BATCH`` values to partitions 0, 1, ... in turn; returns once the broker holds them all."""
    config = ProducerConfig(
        bootstrap_servers=[server],
        acks="0",
        enable_idempotence=False,
        linger_ms=5,
        batch_size=exact_batch_size(BATCH),
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Producer(config) as producer, Consumer(ConsumerConfig(bootstrap_servers=[server])) as offsets:
        producer.partitions_for(topic)
        offsets.end_offsets(tps)
        send_many = producer.send_many
        for i, start in enumerate(range(0, len(values), BATCH)):
            send_many(topic, values[start : start + BATCH], partition=i % partitions)
        producer.flush()
        wait_for(
            lambda: sum(offsets.end_offsets(tps).values()) >= len(values),
            f"the broker to hold {len(values)} records of {topic}",
        )


class PySpy:
    """``py-spy record`` of one process, raw collapsed stacks, until :meth:`stop` (SIGINT)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        py_spy = Path(sys.executable).parent / "py-spy"
        argv = [str(py_spy), "record", "--pid", str(pid), "--rate", "200", "--format", "raw"]
        argv += ["--output", str(out), "--nonblocking"]
        self.popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # attached before the phase starts

    def stop(self) -> None:
        self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stderr is not None:
            self.popen.stderr.close()


def top_functions(raw: Path, count: int = 14) -> list[tuple[str, float]]:
    """The functions (``name (file)``) in the largest shares of the samples, inclusive, idle threads left
    out (stacks whose leaf waits in ``select``/``poll``/``wait``/``sleep``/``recv``)."""
    inclusive: Counter[str] = Counter()
    total = 0
    idle = ("select (", "poll (", "wait (", "sleep (", "_recv_into (", "recv_into (", "epoll")
    for line in raw.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        frames = stack.split(";")
        if frames[-1].lstrip().startswith(idle):
            continue
        n = int(samples)
        total += n
        for name in {frame.rsplit(":", 1)[0] + ")" if ":" in frame else frame for frame in frames}:
            inclusive[name] += n
    return [(name, n / total) for name, n in inclusive.most_common(count)] if total else []


def main(argv: list[str] | None = None) -> int:
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=500_000, help="records per run (default 500,000)")
    parser.add_argument("--partitions", default="1,2,4", help="partition counts (default 1,2,4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy's raw stacks into this folder")
    args = parser.parse_args(argv)
    counts = [int(p) for p in args.partitions.split(",") if p]
    values = make_values(args.messages - args.messages % BATCH)
    rates = {p: Spread() for p in counts}
    broker_cpu = {p: Spread() for p in counts}
    client_cpu = {p: Spread() for p in counts}
    profiles: dict[str, list[tuple[str, float]]] = {}
    print(f"{time.strftime('%Y-%m-%d %H:%M')} bench/partitions.py {' '.join(sys.argv[1:])}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="lumber-partitions-") as tmp,
        bench_cluster(Path(tmp), 1, flush_ms=1000, num_io_threads=4) as cluster,
    ):
        broker = cluster.brokers[0]
        assert broker.popen is not None
        cpu = BrokerCpu(broker.popen.pid)
        for round_number in range(1, args.rounds + 1):
            for partitions in counts:
                topic = f"rr-{partitions}-{round_number}"
                cluster.create_topic(topic, partitions, assignment={p: [0] for p in range(partitions)})
                spies: list[PySpy] = []
                if args.profile is not None and round_number == args.rounds:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    spies = [
                        PySpy(broker.popen.pid, args.profile / f"broker-p{partitions}.txt"),
                        PySpy(os.getpid(), args.profile / f"producer-p{partitions}.txt"),
                    ]
                own0 = own_cpu_seconds()
                with cpu.phase() as spent:
                    started = time.perf_counter()
                    produce_round_robin(broker.address, topic, partitions, values)
                    seconds = time.perf_counter() - started
                own = own_cpu_seconds() - own0
                for spy in spies:
                    spy.stop()
                    profiles[spy.out.stem] = top_functions(spy.out)
                rates[partitions].add(len(values) / seconds)
                broker_cpu[partitions].add(per_million(spent.seconds, len(values)))
                client_cpu[partitions].add(per_million(own, len(values)))
                print(
                    f"round {round_number} {partitions:>4} partitions "
                    f"{len(values) / seconds:>10,.0f} msg/s  "
                    f"broker CPU {per_million(spent.seconds, len(values)):.2f} s, producer's process "
                    f"{per_million(own, len(values)):.2f} s per million",
                    flush=True,
                )
    print(
        f"\n{len(values):,} records of 200 bytes, batches of {BATCH}, acks=0, round-robin; "
        f"{args.rounds} rounds"
    )
    print(
        "\n| partitions | msg/s, median [min - max] | broker CPU s / million "
        "| producer's process CPU s / million |"
    )
    print("| ---: | ---: | ---: | ---: |")
    for p in counts:
        print(f"| {p} | {rates[p].text()} | {broker_cpu[p].text(2)} | {client_cpu[p].text(2)} |")
    for name, top in profiles.items():
        print(f"\n{name} (py-spy, share of busy samples, inclusive):")
        for function, share in top:
            print(f"  {share:6.1%}  {function}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
