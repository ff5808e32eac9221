"""The paper's Section 5 experiment: Lumber against Apache Kafka (issue 39), then against the paper's peers
RabbitMQ and ActiveMQ, one producer and one consumer of 200-byte messages, all in one run (issue 9).

Run from the repository root (``make bench`` does both steps)::

    .venv/bin/python bench/paper.py --setup     # install the peers (Debian packages) if missing, then exit
    .venv/bin/python bench/paper.py             # --messages 200000 --rounds 3 (a few minutes on 2 cores)
    .venv/bin/python bench/paper.py --quick     # smoke run: 20,000 messages, short latency runs
    .venv/bin/python bench/paper.py --systems kafka --many-partitions   # only Kafka against Lumber

Everything runs on 127.0.0.1 and is started and stopped by this process: an Apache Kafka 4.4 broker
(``lumber.dev.kafka_server``, jars from ``make jars``), a ZooKeeper and up to five Lumber broker processes
(``tests/support/broker_cluster.py``), a RabbitMQ node and an ActiveMQ broker (``bench/peers.py``).

**Apache Kafka first** (:mod:`bench.paper_kafka`, which describes it): one Kafka broker and one Lumber broker
with their default settings, the same clients against both (confluent-kafka producing 100-byte records at
batch 1 and 50, ``acks=1`` and ``acks=all``, and consuming, each consume phase at least
``--consume-records`` records, 2 million, its topic read by one consumer after another; kcat; 1, 4, 10,
100 and with ``--many-partitions`` 1,000 partitions, each produce phase at least ``--produce-records``
records, 1 million; 1, 10 and 100 client connections, ``--connections``, in
:mod:`bench.paper_kafka_connections`; each broker's RSS before and after 1,000 partitions, ``--memory``, in
:mod:`bench.paper_kafka_memory`), ``--rounds`` alternated rounds, and the brokers' CPU seconds per million
records from ``/proc/<pid>/stat``; then three Kafka brokers against three Lumber brokers, RF 3 ``acks=all``
against RF 1 ``acks=1`` (``--replication``, :mod:`bench.paper_kafka_replication`). ``--no-memory``,
``--no-replication`` and ``--connections ''`` leave those out. The curves against partitions and
connections go to ``<out-dir>/kafka_growth.png`` (:mod:`bench.paper_kafka_curves`). It runs before
RabbitMQ and ActiveMQ start (the paper's Lumber brokers and ZooKeeper are up, idle); Kafka's brokers and
the comparison's Lumber brokers are stopped before the paper's experiment below starts.
Every client is a Python client in this process tree: Lumber's own, ``pika`` (AMQP 0-9-1) and ``stomp.py``
(STOMP 1.2; ActiveMQ has no maintained Python OpenWire client).

The paper's settings, for every system:

* **Persistence with asynchronous flushing.** Lumber: the paper's flush policy, every M = 10,000 messages or
  S = 1 s (``[log] flush_messages`` / ``flush_ms``), on two brokers: one exposes messages to consumers only
  once flushed (``expose = "flushed"``, the paper's semantics), the other once appended. RabbitMQ: a
  durable classic queue, persistent messages (``delivery_mode=2``), no publisher confirms. ActiveMQ:
  KahaDB, persistent messages, journal synced once a second.
* **Producer.** One producer publishes N messages of 200 bytes. Lumber's producer does not wait for
  acknowledgements (``acks=0``, as the paper's) and sends exactly 1 or 50 messages per Produce request
  (``batch_size`` sized to hold exactly that many records; batch 50 hands them over with ``send_many``).
  The peers publish one message per call (no batching, as in the paper). The clock stops when the broker
  holds them all, ready for consumers: RabbitMQ's queue holds N messages (passive ``queue.declare``);
  ActiveMQ answers the receipt requested with the last message; Lumber's log end offset (ListOffsets)
  reaches N. The peers count a message before it is on disk, so Lumber's throughput phases run on a broker
  with ``expose = "appended"`` and the same asynchronous M / S flush policy: with ``expose = "flushed"``
  the last partial block of M messages of a finite run would wait S = 1 s for its flush before ListOffsets
  shows it, which is most of a batch-50 run of 200,000 messages. What exposing only flushed messages costs
  is in the latency rows.
* **Consumer.** One consumer reads all N with a prefetch of about 1000 messages / 200 KB: Lumber's consumer
  with ``max_partition_fetch_bytes`` = ``max_prefetch_bytes`` = 200 KiB (``poll_values``, CRC-checked);
  RabbitMQ ``basic.qos(prefetch_count=1000)`` with automatic acknowledgement (the paper's mode; RabbitMQ
  applies the prefetch limit only to manual acks, so its consumer is not held back by it); ActiveMQ
  ``ack:auto`` with ``activemq.prefetchSize:1000``.
* **Rounds.** Each round produces into every system in turn, then consumes from every system, so that all
  see the same machine load; ``--rounds`` >= 3 and the median counts (min and max are shown). Bytes on disk
  per message are the growth of each system's data folder (allocated blocks) in round 1, where every store
  starts empty.
* **Latency.** At fixed rates (10k and 100k msg/s), a paced producer stamps every message with its
  *scheduled* send time (``CLOCK_MONOTONIC``, shared by all processes) and a consumer in a child process
  records receive time minus stamp; p50 / p99 / max over ``--latency-seconds`` of traffic. Lumber is
  measured with the paper's flush policy and, on a second broker, with ``expose = "appended"`` (how much of
  its latency is the flush interval). A system whose measured produce throughput (its median in the
  rounds; Lumber's at batch 50) is below the rate is not run at that rate, and its row says it was skipped;
  a run whose producer falls more than 1 s behind schedule is stopped. :mod:`bench.latency_verdict` judges
  each run: not sustained when the producer fell behind, missed 5 % of the rate or messages, when latency
  grew over the window by more than 50 ms (a growing backlog) or when the p50 is above 100 ms (a standing
  backlog, or a flush interval).
* **acks rows and validation cost** (issue 16; ``bench/acks.py`` has the details and runs them alone). In the
  latency table, a confluent-kafka producer with librdkafka's defaults (``acks=all``) at 10k msg/s: produce()
  to delivery report, p50 / p99, with ``acks=1`` as the baseline, and ``acks=all`` on a third broker with
  ``[log] flush_on_ack`` (fsync before the answer, by group commit). Then a validation-cost line per codec
  (none, lz4): batches of 50 records sent as pipelined ``acks=0`` Produce requests to broker 1 (records
  validated) and to a fourth broker with ``[log] validate_records = false``, alternately, ``--rounds``
  times: records/s and broker CPU per record, on / off.
* **Limits.** Raw ``os.write`` appends and raw loopback ``sendfile`` of 1 MiB chunks
  (``bench/log_ingest.py``'s functions) in the same run, and Lumber's fraction of each: producing at batch
  50 and consuming, in bytes on disk per second.

It prints progress bars, the tables (also as Markdown for ``BENCHMARKS.md``), writes the raw figures to
``<out-dir>/paper.json`` and a chart in the style of the paper's Figures 4 and 5 (throughput against data
sent) to ``<out-dir>/paper.png``.

The code: settings, results and the :class:`~bench.paper_common.Target` protocol in
:mod:`bench.paper_common`; the three systems in :mod:`bench.paper_targets`; the latency runs in
:mod:`bench.paper_latency`; tables, JSON and chart in :mod:`bench.paper_report`; the run itself here.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import log_ingest
from bench.acks import ack_rows, validation_cost
from bench.latency_verdict import skip_reason
from bench.paper_common import (
    ACTIVEMQ,
    LUMBER_B1,
    LUMBER_B50,
    LUMBER_FLUSH_MESSAGES,
    LUMBER_FLUSH_MS,
    LUMBER_LAT_APPENDED,
    LUMBER_LAT_FLUSHED,
    MB,
    MIB,
    RABBITMQ,
    REPO,
    LatencyResult,
    Limits,
    Meter,
    PhaseRun,
    SystemResult,
    Target,
    disk_by_kind,
    load_note,
    make_values,
    median,
)
from bench.paper_kafka import CONSUME_RECORDS, PRODUCE_RECORDS, ExtraPhase, run_kafka_comparison
from bench.paper_kafka_connections import ConnectionsPhase
from bench.paper_kafka_curves import draw_curves, has_curves
from bench.paper_kafka_memory import MemoryPhase
from bench.paper_kafka_replication import run_replication
from bench.paper_latency import (
    LatencySetup,
    activemq_latency_setup,
    lumber_latency_setup,
    rabbitmq_latency_setup,
    run_latency,
)
from bench.paper_report import Report, draw_chart, ms_text, print_tables, write_json
from bench.paper_targets import ActiveMQTarget, LumberTarget, RabbitMQTarget
from bench.peers import (
    ActiveMQServer,
    RabbitMQServer,
    install_peers,
    package_version,
)
from broker.record.compression import CompressionType

log = logging.getLogger("bench.paper")

# -------------------------------------------------------------------------------------------- limits


def measure_limits(scratch: Path, total_mb: int, rounds: int, progress: Progress) -> Limits:
    """Raw append (``os.write``) and raw loopback ``sendfile`` MB/s, with bench/log_ingest.py's functions."""
    rng = random.Random(42)
    batches = [log_ingest.build_batch(rng, log_ingest.BATCH_BYTES) for _ in range(4)]
    count = max(1, total_mb * MIB // len(batches[0]))
    total_bytes = sum(len(batches[i % len(batches)]) for i in range(count))
    path = scratch / "raw-append.bin"
    limits = Limits()
    task = progress.add_task("raw limits: append + sendfile", total=2 * rounds + 1, rate="")
    log_ingest.raw_write(path, batches, count)  # warm-up: first-touch page-cache memory is slow on a VM
    progress.advance(task)
    for _ in range(rounds):
        log_ingest.drop_dirty_pages()
        limits.append_mbps.append(total_bytes / MB / log_ingest.raw_write(path, batches, count))
        progress.advance(task)
    sink = log_ingest.Sink()
    try:
        for _ in range(rounds):
            elapsed, sent = log_ingest.raw_sendfile(sink, [path])
            limits.sendfile_mbps.append(sent / MB / elapsed)
            progress.advance(task)
    finally:
        sink.close()
        path.unlink()
        progress.remove_task(task)
    return limits


# ------------------------------------------------------------------------------------------ the run


def run_rounds(
    targets: list[Target], args: argparse.Namespace, report: Report, progress: Progress, console: Console
) -> None:
    values = make_values(args.messages)
    for round_number in range(1, args.rounds + 1):
        produced: set[str] = set()
        for phase in ("produce", "consume"):
            for target in targets:
                if phase == "consume" and target.name not in produced:
                    continue  # its produce failed: nothing to consume
                result = report.systems[target.name]
                meter = Meter(
                    progress, f"round {round_number}/{args.rounds} {target.name:<16} {phase}", args.messages
                )
                try:
                    if phase == "produce":
                        run = produce_and_measure_disk(target, round_number, values, meter, result)
                        result.produce.append(run)
                        produced.add(target.name)
                    else:
                        run = target.consume(round_number, args.messages, meter)
                        result.consume.append(run)
                except Exception as exc:
                    log.debug("%s %s failed", target.name, phase, exc_info=True)
                    result.failures.append(f"round {round_number} {phase}: {type(exc).__name__}: {exc}")
                    console.print(f"[red]round {round_number} {target.name} {phase} failed: {exc}")
                    continue
                finally:
                    meter.close()
                console.print(
                    f"round {round_number}/{args.rounds}  {target.name:<16} {phase:<8} "
                    f"{run.rate:>10,.0f} msg/s  ({run.seconds:.2f} s, handed over {run.handed_s:.2f} s; "
                    f"CPU client {run.client_cpu_s:.2f} s, server {run.server_cpu_s:.2f} s)"
                )


def produce_and_measure_disk(
    target: Target, round_number: int, values: list[bytes], meter: Meter, result: SystemResult
) -> PhaseRun:
    """Produce; in round 1 also record the growth of the target's data folder per message (by kind)."""
    if round_number != 1:
        return target.produce(round_number, values, meter)
    folder = target.data_dir(round_number)
    before = disk_by_kind(folder)
    run = target.produce(round_number, values, meter)
    after = disk_by_kind(folder)
    result.disk_by_kind = {
        kind: (after.get(kind, 0) - before.get(kind, 0)) / len(values)
        for kind in sorted(set(before) | set(after))
        if after.get(kind, 0) != before.get(kind, 0)
    }
    result.disk_bytes_per_message = sum(result.disk_by_kind.values())
    return run


#: the throughput rows whose produce rate decides whether a latency configuration runs at a rate
LATENCY_THROUGHPUT = {
    LUMBER_LAT_FLUSHED: LUMBER_B50,
    LUMBER_LAT_APPENDED: LUMBER_B50,
    RABBITMQ: RABBITMQ,
    ACTIVEMQ: ACTIVEMQ,
}


def produce_rate(report: Report, system: str) -> float | None:
    """The median produce rate of the throughput row behind latency configuration ``system``, if measured."""
    result = report.systems.get(LATENCY_THROUGHPUT.get(system, system))
    return median([run.rate for run in result.produce]) if result is not None and result.produce else None


def run_latencies(
    setups: dict[str, Callable[[int], LatencySetup]],
    args: argparse.Namespace,
    report: Report,
    progress: Progress,
    console: Console,
) -> None:
    """Every configuration at every rate its produce throughput reaches; the rest are listed as skipped."""
    for rate in args.rates:
        for system, make in setups.items():
            result = LatencyResult(system, rate)
            skipped = skip_reason(rate, produce_rate(report, system))
            if skipped is not None:
                result.verdict = skipped
                report.latency.append(result)
                console.print(f"latency {rate:>7,} msg/s  {system:<44} {skipped}")
                continue
            task = progress.add_task(f"latency {rate:,} msg/s {system}", total=None, rate="")
            setup: LatencySetup | None = None
            try:
                setup = make(rate)
                result = run_latency(setup, rate, args.latency_seconds)
            except Exception as exc:
                log.debug("latency %s failed", system, exc_info=True)
                result.verdict = f"failed: {type(exc).__name__}: {exc}"
            finally:
                if setup is not None:
                    with contextlib.suppress(Exception):
                        setup.close()
                progress.remove_task(task)
            report.latency.append(result)
            figures = (
                f"p50 {result.p50_ms:9.1f} ms  p99 {result.p99_ms:9.1f} ms"
                if result.p50_ms is not None and result.p99_ms is not None
                else ""
            )
            console.print(f"latency {rate:>7,} msg/s  {system:<44} {figures}  {result.verdict}")


def run_acks_and_validation(cluster: Any, args: argparse.Namespace, report: Report, console: Console) -> None:
    """The confluent-kafka acks rows at 10k msg/s and the validation-cost lines (see the module docstring)."""
    rate = 10_000
    for row in ack_rows(cluster, {"flushed": 0, "flush_on_ack": 2}, rate, args.latency_seconds):
        result = LatencyResult(
            row.system,
            row.rate,
            sent=row.sent,
            received=row.sent,
            achieved_rate=row.achieved_rate,
            p50_ms=row.p50_ms,
            p99_ms=row.p99_ms,
            max_ms=row.max_ms,
            verdict=row.verdict,
        )
        report.latency.append(result)
        console.print(
            f"latency {rate:>7,} msg/s  {row.system:<44} p50 {ms_text(row.p50_ms)} ms  "
            f"p99 {ms_text(row.p99_ms)} ms  {row.verdict}"
        )
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        cost = validation_cost(cluster, 1, 3, codec, args.messages, args.rounds)
        report.validation.append(cost.line())
        console.print(f"validation cost: {cost.line()}")


# -------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", action="store_true", help="install the peers if missing, then exit")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 messages, 1.5 s latency runs")
    parser.add_argument("--messages", type=int, default=None, help="messages per run (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median counts (default 3)")
    parser.add_argument(
        "--kafka-messages", type=int, default=None, help="records per Kafka comparison run (--messages)"
    )
    parser.add_argument(
        "--consume-records",
        type=int,
        default=None,
        help="the fewest records a Kafka comparison consume phase reads, its topic read by one "
        f"consumer after another ({CONSUME_RECORDS:,}; --quick: one consumer)",
    )
    parser.add_argument(
        "--produce-records",
        type=int,
        default=None,
        help="the fewest records a produce phase of the Kafka comparison's partitions cases sends "
        f"({PRODUCE_RECORDS:,}; --quick: the run's records once)",
    )
    parser.add_argument("--rates", default="10000,100000", help="latency rates, msg/s (default 10000,100000)")
    parser.add_argument("--latency-seconds", type=float, default=None, help="traffic per latency run (5)")
    parser.add_argument("--raw-mb", type=int, default=None, help="MiB per raw-limit round (default 512)")
    parser.add_argument(
        "--systems",
        default="kafka,lumber,rabbitmq,activemq",
        help="comma-separated subset of kafka,lumber,rabbitmq,activemq (kafka: Kafka against Lumber)",
    )
    parser.add_argument(
        "--partitions", default="1,4,10,100", help="partition counts of the Kafka comparison (1,4,10,100)"
    )
    parser.add_argument(
        "--many-partitions", action="store_true", help="the Kafka comparison also at 1,000 partitions"
    )
    parser.add_argument(
        "--connections",
        default="1,10,100",
        help="client counts of the Kafka comparison's connections phases (1,10,100; '' to skip them)",
    )
    parser.add_argument(
        "--replication",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the Kafka comparison's three brokers each, RF 3 acks=all against RF 1 acks=1 (default: on)",
    )
    parser.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="each comparison broker's RSS before and after 1,000 partitions (default: on)",
    )
    parser.add_argument(
        "--out-dir", type=Path, default=REPO / "bench" / "results", help="paper.json, paper.png"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.messages is None:
        args.messages = 20_000 if args.quick else 200_000
    if args.kafka_messages is None:
        args.kafka_messages = args.messages
    if args.consume_records is None:
        args.consume_records = args.kafka_messages if args.quick else CONSUME_RECORDS
    if args.produce_records is None:
        args.produce_records = args.kafka_messages if args.quick else PRODUCE_RECORDS
    if args.latency_seconds is None:
        args.latency_seconds = 1.5 if args.quick else 5.0
    if args.raw_mb is None:
        args.raw_mb = 64 if args.quick else 512
    args.rates = [int(r) for r in args.rates.split(",") if r]
    args.systems = {s.strip() for s in args.systems.split(",") if s.strip()}
    args.partitions = sorted(
        {int(p) for p in args.partitions.split(",") if p} | ({1000} if args.many_partitions else set())
    )
    args.connections = sorted({int(c) for c in args.connections.split(",") if c})
    unknown = args.systems - {"kafka", "lumber", "rabbitmq", "activemq"}
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.messages % 50:
        parser.error("--messages must be a multiple of 50 (batch 50)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.connections and not 1 <= args.connections[0] <= args.connections[-1] <= args.kafka_messages:
        parser.error("--connections must be between 1 and the records per run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    for noisy in ("pika", "stomp.py", "kazoo"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    install_peers()  # the setup step: a no-op when they are there
    if args.setup:
        print(
            "peers installed: rabbitmq-server",
            package_version("rabbitmq-server"),
            "activemq",
            package_version("activemq"),
        )
        return 0

    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    console = Console(width=None if sys.stdout.isatty() else 200)  # a log file gets whole lines
    report = Report(
        command=" ".join(["bench/paper.py", *(argv if argv is not None else sys.argv[1:])]),
        started=time.strftime("%Y-%m-%d %H:%M"),
        messages=args.messages,
        rounds=args.rounds,
        load_before=load_note(),
        versions={
            "rabbitmq-server": package_version("rabbitmq-server"),
            "activemq": package_version("activemq"),
            "python": sys.version.split()[0],
            "cores": str(os.cpu_count()),
        },
    )
    console.print(
        f"{report.command}: {args.messages:,} messages x {args.rounds} rounds; {report.load_before}"
    )
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        refresh_per_second=4,
    )
    scratch = Path(tempfile.mkdtemp(prefix="lumber-paper-"))
    targets: list[Target] = []
    try:
        with contextlib.ExitStack() as stack, progress:

            def close_targets() -> None:
                for target in targets:
                    target.close()

            stack.callback(close_targets)
            cluster = None
            rabbit = active = None
            task = progress.add_task(
                "starting Lumber (ZooKeeper + 4 brokers), RabbitMQ, ActiveMQ", total=None, rate=""
            )
            paper_lumber = "lumber" in args.systems
            if paper_lumber or "kafka" in args.systems:
                cluster = stack.enter_context(
                    bench_cluster(
                        scratch / "lumber",
                        1 if paper_lumber else 0,
                        flush_messages=LUMBER_FLUSH_MESSAGES,
                        flush_ms=LUMBER_FLUSH_MS,
                        expose="flushed",  # the paper's semantics (no longer the default)
                    )
                )
            if cluster is not None and paper_lumber:
                cluster.add_broker(
                    {
                        "flush_messages": LUMBER_FLUSH_MESSAGES,
                        "flush_ms": LUMBER_FLUSH_MS,
                        "expose": "appended",
                    }
                )
                # broker 2: acks=all with fsync before the answer; broker 3: no record validation
                paper_flush = {"flush_messages": LUMBER_FLUSH_MESSAGES, "flush_ms": LUMBER_FLUSH_MS}
                cluster.add_broker({**paper_flush, "flush_on_ack": True})
                cluster.add_broker({**paper_flush, "expose": "appended", "validate_records": False})
                # throughput on broker 1 (expose = "appended"): see the module docstring
                targets += [LumberTarget(LUMBER_B1, cluster, 1, 1), LumberTarget(LUMBER_B50, cluster, 50, 1)]
            if "kafka" in args.systems:  # first, before RabbitMQ and ActiveMQ start (Lumber's idle)
                progress.remove_task(task)
                before_rounds: list[ExtraPhase] = [MemoryPhase()] if args.memory else []
                each_round: list[ExtraPhase] = (
                    [ConnectionsPhase(args.connections)] if args.connections else []
                )
                report.kafka = run_kafka_comparison(
                    cluster,
                    scratch,
                    args.kafka_messages,
                    args.rounds,
                    args.partitions,
                    console.print,
                    before_rounds=before_rounds,
                    each_round=each_round,
                    consume_records=args.consume_records,
                    produce_records=args.produce_records,
                )
                if args.replication:
                    run_replication(cluster, scratch, report.kafka, console.print)
                task = progress.add_task("starting RabbitMQ, ActiveMQ", total=None, rate="")
            if "rabbitmq" in args.systems:
                rabbit = stack.enter_context(RabbitMQServer(scratch / "rabbitmq"))
                targets.append(RabbitMQTarget(rabbit))
            if "activemq" in args.systems:
                active = stack.enter_context(ActiveMQServer(scratch / "activemq"))
                targets.append(ActiveMQTarget(active))
            progress.remove_task(task)
            for target in targets:
                report.systems[target.name] = SystemResult(target.name)

            if targets:
                report.limits = measure_limits(scratch, args.raw_mb, 3, progress)
                console.print(
                    f"raw limits: append {median(report.limits.append_mbps):,.0f} MB/s, "
                    f"loopback sendfile {median(report.limits.sendfile_mbps):,.0f} MB/s"
                )
            run_rounds(targets, args, report, progress, console)
            for target in targets:
                if isinstance(target, LumberTarget):
                    report.lumber_records_per_batch[target.name] = dict(target.batch_sizes_seen)
                    report.systems[target.name].notes.append(
                        "records per fetched batch: "
                        + ", ".join(
                            f"{size} x{count}" for size, count in sorted(target.batch_sizes_seen.items())
                        )
                    )

            setups: dict[str, Callable[[int], LatencySetup]] = {}
            if cluster is not None and paper_lumber:
                lumber_cluster = cluster
                setups[LUMBER_LAT_FLUSHED] = lambda rate: lumber_latency_setup(
                    LUMBER_LAT_FLUSHED, lumber_cluster, 0, rate
                )
                setups[LUMBER_LAT_APPENDED] = lambda rate: lumber_latency_setup(
                    LUMBER_LAT_APPENDED, lumber_cluster, 1, rate
                )
            if rabbit is not None:
                rabbit_server = rabbit
                setups[RABBITMQ] = lambda _rate: rabbitmq_latency_setup(rabbit_server)
            if active is not None:
                active_server = active
                setups[ACTIVEMQ] = lambda _rate: activemq_latency_setup(active_server)
            run_latencies(setups, args, report, progress, console)
            if cluster is not None and paper_lumber:
                run_acks_and_validation(cluster, args, report, console)
            report.load_after = load_note()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    console.print(f"machine: before {report.load_before}; after {report.load_after}")
    print_tables(report, console)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(report, args.out_dir / "paper.json")
    if report.systems:
        draw_chart(report, args.out_dir / "paper.png")
        console.print(f"wrote {args.out_dir / 'paper.png'}")
    if report.kafka is not None and has_curves(report.kafka):
        draw_curves(report.kafka, args.out_dir / "kafka_growth.png", report.started)
        console.print(f"wrote {args.out_dir / 'kafka_growth.png'}")
    console.print(f"wrote {args.out_dir / 'paper.json'}")
    failed = any(result.failures for result in report.systems.values())
    return 1 if failed or (report.kafka is not None and report.kafka.failures) else 0


if __name__ == "__main__":
    sys.exit(main())
