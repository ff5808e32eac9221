"""A broker process's CPU per record at batch 50, over real sockets: confluent-kafka (librdkafka) producing
100-byte records as the Kafka comparison's batch-50 phases do (issue 39).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/batch_fifty.py --before /path/to/older/checkout [--runs 3]
    .venv/bin/python bench/batch_fifty.py --runs 1 --profile /tmp/prof    # this tree, py-spy on

``bench/batch_one.py`` is its batch-1 sibling (and describes the method); this one drives the load that
``bench/paper_kafka.py``'s batch-50 produce rows put on the broker: ``bench.paper_kafka_clients``'s producer
(``linger.ms=5``, ``batch.num.messages=50``, idempotence off, no compression), each case a producer of its
own, connected with the topic's metadata before the clock. Each tree (``--before`` and this one,
alternately, ``--runs`` times) is measured in its own process with ``PYTHONPATH`` set to it; that process
starts a ZooKeeper and one broker of the tree (the Kafka comparison's settings: ``flush_ms`` 1000, four
handler threads), creates a 1-partition and a 4-partition topic, warms the broker up with ``--records`` / 5
records, then measures each case from the broker's ``/proc/<pid>/stat`` (utime + stime, all its threads)
and the wall clock:

* **acks=1, 1 partition**, **acks=all, 1 partition**: ``--records`` records to partition 0;
* **acks=1, 4 / 10 / 1,000 partitions**: ``--records`` records spread by librdkafka's partitioner
  (keyless: sticky batches, one partition per batch), every acknowledgement awaited: the Kafka
  comparison's growth curve (``bench/paper_kafka.py``), whose goals are 4 partitions at 1.0x of one and
  1,000 at 0.8x of 10.

``--idle-partitions N`` creates a topic of N partitions no case produces to, as a broker's other partitions
(what a turn of the log flusher once scanned). It prints broker CPU microseconds per 1,000 records and records
per second (the best of the runs) and the ratios after / before. ``--profile DIR`` records py-spy (raw
collapsed stacks, 200 samples per second) on the broker during each case of this tree's last run:
``DIR/<case>.txt``; a profiled run's figures are not to be compared. The measuring process imports the bench's
own modules (``bench.batch_one``, ``bench.paper_kafka_clients``, ``bench.broker_cpu``) from the measured tree:
copy this tree's into an older checkout that lacks them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.batch_one import start_spy, stop_spy, tree_arguments, tree_rows

REPO = Path(__file__).resolve().parent.parent
VALUE = b"v" * 100
#: The Kafka comparison's Lumber broker (``bench/paper_kafka.py``'s ``LUMBER_DEFAULTS``).
BROKER_SETTINGS = {"flush_ms": 1000, "num_io_threads": 4}
#: case name -> (acks, partitions of its topic, partition produced to or None for the partitioner)
CASES: dict[str, tuple[str, int, int | None]] = {
    "acks=1, 1 partition": ("1", 1, 0),
    "acks=all, 1 partition": ("all", 1, 0),
    "acks=1, 4 partitions": ("1", 4, None),
    "acks=1, 10 partitions": ("1", 10, None),
    "acks=1, 1,000 partitions": ("1", 1000, None),
}


def _measure(records: int, profile: Path | None, idle_partitions: int) -> None:
    """One run in this process, on the tree ``PYTHONPATH`` names: prints ``case<TAB>cpu_us<TAB>rate``."""
    from bench.broker_cpu import BrokerCpu  # noqa: PLC0415 - the measured tree is on PYTHONPATH
    from bench.paper_kafka_clients import ConfluentProducer  # noqa: PLC0415
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415

    values = [VALUE] * records
    with (
        tempfile.TemporaryDirectory(prefix="lumber-batch-fifty-") as scratch,
        bench_cluster(Path(scratch), 0) as cluster,
    ):
        broker = cluster.add_broker(BROKER_SETTINGS)
        assert broker.popen is not None
        pid = broker.popen.pid
        for partitions in sorted({partitions for _, partitions, _ in CASES.values()}):
            cluster.create_topic(f"fifty-{partitions}", partitions)
        if idle_partitions:
            cluster.create_topic("idle", idle_partitions)
        warm = ConfluentProducer(broker.address, "fifty-1", 50, "1")
        warm.send(values[: records // 5], 0)  # connections, first appends, compiled kernels
        cpu = BrokerCpu(pid)
        for case, (acks, partitions, partition) in CASES.items():
            producer = ConfluentProducer(broker.address, f"fifty-{partitions}", 50, acks)
            name = case.replace(", ", "-").replace(" ", "-").replace("=", "")
            spy = None if profile is None else start_spy(pid, profile / f"{name}.txt")
            start = time.perf_counter()
            with cpu.phase() as spent:
                producer.send(values, partition)
            wall = time.perf_counter() - start
            stop_spy(spy)
            print(f"{case}\t{spent.seconds / records * 1e9:.1f}\t{records / wall:.0f}", flush=True)


def _run(
    tree: Path, records: int, profile: Path | None, idle_partitions: int
) -> dict[str, tuple[float, float]]:
    extra = ("--idle-partitions", str(idle_partitions))
    rows = tree_rows(str(Path(__file__).resolve()), tree, records, profile, extra)
    return {name: (float(cpu), float(rate)) for name, cpu, rate in rows}


def main() -> int:
    def idle(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--idle-partitions",
            type=int,
            default=0,
            help="also create a topic of this many partitions no case produces to (the broker's others)",
        )

    args = tree_arguments(__doc__.split("\n", 1)[0], 500_000, idle)
    if args.measure:
        _measure(args.records, args.profile, args.idle_partitions)
        return 0
    trees = {"after": REPO} if args.before is None else {"before": args.before.resolve(), "after": REPO}
    cpu: dict[str, dict[str, float]] = {label: {} for label in trees}
    rate: dict[str, dict[str, float]] = {label: {} for label in trees}
    loads = [os.getloadavg()[0]]
    for run in range(args.runs):
        for label, tree in trees.items():
            profile = args.profile if label == "after" and run == args.runs - 1 else None
            for name, (us, per_second) in _run(tree, args.records, profile, args.idle_partitions).items():
                cpu[label][name] = min(us, cpu[label].get(name, float("inf")))
                rate[label][name] = max(per_second, rate[label].get(name, 0.0))
            loads.append(os.getloadavg()[0])
    print(
        f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}; {args.records:,} records a case, "
        f"{args.idle_partitions:,} idle partitions, "
        f"best of {args.runs} runs: broker CPU us per 1,000 records, records/s"
    )
    both = "before" in trees
    head = " | ".join(f"CPU {label} | rec/s {label}" for label in trees)
    print(f"| case | {head} |" + (" CPU after / before | rec/s after / before |" if both else ""))
    print("| --- |" + " ---: |" * (2 * len(trees) + 2 * both))
    for name in cpu["after"]:
        cells = [f"{cpu[label][name]:.0f} | {rate[label][name]:,.0f}" for label in trees]
        if both:
            cells.append(f"{cpu['after'][name] / cpu['before'][name]:.2f}")
            cells.append(f"{rate['after'][name] / rate['before'][name]:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
