"""The mirror's throughput (issue 11) as a ratio to one producer's, both measured in the same run.

Run from the repository root::

    .venv/bin/python bench/mirror.py            # --messages 200000 --rounds 3 (about a minute on 2 cores)
    .venv/bin/python bench/mirror.py --quick    # smoke run: 20,000 messages, 1 round

Everything runs on 127.0.0.1 and is started and stopped by this process: two clusters, each a ZooKeeper of
its own and one Lumber broker process (``tests/support/broker_cluster.py``), both with the paper's flush
policy (M = 10,000 messages / S = 1 s) and ``expose = "appended"``, as the throughput phases of
``bench/paper.py``. Each round:

1. **Producer.** One producer sends N messages of 200 bytes to a new one-partition topic of the *source*
   cluster exactly as ``bench/paper.py`` measures "Lumber, batch 50" (its ``LumberTarget.produce``:
   ``acks=0``, ``send_many`` of 50 records per batch, the clock stops when ListOffsets shows all N).
2. **Mirror.** A :class:`~mirror.mirror.Mirror` (a new group per round, no audit) copies that topic to the
   *target* cluster: batches passed through, ``acks=all``, commits of what the target acknowledged. Its
   producer may send large requests (``batch_size`` 4 MiB, ``max_request_size`` 8 MiB), so that each
   round trip carries more than the target's M = 10,000 messages and is flushed (and acknowledged) at once
   instead of after S = 1 s. The clock starts when the mirror's stream fetches (the group joined) and stops
   when the target acknowledged all N (``Mirror.copied``); the target must then hold exactly N. Also
   shown: when ListOffsets on the target first shows all N (polled every 20 ms): the acknowledgement of
   the last partial block of M messages waits up to S = 1 s for the target's flush (``acks=all``), which
   a finite run of 200,000 messages pays once.

The medians over ``--rounds`` and their ratio are printed, with a Markdown line for ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.progress import Progress

from bench.paper_common import LUMBER_FLUSH_MESSAGES, LUMBER_FLUSH_MS, Meter, load_note, make_values
from bench.paper_targets import LumberTarget
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from mirror.mirror import Mirror
from mirror.mirror_config import MirrorConfig

MIB = 1024 * 1024
#: Longest a phase may take before the run is abandoned.
PHASE_TIMEOUT_S = 300.0


def wait_for(
    predicate: object, what: str, timeout_s: float = PHASE_TIMEOUT_S, pause_s: float = 0.005
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(pause_s)


def mirror_round(
    source: object, target: object, topic: str, messages: int, round_number: int
) -> tuple[float, float, float]:
    """Mirror ``topic`` from ``source`` to ``target``; returns the seconds from the first fetch until the
    target holds every message (ListOffsets), until it acknowledged them all, and the latter counting
    the group join."""
    mirror = Mirror(
        MirrorConfig(
            topics=re.escape(topic),
            group=f"bench-mirror-r{round_number}",
            audit_interval_ms=0,
            topic_refresh_ms=0,
            max_records_per_poll=100_000,
        ),
        source_zookeeper=source.zk_connect,  # type: ignore[attr-defined]
        target_zookeeper=target.zk_connect,  # type: ignore[attr-defined]
        consumer_config=ConsumerConfig(auto_offset_reset="earliest", max_partition_fetch_bytes=4 * MIB),
        group_config=GroupConfig(auto_commit_interval_ms=1000),
        producer_config=ProducerConfig(
            batch_size=4 * MIB, max_request_size=8 * MIB, buffer_memory=64 * MIB, linger_ms=0
        ),
    )
    tp = TopicPartition(topic, 0)
    address = target.brokers[0].address  # type: ignore[attr-defined]
    with Consumer(ConsumerConfig(bootstrap_servers=[address])) as offsets:
        try:
            began = time.perf_counter()
            mirror.start()
            wait_for(lambda: bool(mirror.group.fetching()), "the mirror to join and fetch", 60)
            fetching = time.perf_counter()
            wait_for(
                lambda: mirror.failure is not None or offsets.end_offsets([tp])[tp] >= messages,
                f"the target to hold {topic}",
                pause_s=0.02,
            )
            landed = time.perf_counter()
            wait_for(lambda: mirror.copied >= messages or mirror.failure is not None, f"acks of {topic}")
            acknowledged = time.perf_counter()
            if mirror.failure is not None:
                raise RuntimeError(f"the mirror failed: {mirror.failure}")
        finally:
            mirror.close(30)
        end = offsets.end_offsets([tp])[tp]
    if end != messages:
        raise RuntimeError(f"the target holds {end} messages of {topic}, expected exactly {messages}")
    return landed - fetching, acknowledged - fetching, acknowledged - began


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 messages, 1 round")
    parser.add_argument("--messages", type=int, default=None, help="messages per round (default 200,000)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds; the median counts (default 3)")
    args = parser.parse_args(argv)
    if args.messages is None:
        args.messages = 20_000 if args.quick else 200_000
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.messages % 50 or args.messages <= 0:
        parser.error("--messages must be a positive multiple of 50 (batch 50)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    command = " ".join(["bench/mirror.py", *(argv if argv is not None else sys.argv[1:])])
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(f"{command}: {args.messages:,} messages x {args.rounds} rounds; {load_note()}")
    values = make_values(args.messages)
    settings: dict[str, Any] = {
        "flush_messages": LUMBER_FLUSH_MESSAGES,
        "flush_ms": LUMBER_FLUSH_MS,
        "expose": "appended",
    }
    produce_rates: list[float] = []
    landed_rates: list[float] = []
    mirror_rates: list[float] = []
    joined_rates: list[float] = []
    scratch = Path(tempfile.mkdtemp(prefix="lumber-mirror-bench-"))
    try:
        with contextlib.ExitStack() as stack:
            source = stack.enter_context(bench_cluster(scratch / "source", **settings))
            target = stack.enter_context(bench_cluster(scratch / "target", **settings))
            producer = LumberTarget("Lumber, batch 50", source, 50, 0)
            progress = Progress(console=console, disable=True)
            for round_number in range(1, args.rounds + 1):
                meter = Meter(progress, "produce", args.messages)
                run = producer.produce(round_number, values, meter)
                meter.close()
                produce_rates.append(run.rate)
                landed_s, acked_s, with_join_s = mirror_round(
                    source, target, producer.topic(round_number), args.messages, round_number
                )
                landed_rates.append(args.messages / landed_s)
                mirror_rates.append(args.messages / acked_s)
                joined_rates.append(args.messages / with_join_s)
                console.print(
                    f"round {round_number}: producer {produce_rates[-1]:,.0f} msg/s; mirror "
                    f"{mirror_rates[-1]:,.0f} msg/s acknowledged ({landed_rates[-1]:,.0f} msg/s on the "
                    "target, "
                    f"{joined_rates[-1]:,.0f} msg/s counting the group join); "
                    f"ratio {mirror_rates[-1] / produce_rates[-1]:.2f}"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    produced = statistics.median(produce_rates)
    landed = statistics.median(landed_rates)
    mirrored = statistics.median(mirror_rates)
    joined = statistics.median(joined_rates)
    console.print(f"machine after: {load_note()}")
    console.print(
        f"single producer (batch 50, acks=0): {produced:,.0f} msg/s "
        f"[{min(produce_rates):,.0f} - {max(produce_rates):,.0f}]"
    )
    console.print(
        f"mirror (pass-through, acks=all), all acknowledged: {mirrored:,.0f} msg/s "
        f"[{min(mirror_rates):,.0f} - {max(mirror_rates):,.0f}]; all on the target: {landed:,.0f} msg/s; "
        f"{joined:,.0f} msg/s acknowledged counting the group join"
    )
    console.print(
        f"ratio mirror / producer: {mirrored / produced:.2f}x acknowledged, "
        f"{landed / produced:.2f}x on the target"
    )
    print(
        f"| {args.messages:,} x {args.rounds} | {produced:,.0f} [{min(produce_rates):,.0f} - "
        f"{max(produce_rates):,.0f}] | {mirrored:,.0f} [{min(mirror_rates):,.0f} - {max(mirror_rates):,.0f}] "
        f"| {landed:,.0f} | {joined:,.0f} | {mirrored / produced:.2f}x | {landed / produced:.2f}x |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
