"""acks=all latency and what record validation costs (issue 16), each against a baseline in the same run.

Run from the repository root::

    .venv/bin/python bench/acks.py              # 10k msg/s for 5 s; validation: 3 rounds of 100,000 records
    .venv/bin/python bench/acks.py --quick      # 2 s latency runs, 1 round of 50,000 records

``bench/paper.py`` calls the same functions for its latency table's acks rows and its validation line.

* **acks latency.** A confluent-kafka producer with librdkafka's defaults (``acks=all``; ``linger.ms`` 5)
  paced at ``--rate`` msg/s of 200-byte values for ``--seconds``; each message's latency is from its
  ``produce()`` call to its delivery report; p50 / p99 / max. Rows: ``acks=1`` (the baseline), ``acks=all``
  on a broker with the paper's flush policy (M = 10,000 / S = 1 s, ``expose = "flushed"``), and ``acks=all``
  on a broker with ``[log] flush_on_ack`` (every acknowledged batch fsynced first, by group commit), with
  librdkafka's pipelining (the processor appends the requests buffered behind the one waiting for its
  fsync, so they share the next one) and with ``max.in.flight.requests.per.connection = 1`` (the producer
  gathers what it sends during an fsync into its next request).
* **Validation cost.** Batches of 50 records of 200 bytes (uncompressed, and lz4), built once, sent as
  ``acks=0`` Produce requests on one connection (pipelined: the broker appends them in runs) to a broker
  with ``[log] validate_records = true`` and to one with it off, alternately, ``--rounds`` times; the clock
  stops when ListOffsets shows every record (``expose = "appended"``). Figures: records/s and the broker
  process's CPU microseconds per record (``/proc``), median over the rounds, and their ratio on / off.

The machine may be shared: compare the ratios, which come from the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from broker.client.network.connection import BrokerConnection  # noqa: E402
from broker.protocol.messages.list_offsets import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from broker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from broker.record.compression import CompressionType  # noqa: E402
from broker.record.record_batch_builder import RecordBatchBuilder  # noqa: E402

VALUE_BYTES = 200
BATCH_RECORDS = 50
#: The brokers of the acks rows and the validation line, by role: [broker] / [log] settings of each.
PAPER_FLUSH = {"flush_messages": 10_000, "flush_ms": 1000}
BROKERS: dict[str, dict[str, Any]] = {
    "flushed": {**PAPER_FLUSH, "expose": "flushed"},
    "flush_on_ack": {**PAPER_FLUSH, "expose": "flushed", "flush_on_ack": True},
    "validating": {**PAPER_FLUSH, "expose": "appended"},
    "not validating": {**PAPER_FLUSH, "expose": "appended", "validate_records": False},
}


@dataclass
class AckLatency:
    """One row: produce() to delivery report, in ms."""

    system: str
    rate: int
    sent: int = 0
    achieved_rate: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    verdict: str = ""


@dataclass
class ValidationCost:
    """Validation on against off, one codec: records/s and broker CPU us/record per round."""

    codec: str
    records: int
    on_rate: list[float] = field(default_factory=list)
    off_rate: list[float] = field(default_factory=list)
    on_cpu_us: list[float] = field(default_factory=list)
    off_cpu_us: list[float] = field(default_factory=list)

    def line(self) -> str:
        on_rate, off_rate = statistics.median(self.on_rate), statistics.median(self.off_rate)
        on_cpu, off_cpu = statistics.median(self.on_cpu_us), statistics.median(self.off_cpu_us)
        # a short run can finish inside one clock tick of broker CPU: no ratio then
        cpu_ratio = f"{on_cpu / off_cpu:.3f}" if off_cpu > 0 else "n/a (under one clock tick of CPU)"
        return (
            f"produce at batch {BATCH_RECORDS}, {self.codec}: validation on {on_rate:,.0f} records/s, "
            f"{on_cpu:.2f} us broker CPU/record; off {off_rate:,.0f} records/s, {off_cpu:.2f} us/record; "
            f"on/off throughput {on_rate / off_rate:.3f}, CPU {cpu_ratio} "
            f"(median of {len(self.on_rate)} rounds of {self.records:,} records)"
        )


# ------------------------------------------------------------------------------------------ acks latency


def ack_latency(
    system: str, servers: str, topic: str, rate: int, seconds: float, **config: Any
) -> AckLatency:
    """Pace a confluent-kafka producer (librdkafka's defaults plus ``config``) at ``rate`` for ``seconds``;
    latency from each ``produce()`` to its delivery report."""
    import numpy as np  # noqa: PLC0415
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, **config})
    total = int(rate * seconds)
    sent_at = np.zeros(total, dtype=np.int64)
    acked_at = np.zeros(total, dtype=np.int64)
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        index = int(msg.key())
        if err is not None:
            errors.append(str(err))
        else:
            acked_at[index] = time.monotonic_ns()

    value = b"x" * VALUE_BYTES
    producer.list_topics(topic, timeout=30)  # connected before the clock starts
    interval_ns = 1e9 / rate
    start_ns = time.monotonic_ns()
    produce, poll, now_ns = producer.produce, producer.poll, time.monotonic_ns
    for i in range(total):
        due = start_ns + i * interval_ns
        while now_ns() < due:
            poll(0)
        sent_at[i] = now_ns()
        produce(topic, value, key=b"%d" % i, partition=0, on_delivery=delivered)
    elapsed = (now_ns() - start_ns) / 1e9
    left = producer.flush(60)
    result = AckLatency(system, rate, total, total / elapsed)
    done = acked_at > 0
    latencies = (acked_at[done] - sent_at[done]) / 1e6
    if len(latencies):
        result.p50_ms = float(np.percentile(latencies, 50))
        result.p99_ms = float(np.percentile(latencies, 99))
        result.max_ms = float(latencies.max())
    if errors or left or not done.all():
        result.verdict = f"{int((~done).sum()):,} not acknowledged ({len(errors)} errors, e.g. {errors[:1]})"
    else:
        result.verdict = f"all {total:,} acknowledged"
    return result


# ------------------------------------------------------------------------------------------ validation


def build_batches(records: int, codec: CompressionType) -> list[bytes]:
    batches = []
    base_ts = 1_700_000_000_000
    for start in range(0, records, BATCH_RECORDS):
        builder = RecordBatchBuilder(codec)
        for i in range(start, start + BATCH_RECORDS):
            value = (b"%010d;" % i) * (VALUE_BYTES // 11) + b"." * (VALUE_BYTES % 11)
            builder.append(base_ts + i, None, value, (("host", b"bench"),))
        batches.append(builder.build())
    return batches


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def latest_offset(conn: BrokerConnection, topic: str) -> int:
    response = conn.request(
        ListOffsetsRequest(topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(0, timestamp=-1)])])
    )
    offset: int = response.topics[0].partitions[0].offset
    return offset


def produce_run(cluster: Any, broker_id: int, topic: str, batches: list[bytes]) -> tuple[float, float]:
    """Send ``batches`` as pipelined acks=0 Produce requests; (records/s, broker CPU us per record)."""
    broker = cluster.brokers[broker_id]
    cluster.create_topic(topic, 1, assignment={0: [broker_id]})
    records = len(batches) * BATCH_RECORDS
    bodies = [
        ProduceRequest(
            acks=0, timeout_ms=30_000, topic_data=[TopicProduceData(topic, [PartitionProduceData(0, b)])]
        )
        for b in batches
    ]
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=broker_id)
    conn.connect()
    try:
        latest_offset(conn, topic)
        cpu0 = cpu_seconds(broker.popen.pid)
        start = time.perf_counter()
        for i in range(0, len(bodies), 100):
            conn.send_unanswered(bodies[i : i + 100])
        deadline = time.monotonic() + 300
        while latest_offset(conn, topic) < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not every record appended within 300 s")
            time.sleep(0.002)
        seconds = time.perf_counter() - start
        cpu = cpu_seconds(broker.popen.pid) - cpu0
    finally:
        conn.close()
    return records / seconds, cpu * 1e6 / records


def validation_cost(
    cluster: Any, on_broker: int, off_broker: int, codec: CompressionType, records: int, rounds: int
) -> ValidationCost:
    batches = build_batches(records, codec)
    cost = ValidationCost(codec.name.lower(), records)
    for r in range(rounds):
        order = [(True, on_broker), (False, off_broker)]
        if r % 2:
            order.reverse()
        for validating, broker_id in order:
            topic = f"validation-{codec.name.lower()}-{'on' if validating else 'off'}-{r}"
            rate, cpu_us = produce_run(cluster, broker_id, topic, batches)
            (cost.on_rate if validating else cost.off_rate).append(rate)
            (cost.on_cpu_us if validating else cost.off_cpu_us).append(cpu_us)
    return cost


# ------------------------------------------------------------------------------------------ main


@contextlib.contextmanager
def acks_cluster(base_dir: Path) -> Iterator[tuple[Any, dict[str, int]]]:
    """A ZooKeeper and one broker per role of :data:`BROKERS`; yields the cluster and {role: broker id}."""
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    roles = list(BROKERS)
    with bench_cluster(base_dir, 1, **BROKERS[roles[0]]) as cluster:
        for role in roles[1:]:
            cluster.add_broker(BROKERS[role])
        yield cluster, {role: i for i, role in enumerate(roles)}


def ack_rows(cluster: Any, ids: dict[str, int], rate: int, seconds: float) -> list[AckLatency]:
    """The acks rows: acks=1 (baseline), acks=all, acks=all with flush_on_ack."""
    rows = []
    one_in_flight = {"max.in.flight.requests.per.connection": 1}
    for number, (system, role, config) in enumerate(
        (
            ("confluent-kafka acks=1, produce to delivery report", "flushed", {"acks": "1"}),
            ("confluent-kafka acks=all (default), produce to delivery report", "flushed", {"acks": "all"}),
            ("confluent-kafka acks=all, broker flush_on_ack (group commit)", "flush_on_ack", {"acks": "all"}),
            (
                "confluent-kafka acks=all, max.in.flight 1, broker flush_on_ack",
                "flush_on_ack",
                {"acks": "all", **one_in_flight},
            ),
        )
    ):
        broker_id = ids[role]
        topic = f"acks-{role}-{number}-{rate}"
        cluster.create_topic(topic, 1, assignment={0: [broker_id]})
        rows.append(ack_latency(system, cluster.brokers[broker_id].address, topic, rate, seconds, **config))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2 s latency runs, 1 round of 50,000 records")
    parser.add_argument("--rate", type=int, default=10_000, help="msg/s of the acks rows (default 10,000)")
    parser.add_argument("--seconds", type=float, default=None, help="traffic per acks row (default 5)")
    parser.add_argument("--records", type=int, default=None, help="records per validation run (100,000)")
    parser.add_argument("--rounds", type=int, default=None, help="validation rounds (default 3)")
    args = parser.parse_args(argv)
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    records = args.records or (50_000 if args.quick else 100_000)
    rounds = args.rounds or (1 if args.quick else 3)
    print(f"bench/acks.py {' '.join(argv if argv is not None else sys.argv[1:])}; load {os.getloadavg()}")
    with (
        tempfile.TemporaryDirectory(prefix="lumber-acks-") as scratch,
        acks_cluster(Path(scratch)) as (
            cluster,
            ids,
        ),
    ):
        print("| produce latency | rate msg/s | achieved msg/s | p50 ms | p99 ms | max ms | verdict |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for row in ack_rows(cluster, ids, args.rate, seconds):
            print(
                f"| {row.system} | {row.rate:,} | {row.achieved_rate:,.0f} | {_ms(row.p50_ms)} | "
                f"{_ms(row.p99_ms)} | {_ms(row.max_ms)} | {row.verdict} |",
                flush=True,
            )
        print()
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            cost = validation_cost(cluster, ids["validating"], ids["not validating"], codec, records, rounds)
            print(f"- {cost.line()}", flush=True)
    print(f"load after: {os.getloadavg()}")
    return 0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


if __name__ == "__main__":
    sys.exit(main())
