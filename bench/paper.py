"""The paper's Section 5 experiment: Lumber against RabbitMQ and ActiveMQ, one producer and one consumer of
200-byte messages, all in one run (issue 9).

Run from the repository root (``make bench`` does both steps)::

    .venv/bin/python bench/paper.py --setup     # install the peers (Debian packages) if missing, then exit
    .venv/bin/python bench/paper.py             # --messages 200000 --rounds 3 (a few minutes on 2 cores)
    .venv/bin/python bench/paper.py --quick     # smoke run: 20,000 messages, short latency runs

Everything runs on 127.0.0.1 and is started and stopped by this process: a ZooKeeper and two Lumber broker
processes (``tests/support/broker_cluster.py``), a RabbitMQ node and an ActiveMQ broker (``bench/peers.py``).
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
  its latency is the flush interval). A system whose measured produce throughput is below the rate is not
  run at that rate; a run whose producer falls more than 1 s behind schedule is stopped and reported as not
  sustained.
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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench import log_ingest
from bench.acks import ack_rows, validation_cost
from bench.peers import (
    LOOPBACK,
    ActiveMQServer,
    PeerError,
    RabbitMQServer,
    disk_bytes_by_kind,
    install_peers,
    package_version,
)
from broker.client.consumer import Consumer
from broker.client.consumer_config import ConsumerConfig
from broker.client.producer import Producer
from broker.client.producer_config import ProducerConfig
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType
from broker.record.record_encoder import record_bound
from broker.record.record_header import encode_headers
from broker.record.topic_partition import TopicPartition

REPO = Path(__file__).resolve().parent.parent
VALUE_BYTES = 200
PREFETCH_MESSAGES = 1000
PREFETCH_BYTES = 200 * 1024
LUMBER_FLUSH_MESSAGES = 10_000  # the paper's M
LUMBER_FLUSH_MS = 1000  # the paper's S
PHASE_TIMEOUT_S = 600.0
SETTLE_TIMEOUT_S = 15.0
LATENCY_GRACE_S = 10.0
#: traffic that keeps flowing after the measured window at the same rate (longer than Lumber's S = 1 s,
#: so that no message of the window waits for a flush that only a finite run's end would delay)
LATENCY_TAIL_S = 1.5
MAX_BEHIND_S = 1.0
SUSTAINED_FRACTION = 0.95
#: latency growing more than this from the window's first fifth to its last: the consumer falls behind
MAX_LATENCY_GROWTH_MS = 500.0
MB = 1_000_000
MIB = 1024 * 1024

LUMBER_B1 = "Lumber, batch 1"
LUMBER_B50 = "Lumber, batch 50"
RABBITMQ = "RabbitMQ"
ACTIVEMQ = "ActiveMQ"
LUMBER_LAT_FLUSHED = "Lumber (exposed after flush, M=10k / S=1 s)"
LUMBER_LAT_APPENDED = "Lumber (expose = appended)"

#: The paper's figures (Section 5) and issue 9's targets (x RabbitMQ).
PAPER_MSGS = {"produce, batch 1": 50_000, "produce, batch 50": 400_000, "consume": 22_000}
TARGETS = {"produce, batch 1": 2.5, "produce, batch 50": 25.0, "consume": 20.0}
TARGET_OVERHEAD_BYTES = 9.0

log = logging.getLogger("bench.paper")


# ------------------------------------------------------------------------------------------ results


@dataclass
class PhaseRun:
    """One produce or consume run of one system."""

    messages: int
    seconds: float
    #: when the client had handed every message over (the broker may still be catching up)
    handed_s: float
    client_cpu_s: float
    server_cpu_s: float
    #: (seconds since the start, messages done so far): producing, what the broker holds (sampled by a
    #: probe every 50 ms); consuming, what the consumer received
    samples: list[tuple[float, int]]

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


@dataclass
class SystemResult:
    name: str
    produce: list[PhaseRun] = field(default_factory=list)
    consume: list[PhaseRun] = field(default_factory=list)
    disk_bytes_per_message: float | None = None
    #: round 1's bytes on disk per message by kind of file
    disk_by_kind: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class LatencyResult:
    system: str
    rate: int
    sent: int = 0
    received: int = 0
    achieved_rate: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    #: median latency of the window's last fifth minus that of its first fifth (by send time)
    growth_ms: float | None = None
    sustained: bool = False
    verdict: str = ""


@dataclass
class Limits:
    append_mbps: list[float] = field(default_factory=list)
    sendfile_mbps: list[float] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


# ------------------------------------------------------------------------------------------ helpers


def make_values(count: int) -> list[bytes]:
    """``count`` 200-byte log-line-like values (1000 distinct ones, cycled)."""
    distinct = [
        (b"%08d GET /api/v1/items?id=%d HTTP/1.1 200 user=%d " % (i, i * 7919, i % 97)).ljust(
            VALUE_BYTES, b"x"
        )
        for i in range(1000)
    ]
    return [distinct[i % 1000] for i in range(count)]


_STAMP_PAD = b"." * (VALUE_BYTES - 16)


def stamped(t_ns: int) -> bytes:
    """A 200-byte value carrying ``t_ns`` as 16 hex digits (ASCII: safe in every protocol)."""
    return b"%016x" % t_ns + _STAMP_PAD


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def disk_by_kind(path: Path) -> dict[str, int]:
    """Bytes on disk below ``path`` per kind of file, once two readings 0.25 s apart agree (the stores
    write behind), bounded in time; {} if ``path`` does not exist yet."""
    if not path.exists():
        return {}
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last = disk_bytes_by_kind(path)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = disk_bytes_by_kind(path)
        if now == last:
            return now
        last = now
    return last


def wait_for(
    predicate: Callable[[], bool], what: str, timeout_s: float = PHASE_TIMEOUT_S, pause_s: float = 0.005
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(pause_s)


def load_note() -> str:
    one, five, fifteen = os.getloadavg()
    pressure = ""
    with contextlib.suppress(OSError):
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        pressure = ", CPU pressure " + " ".join(some.split()[1:3])
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min){pressure}"


class Meter:
    """A progress bar for one phase that also keeps (time, done) samples for the chart."""

    def __init__(self, progress: Progress, description: str, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task(description, total=total, rate="")
        self.total = total
        self.step = max(50, (total // 200) // 50 * 50)  # a multiple of 50: batch-50 chunks stay whole
        self.samples: list[tuple[float, int]] = [(0.0, 0)]
        self.started = time.perf_counter()

    def start(self) -> None:
        self.started = time.perf_counter()
        self.samples = [(0.0, 0)]

    def update(self, done: int) -> None:
        elapsed = time.perf_counter() - self.started
        self.samples.append((elapsed, done))
        rate = f"{done / elapsed:>10,.0f} msg/s" if elapsed > 0 else ""
        self._progress.update(self._task, completed=done, rate=rate)

    def close(self) -> None:
        self._progress.remove_task(self._task)


class BrokerProbe:
    """Samples how far a broker has got, every 50 ms in a thread of its own, while a producer runs: the
    producer's own count shows only what it handed to its socket, which says little for a producer that
    does not wait for acknowledgements. ``read`` returns progress in any unit that grows linearly with the
    messages the broker holds (queue depth, bytes written); :meth:`samples` scales the readings so that the
    last one, taken when the phase ended, is all ``messages``."""

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read
        self._readings: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._started = 0.0
        self._thread = threading.Thread(target=self._run, name="broker-probe", daemon=True)

    def start(self, started: float) -> None:
        self._started = started
        self._thread.start()

    def _run(self) -> None:
        baseline = self._read()
        while not self._stop.wait(0.05):
            self._readings.append((time.perf_counter() - self._started, self._read() - baseline))
        self._readings.append((time.perf_counter() - self._started, self._read() - baseline))

    def samples(self, messages: int, seconds: float) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join(10)
        final = self._readings[-1][1] if self._readings else 0.0
        points = [(0.0, 0)]
        if final > 0:
            points += [
                (t, min(messages, max(0, round(units / final * messages))))
                for t, units in self._readings
                if t < seconds
            ]
        points.append((seconds, messages))
        return points


class Target(Protocol):
    """One system under test, as the rounds drive it."""

    name: str

    def produce(self, round_number: int, values: list[bytes], meter: Meter) -> PhaseRun: ...

    def consume(self, round_number: int, count: int, meter: Meter) -> PhaseRun: ...

    def data_dir(self, round_number: int) -> Path:
        """The folder whose growth while producing round ``round_number`` is the messages' disk use."""
        ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------------- Lumber


def host_header_bytes() -> bytes:
    """The ``host`` header every Lumber record carries (the producer's default: this machine's name)."""
    return encode_headers([("host", socket.gethostname().encode("utf-8"))])


def exact_batch_size(records: int) -> int:
    """A ``batch_size`` that closes a batch after exactly ``records`` records of 200 bytes (no key): the
    producer counts each record at its size bound and closes a batch that reaches ``batch_size``."""
    return HEADER_SIZE + records * record_bound(VALUE_BYTES, 1, len(host_header_bytes()))


class LumberTarget:
    def __init__(self, name: str, cluster: Any, batch: int, broker_id: int) -> None:
        self.name = name
        self.batch = batch
        self._cluster = cluster
        self._broker = cluster.brokers[broker_id]
        self._servers = [self._broker.address]
        self.batch_sizes_seen: Counter[int] = Counter()

    def topic(self, round_number: int) -> str:
        return f"paper-b{self.batch}-r{round_number}"

    def _server_cpu(self) -> float:
        return cpu_seconds(self._broker.popen.pid)

    def produce(self, round_number: int, values: list[bytes], meter: Meter) -> PhaseRun:
        topic = self.topic(round_number)
        self._cluster.create_topic(topic, 1, assignment={0: [self._broker.broker_id]})
        tp = TopicPartition(topic, 0)
        config = ProducerConfig(
            bootstrap_servers=self._servers,
            acks="0",
            enable_idempotence=False,
            linger_ms=0 if self.batch == 1 else 5,
            batch_size=exact_batch_size(self.batch),
        )
        n = len(values)
        step = meter.step
        with (
            Producer(config) as producer,
            # no assignment: it only asks for end offsets (an assigned consumer would also prefetch)
            Consumer(ConsumerConfig(bootstrap_servers=self._servers)) as offsets,
        ):
            producer.partitions_for(topic)
            offsets.end_offsets([tp])
            if self.batch == 1:
                chunks = [values[i : i + step] for i in range(0, n, step)]
            else:
                chunks = [
                    [values[j : j + self.batch] for j in range(i, min(n, i + step), self.batch)]
                    for i in range(0, n, step)
                ]
            folder = self.data_dir(round_number)
            probe = BrokerProbe(lambda: float(sum(f.stat().st_size for f in folder.glob("*.log"))))
            cpu0, server0 = own_cpu_seconds(), self._server_cpu()
            meter.start()
            probe.start(meter.started)
            done = 0
            if self.batch == 1:
                send = producer.send
                for chunk in chunks:
                    for value in chunk:
                        send(topic, value, partition=0)
                    done += len(chunk)
                    meter.update(done)
            else:
                send_many = producer.send_many
                for group in chunks:
                    for batch in group:
                        send_many(topic, batch, partition=0)
                        done += len(batch)
                    meter.update(done)
            producer.flush()
            handed = time.perf_counter() - meter.started
            wait_for(lambda: offsets.end_offsets([tp])[tp] >= n, f"Lumber to expose {n} messages of {topic}")
            seconds = time.perf_counter() - meter.started
            cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        meter.update(n)
        return PhaseRun(n, seconds, handed, cpu1 - cpu0, server1 - server0, probe.samples(n, seconds))

    def consume(self, round_number: int, count: int, meter: Meter) -> PhaseRun:
        topic = self.topic(round_number)
        tp = TopicPartition(topic, 0)
        config = ConsumerConfig(
            bootstrap_servers=self._servers,
            auto_offset_reset="smallest",
            max_partition_fetch_bytes=PREFETCH_BYTES,
            max_prefetch_bytes=PREFETCH_BYTES,
        )
        with Consumer(config, partitions=[tp]) as consumer:
            consumer.seek(tp, 0)
            consumer.end_offsets([tp])  # connected and ready before the clock starts
            sizes: Counter[int] = Counter()
            seen = 0
            next_update = meter.step
            deadline = time.monotonic() + PHASE_TIMEOUT_S
            cpu0, server0 = own_cpu_seconds(), self._server_cpu()
            meter.start()
            while seen < count:
                for chunk in consumer.poll_values(timeout_ms=1000):
                    seen += len(chunk.values)
                    sizes[len(chunk.values)] += 1
                if seen >= next_update:
                    meter.update(seen)
                    next_update = seen + meter.step
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Lumber: consumed {seen} of {count} messages of {topic}")
            seconds = time.perf_counter() - meter.started
            cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        if seen != count:
            raise RuntimeError(f"Lumber: consumed {seen} messages of {topic}, expected {count}")
        self.batch_sizes_seen.update(sizes)
        meter.update(seen)
        return PhaseRun(count, seconds, seconds, cpu1 - cpu0, server1 - server0, meter.samples)

    def data_dir(self, round_number: int) -> Path:
        return self._broker.log_dir / f"{self.topic(round_number)}-0"

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------------------------ RabbitMQ

QUEUE = "paper"
LATENCY_QUEUE = "paper-latency"


def rabbitmq_connection(port: int) -> Any:
    import pika  # noqa: PLC0415 - only the benchmark needs it

    params = pika.ConnectionParameters(
        LOOPBACK, port, heartbeat=0, blocked_connection_timeout=PHASE_TIMEOUT_S
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            return pika.BlockingConnection(params)
        except pika.exceptions.AMQPConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class RabbitMQTarget:
    name = RABBITMQ

    def __init__(self, server: RabbitMQServer) -> None:
        import pika  # noqa: PLC0415

        self._server = server
        self._connection = rabbitmq_connection(server.port)
        self._channel = self._connection.channel()
        self._channel.queue_declare(QUEUE, durable=True)
        self._channel.queue_purge(QUEUE)
        self._properties = pika.BasicProperties(delivery_mode=2)  # persistent
        # the probe's own connection: pika connections are not shared between threads
        self._probe_connection = rabbitmq_connection(server.port)
        self._probe_channel = self._probe_connection.channel()

    def _server_cpu(self) -> float:
        return cpu_seconds(self._server.beam_pid())

    def _queued(self) -> int:
        count: int = self._channel.queue_declare(QUEUE, durable=True, passive=True).method.message_count
        return count

    def produce(self, round_number: int, values: list[bytes], meter: Meter) -> PhaseRun:
        if self._queued():
            self._channel.queue_purge(QUEUE)
        n = len(values)
        step = meter.step
        chunks = [values[i : i + step] for i in range(0, n, step)]
        publish = self._channel.basic_publish
        properties = self._properties
        probe_channel = self._probe_channel
        probe = BrokerProbe(
            lambda: float(probe_channel.queue_declare(QUEUE, durable=True, passive=True).method.message_count)
        )
        cpu0, server0 = own_cpu_seconds(), self._server_cpu()
        meter.start()
        probe.start(meter.started)
        done = 0
        for chunk in chunks:
            for value in chunk:
                publish("", QUEUE, value, properties)
            done += len(chunk)
            meter.update(done)
        handed = time.perf_counter() - meter.started
        wait_for(lambda: self._queued() >= n, f"RabbitMQ's queue to hold {n} messages")
        seconds = time.perf_counter() - meter.started
        cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        return PhaseRun(n, seconds, handed, cpu1 - cpu0, server1 - server0, probe.samples(n, seconds))

    def consume(self, round_number: int, count: int, meter: Meter) -> PhaseRun:
        received = [0]

        def on_message(_channel: Any, _method: Any, _properties: Any, _body: bytes) -> None:
            received[0] += 1

        channel = self._channel
        channel.basic_qos(prefetch_count=PREFETCH_MESSAGES)
        process = self._connection.process_data_events
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        cpu0, server0 = own_cpu_seconds(), self._server_cpu()
        meter.start()
        tag = channel.basic_consume(QUEUE, on_message, auto_ack=True)
        next_update = meter.step
        while received[0] < count:
            process(time_limit=0.05)
            if received[0] >= next_update:
                meter.update(received[0])
                next_update = received[0] + meter.step
            if time.monotonic() > deadline:
                raise TimeoutError(f"RabbitMQ: consumed {received[0]} of {count} messages")
        seconds = time.perf_counter() - meter.started
        cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        channel.basic_cancel(tag)
        if received[0] != count:
            raise RuntimeError(f"RabbitMQ: consumed {received[0]} messages, expected {count}")
        meter.update(count)
        return PhaseRun(count, seconds, seconds, cpu1 - cpu0, server1 - server0, meter.samples)

    def data_dir(self, round_number: int) -> Path:
        return self._server.data_dir

    def close(self) -> None:
        for connection in (self._connection, self._probe_connection):
            with contextlib.suppress(Exception):
                connection.close()


# ------------------------------------------------------------------------------------------ ActiveMQ

DESTINATION = "/queue/paper"
LATENCY_DESTINATION = "/queue/paper-latency"


class _StompCounter:
    """stomp.py listener: counts messages, records receipts and errors (runs in stomp.py's thread)."""

    def __init__(self) -> None:
        self.count = 0
        self.receipts: set[str] = set()
        self.errors: list[str] = []
        self.changed = threading.Event()

    def on_message(self, frame: Any) -> None:
        self.count += 1

    def on_receipt(self, frame: Any) -> None:
        self.receipts.add(frame.headers.get("receipt-id", ""))
        self.changed.set()

    def on_error(self, frame: Any) -> None:
        self.errors.append(f"{frame.headers.get('message', '')} {frame.body!r}"[:300])
        self.changed.set()


def stomp_connection(port: int, listener: Any) -> Any:
    import stomp  # noqa: PLC0415

    connection = stomp.Connection12([(LOOPBACK, port)], heartbeats=(0, 0), auto_decode=False)
    connection.set_listener("bench", listener)
    connection.connect(wait=True)
    return connection


class ActiveMQTarget:
    name = ACTIVEMQ

    def __init__(self, server: ActiveMQServer) -> None:
        self._server = server
        self._listener = _StompCounter()
        self._connection = stomp_connection(server.port, self._listener)
        self._subscriptions = 0

    def _server_cpu(self) -> float:
        return cpu_seconds(self._server.pid)

    def _receipt(self, receipt: str) -> None:
        listener = self._listener
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while receipt not in listener.receipts:
            if listener.errors:
                raise PeerError(f"ActiveMQ: {listener.errors[0]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ActiveMQ did not answer receipt {receipt}")
            listener.changed.wait(0.05)
            listener.changed.clear()

    def produce(self, round_number: int, values: list[bytes], meter: Meter) -> PhaseRun:
        n = len(values)
        step = meter.step
        chunks = [values[i : i + step] for i in range(0, n, step)]
        send = self._connection.send
        headers = {"persistent": "true"}
        folder = self._server.data_dir
        probe = BrokerProbe(lambda: float(sum(f.stat().st_blocks for f in folder.glob("db-*.log"))))
        cpu0, server0 = own_cpu_seconds(), self._server_cpu()
        meter.start()
        probe.start(meter.started)
        done = 0
        for chunk in chunks[:-1]:
            for value in chunk:
                send(DESTINATION, value, headers=headers)
            done += len(chunk)
            meter.update(done)
        last = chunks[-1]
        for value in last[:-1]:
            send(DESTINATION, value, headers=headers)
        receipt = f"produced-{round_number}"
        send(DESTINATION, last[-1], headers={"persistent": "true", "receipt": receipt})
        handed = time.perf_counter() - meter.started
        self._receipt(receipt)  # frames are handled in order: every message before it is in the store
        seconds = time.perf_counter() - meter.started
        cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        meter.update(n)
        return PhaseRun(n, seconds, handed, cpu1 - cpu0, server1 - server0, probe.samples(n, seconds))

    def consume(self, round_number: int, count: int, meter: Meter) -> PhaseRun:
        listener = self._listener
        listener.count = 0
        self._subscriptions += 1
        subscription = f"paper-{self._subscriptions}"
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        cpu0, server0 = own_cpu_seconds(), self._server_cpu()
        meter.start()
        self._connection.subscribe(
            DESTINATION,
            id=subscription,
            ack="auto",
            headers={"activemq.prefetchSize": str(PREFETCH_MESSAGES)},
        )
        while listener.count < count:
            time.sleep(0.005)
            meter.update(listener.count)
            if listener.errors:
                raise PeerError(f"ActiveMQ: {listener.errors[0]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ActiveMQ: consumed {listener.count} of {count} messages")
        seconds = time.perf_counter() - meter.started
        cpu1, server1 = own_cpu_seconds(), self._server_cpu()
        self._connection.unsubscribe(id=subscription)
        if listener.count != count:
            raise RuntimeError(f"ActiveMQ: consumed {listener.count} messages, expected {count}")
        return PhaseRun(count, seconds, seconds, cpu1 - cpu0, server1 - server0, meter.samples)

    def data_dir(self, round_number: int) -> Path:
        return self._server.data_dir

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.disconnect()


# ------------------------------------------------------------------------------------------- latency


def latency_consumer(
    kind: str, address: dict[str, Any], expected: int, stop: Any, ready: Any, results: Connection
) -> None:
    """Child process: receive stamped messages until ``expected`` arrived or ``stop`` is set (or an hour
    passed), then send back (stamp, latency) pairs in ns, flattened (latency: receive time minus stamp)."""
    latencies = array("q")
    try:
        if kind == "lumber":
            _latency_lumber(address, expected, stop, ready, latencies)
        elif kind == "rabbitmq":
            _latency_rabbitmq(address, expected, stop, ready, latencies)
        else:
            _latency_activemq(address, expected, stop, ready, latencies)
        results.send(("ok", latencies.tobytes()))
    except Exception as exc:
        ready.set()
        results.send(("error", f"{type(exc).__name__}: {exc}"))


def _receiving(out: array[int], expected: int, stop: Any) -> Callable[[], bool]:
    deadline = time.monotonic() + 3600

    def more() -> bool:
        return len(out) < 2 * expected and not stop.is_set() and time.monotonic() < deadline

    return more


def _latency_lumber(address: dict[str, Any], expected: int, stop: Any, ready: Any, out: array[int]) -> None:
    tp = TopicPartition(address["topic"], 0)
    config = ConsumerConfig(
        bootstrap_servers=[address["server"]],
        max_partition_fetch_bytes=PREFETCH_BYTES,
        max_prefetch_bytes=PREFETCH_BYTES,
        fetch_max_wait_ms=100,
    )
    with Consumer(config, partitions=[tp]) as consumer:
        consumer.seek(tp, 0)
        consumer.end_offsets([tp])
        ready.set()
        now_ns = time.monotonic_ns
        more = _receiving(out, expected, stop)
        while more():
            chunks = consumer.poll_values(timeout_ms=100)
            now = now_ns()
            for chunk in chunks:
                for value in chunk.values:
                    stamp = int(value[:16], 16)  # type: ignore[index]
                    out.append(stamp)
                    out.append(now - stamp)


def _latency_rabbitmq(address: dict[str, Any], expected: int, stop: Any, ready: Any, out: array[int]) -> None:
    connection = rabbitmq_connection(address["port"])
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=PREFETCH_MESSAGES)
        now_ns = time.monotonic_ns

        def on_message(_channel: Any, _method: Any, _properties: Any, body: bytes) -> None:
            stamp = int(body[:16], 16)
            out.append(stamp)
            out.append(now_ns() - stamp)

        channel.basic_consume(LATENCY_QUEUE, on_message, auto_ack=True)
        ready.set()
        more = _receiving(out, expected, stop)
        while more():
            connection.process_data_events(time_limit=0.05)
    finally:
        connection.close()


class _StompLatency:
    def __init__(self, out: array[int]) -> None:
        self.out = out
        self.now_ns = time.monotonic_ns

    def on_message(self, frame: Any) -> None:
        stamp = int(frame.body[:16], 16)
        self.out.append(stamp)
        self.out.append(self.now_ns() - stamp)


def _latency_activemq(address: dict[str, Any], expected: int, stop: Any, ready: Any, out: array[int]) -> None:
    connection = stomp_connection(address["port"], _StompLatency(out))
    try:
        connection.subscribe(
            LATENCY_DESTINATION,
            id="latency",
            ack="auto",
            headers={"activemq.prefetchSize": str(PREFETCH_MESSAGES)},
        )
        time.sleep(0.5)  # let the broker register the subscription before the producer starts
        ready.set()
        more = _receiving(out, expected, stop)
        while more():
            time.sleep(0.01)
    finally:
        connection.disconnect()


@dataclass
class LatencySetup:
    system: str
    kind: str
    address: dict[str, Any]
    #: sends a list of values; called with the messages due (one at a time for the peers)
    send: Callable[[list[bytes]], None]
    finish: Callable[[], None]
    close: Callable[[], None]
    max_chunk: int


def paced_send(setup: LatencySetup, rate: int, total: int) -> tuple[int, int, float, bool]:
    """Send ``total`` stamped messages at ``rate`` msg/s, each stamped with its scheduled time (so that a
    producer falling behind shows as latency); returns (schedule start in ns, sent, seconds until the last
    hand-over, whether it fell more than ``MAX_BEHIND_S`` behind and stopped)."""
    interval_ns = 1e9 / rate
    start_ns = time.monotonic_ns() + 20_000_000
    now_ns = time.monotonic_ns
    sent = 0
    send = setup.send
    max_chunk = setup.max_chunk
    while sent < total:
        now = now_ns()
        due = min(total, int((now - start_ns) / interval_ns) + 1) if now >= start_ns else 0
        if due <= sent:
            time.sleep(max(0.0, (start_ns + sent * interval_ns - now) / 1e9))
            continue
        if now - (start_ns + sent * interval_ns) > MAX_BEHIND_S * 1e9:
            return start_ns, sent, (now - start_ns) / 1e9, True
        n = min(due - sent, max_chunk)
        send([stamped(int(start_ns + (sent + k) * interval_ns)) for k in range(n)])
        sent += n
    elapsed = (now_ns() - start_ns) / 1e9
    setup.finish()
    return start_ns, sent, elapsed, False


def run_latency(setup: LatencySetup, rate: int, seconds: float) -> LatencyResult:
    """``seconds`` of measured traffic at ``rate`` plus ``LATENCY_TAIL_S`` of unmeasured traffic after it;
    the latencies are those of the messages scheduled inside the window."""
    import numpy as np  # noqa: PLC0415

    result = LatencyResult(setup.system, rate)
    measured = int(rate * seconds)
    total = measured + int(rate * LATENCY_TAIL_S)
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=latency_consumer, args=(setup.kind, setup.address, total, stop, ready, sender), daemon=True
    )
    child.start()
    try:
        if not ready.wait(60):
            raise TimeoutError(f"{setup.system}: the latency consumer did not start within 60 s")
        start_ns, sent, elapsed, behind = paced_send(setup, rate, total)
        result.sent = min(sent, measured)
        result.achieved_rate = sent / elapsed if elapsed > 0 else 0.0
        if not receiver.poll(2.0 if behind else LATENCY_GRACE_S):
            stop.set()  # whatever has not arrived by now counts as not delivered in time
        if not receiver.poll(30):
            raise TimeoutError(f"{setup.system}: no result from the latency consumer")
        answer = receiver.recv()
    finally:
        stop.set()
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)
        receiver.close()
        sender.close()
    if answer[0] != "ok":
        raise RuntimeError(f"{setup.system}: the latency consumer failed: {answer[1]}")
    pairs = np.frombuffer(answer[1], dtype=np.int64).reshape(-1, 2)
    window_end_ns = start_ns + int(measured * 1e9 / rate)
    window = pairs[pairs[:, 0] < window_end_ns]
    latencies = window[np.argsort(window[:, 0], kind="stable"), 1]
    result.received = len(latencies)
    if len(latencies):
        result.p50_ms = float(np.percentile(latencies, 50)) / 1e6
        result.p99_ms = float(np.percentile(latencies, 99)) / 1e6
        result.max_ms = float(latencies.max()) / 1e6
        fifth = max(1, len(latencies) // 5)
        result.growth_ms = float(np.median(latencies[-fifth:]) - np.median(latencies[:fifth])) / 1e6
    kept_up = result.achieved_rate >= SUSTAINED_FRACTION * rate
    steady = result.growth_ms is not None and result.growth_ms <= MAX_LATENCY_GROWTH_MS
    result.sustained = not behind and kept_up and steady and result.received == measured
    if behind:
        result.verdict = (
            f"not sustained: the producer fell {MAX_BEHIND_S:.0f} s behind schedule after {sent:,} messages"
        )
    elif result.received < measured:
        result.verdict = (
            f"not sustained: {result.received:,} of {measured:,} received within {LATENCY_GRACE_S:.0f} s"
        )
    elif not kept_up:
        result.verdict = f"not sustained: the producer reached {result.achieved_rate / rate:.0%} of the rate"
    elif not steady:
        result.verdict = (
            f"not sustained: latency grew by {result.growth_ms:,.0f} ms over the window "
            "(the consumer falls behind)"
        )
    else:
        result.verdict = f"sustained ({measured:,} messages measured)"
    return result


def lumber_latency_setup(system: str, cluster: Any, broker_id: int, rate: int) -> LatencySetup:
    topic = f"paper-latency-{broker_id}-{rate}"
    cluster.create_topic(topic, 1, assignment={0: [broker_id]})
    server = cluster.brokers[broker_id].address
    producer = Producer(
        ProducerConfig(bootstrap_servers=[server], acks="0", enable_idempotence=False, linger_ms=5)
    )
    producer.partitions_for(topic)

    def send(values: list[bytes]) -> None:
        producer.send_many(topic, values, partition=0)

    return LatencySetup(
        system, "lumber", {"server": server, "topic": topic}, send, producer.flush, producer.close, 50
    )


def rabbitmq_latency_setup(server: RabbitMQServer) -> LatencySetup:
    import pika  # noqa: PLC0415

    connection = rabbitmq_connection(server.port)
    channel = connection.channel()
    channel.queue_declare(LATENCY_QUEUE, durable=True)
    channel.queue_purge(LATENCY_QUEUE)
    properties = pika.BasicProperties(delivery_mode=2)
    publish = channel.basic_publish

    def send(values: list[bytes]) -> None:
        for value in values:
            publish("", LATENCY_QUEUE, value, properties)

    return LatencySetup(
        RABBITMQ,
        "rabbitmq",
        {"port": server.port},
        send,
        lambda: connection.process_data_events(0),
        connection.close,
        1,
    )


def activemq_latency_setup(server: ActiveMQServer) -> LatencySetup:
    connection = stomp_connection(server.port, _StompCounter())
    headers = {"persistent": "true"}

    def send(values: list[bytes]) -> None:
        for value in values:
            connection.send(LATENCY_DESTINATION, value, headers=headers)

    return LatencySetup(
        ACTIVEMQ, "activemq", {"port": server.port}, send, lambda: None, connection.disconnect, 1
    )


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


@dataclass
class Report:
    command: str
    started: str
    messages: int
    rounds: int
    load_before: str
    load_after: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    systems: dict[str, SystemResult] = field(default_factory=dict)
    latency: list[LatencyResult] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    lumber_records_per_batch: dict[str, dict[int, int]] = field(default_factory=dict)
    #: produce at batch 50 with record validation against without, one line per codec (same run)
    validation: list[str] = field(default_factory=list)


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


def run_latencies(
    setups: dict[str, Callable[[int], LatencySetup]],
    args: argparse.Namespace,
    report: Report,
    progress: Progress,
    console: Console,
) -> None:
    """Every configuration at every rate; whether it keeps up is measured, not assumed."""
    for rate in args.rates:
        for system, make in setups.items():
            result = LatencyResult(system, rate)
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
            f"latency {rate:>7,} msg/s  {row.system:<44} p50 {_ms(row.p50_ms)} ms  p99 {_ms(row.p99_ms)} ms  "
            f"{row.verdict}"
        )
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        cost = validation_cost(cluster, 1, 3, codec, args.messages, args.rounds)
        report.validation.append(cost.line())
        console.print(f"validation cost: {cost.line()}")


# ------------------------------------------------------------------------------------------- output


def spread(runs: list[PhaseRun]) -> str:
    if not runs:
        return "-"
    rates = [r.rate for r in runs]
    return f"{median(rates):,.0f} [{min(rates):,.0f} - {max(rates):,.0f}]"


def cpu_per_message(runs: list[PhaseRun]) -> str:
    if not runs:
        return "-"
    client = median([r.client_cpu_s / r.messages * 1e6 for r in runs])
    server = median([r.server_cpu_s / r.messages * 1e6 for r in runs])
    return f"{client:.1f} + {server:.1f}"


def ratio_rows(report: Report) -> list[tuple[str, float | None, float | None, float, float]]:
    """(case, x RabbitMQ, x ActiveMQ, paper's msg/s, target x RabbitMQ)."""
    systems = report.systems

    def rate(name: str, phase: str) -> float | None:
        if name not in systems:
            return None
        runs = systems[name].produce if phase == "produce" else systems[name].consume
        return median([r.rate for r in runs]) if runs else None

    rows: list[tuple[str, float | None, float | None, float, float]] = []
    for case, ours, phase in (
        ("produce, batch 1", rate(LUMBER_B1, "produce"), "produce"),
        ("produce, batch 50", rate(LUMBER_B50, "produce"), "produce"),
        ("consume", rate(LUMBER_B50, "consume"), "consume"),
    ):
        peers = [rate(RABBITMQ, phase), rate(ACTIVEMQ, phase)]
        ratios = [ours / peer if ours and peer else None for peer in peers]
        rows.append((case, ratios[0], ratios[1], PAPER_MSGS[case], TARGETS[case]))
    return rows


def markdown(report: Report) -> str:
    lines = [
        (
            "| system | produce msg/s, median [min - max] | consume msg/s, median [min - max] "
            "| bytes on disk / msg (overhead) | CPU us/msg produce, client + server | consume |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in report.systems.values():
        disk = (
            f"{result.disk_bytes_per_message:,.1f} ({result.disk_bytes_per_message - VALUE_BYTES:+,.1f})"
            if result.disk_bytes_per_message is not None
            else "-"
        )
        lines.append(
            f"| {result.name} | {spread(result.produce)} | {spread(result.consume)} | {disk} "
            f"| {cpu_per_message(result.produce)} | {cpu_per_message(result.consume)} |"
        )
    lines += [
        "",
        (
            "| Lumber / peer | x RabbitMQ | x ActiveMQ | paper (Kafka msg/s; >= x both) "
            "| issue 9 target (x RabbitMQ) |"
        ),
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    paper_ratio = {"produce, batch 1": "2", "produce, batch 50": "2", "consume": "4"}
    for case, vs_rabbit, vs_active, paper, target in ratio_rows(report):
        lines.append(
            f"| {case} | {_x(vs_rabbit)} | {_x(vs_active)} | {paper:,} ({paper_ratio[case]}x) | {target:g}x |"
        )
    lines += [
        "",
        "| end-to-end latency | rate msg/s | achieved msg/s | p50 ms | p99 ms | max ms | verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for lat in report.latency:
        lines.append(
            f"| {lat.system} | {lat.rate:,} | {lat.achieved_rate:,.0f} | {_ms(lat.p50_ms)} "
            f"| {_ms(lat.p99_ms)} | {_ms(lat.max_ms)} | {lat.verdict} |"
        )
    lines += ["", *(f"- validation cost: {line}" for line in report.validation)]
    lines += ["", *limit_lines(report), ""]
    for result in report.systems.values():
        if result.disk_by_kind:
            kinds = ", ".join(f"`{kind}` {size:,.1f}" for kind, size in result.disk_by_kind.items())
            lines.append(f"- {result.name}, bytes on disk per message by file kind: {kinds}")
        lines.extend(f"- {result.name}: {note}" for note in result.notes)
        lines.extend(f"- {result.name} FAILED {failure}" for failure in result.failures)
    return "\n".join(lines)


def limit_lines(report: Report) -> list[str]:
    lines = [
        (
            "| limit (same run) | raw MB/s, median [min - max] | Lumber MB/s (on-disk bytes) "
            "| Lumber's fraction |"
        ),
        "| --- | ---: | ---: | ---: |",
    ]
    b50 = report.systems.get(LUMBER_B50)
    if b50 is None or b50.disk_bytes_per_message is None:
        return lines
    per_message = b50.disk_bytes_per_message
    for label, raw, runs in (
        ("file append (`os.write`, 1 MiB) vs producing at batch 50", report.limits.append_mbps, b50.produce),
        ("loopback `sendfile` (1 MiB) vs consuming", report.limits.sendfile_mbps, b50.consume),
    ):
        if not raw or not runs:
            continue
        ours = median([r.rate for r in runs]) * per_message / MB
        lines.append(
            f"| {label} | {median(raw):,.0f} [{min(raw):,.0f} - {max(raw):,.0f}] | {ours:,.1f} "
            f"| {ours / median(raw):.3f} |"
        )
    return lines


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_tables(report: Report, console: Console) -> None:
    table = Table(title=f"{report.messages:,} messages of {VALUE_BYTES} bytes, {report.rounds} rounds")
    for column in (
        "system",
        "produce msg/s, median \\[min - max]",  # \\[: not rich markup
        "consume msg/s",
        "disk B/msg",
        "CPU us/msg produce (client + server)",
        "consume",
    ):
        table.add_column(column, justify="left" if column == "system" else "right")
    for result in report.systems.values():
        disk = f"{result.disk_bytes_per_message:,.1f}" if result.disk_bytes_per_message is not None else "-"
        table.add_row(
            result.name,
            spread(result.produce),
            spread(result.consume),
            disk,
            cpu_per_message(result.produce),
            cpu_per_message(result.consume),
        )
    console.print(table)
    ratios = Table(title="Lumber / peer")
    for column in ("case", "x RabbitMQ", "x ActiveMQ", "target x RabbitMQ", "met?"):
        ratios.add_column(column)
    for case, vs_rabbit, vs_active, _paper, target in ratio_rows(report):
        met = "-" if vs_rabbit is None else ("yes" if vs_rabbit >= target else "no")
        ratios.add_row(case, _x(vs_rabbit), _x(vs_active), f"{target:g}x", met)
    b50 = report.systems.get(LUMBER_B50)
    if b50 is not None and b50.disk_bytes_per_message is not None:
        overhead = b50.disk_bytes_per_message - VALUE_BYTES
        ratios.add_row(
            "overhead bytes/msg, batch 50",
            f"{overhead:.1f}",
            "",
            f"<= {TARGET_OVERHEAD_BYTES:g}",
            "yes" if overhead <= TARGET_OVERHEAD_BYTES else "no",
        )
    console.print(ratios)
    print()
    print(markdown(report), flush=True)


def median_run(runs: list[PhaseRun]) -> PhaseRun:
    return sorted(runs, key=lambda r: r.rate)[len(runs) // 2]


def write_json(report: Report, path: Path) -> None:
    """Every figure of the run; progress samples only for the median runs (the chart's), one line each."""
    data = asdict(report)
    inline: dict[str, str] = {}
    for name, result in report.systems.items():
        for phase in ("produce", "consume"):
            runs: list[PhaseRun] = getattr(result, phase)
            for index, run in enumerate(runs):
                entry = data["systems"][name][phase][index]
                entry["rate"] = round(run.rate, 1)
                if run is median_run(runs):
                    key = f"@samples-{len(inline)}@"
                    inline[key] = json.dumps(
                        [[round(t, 4), n] for t, n in run.samples], separators=(",", ":")
                    )
                    entry["samples"] = key
                else:
                    del entry["samples"]
    text = json.dumps(data, indent=1, default=str)
    for key, samples in inline.items():
        text = text.replace(f'"{key}"', samples)
    path.write_text(text + "\n")


def draw_chart(report: Report, path: Path) -> None:
    """Throughput against data sent, producer and consumer (the paper's Figures 4 and 5), median runs."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for axis, phase, title in (
        (axes[0], "produce", "Producer performance (cf. paper Figure 4)"),
        (axes[1], "consume", "Consumer performance (cf. paper Figure 5)"),
    ):
        for result in report.systems.values():
            runs = result.produce if phase == "produce" else result.consume
            if not runs:
                continue
            run = median_run(runs)
            xs, ys = windowed_rates(run.samples)
            if xs:
                axis.plot(xs, ys, marker=".", markersize=3, label=f"{result.name} ({run.rate:,.0f} msg/s)")
        axis.set_yscale("log")
        axis.set_xlabel(
            f"MB {'received by the broker' if phase == 'produce' else 'consumed'} "
            f"({VALUE_BYTES}-byte messages)"
        )
        axis.set_ylabel("throughput (messages/s)")
        axis.set_title(title)
        axis.grid(visible=True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(
        f"Lumber vs RabbitMQ vs ActiveMQ, {report.messages:,} messages, {report.started}", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def windowed_rates(samples: list[tuple[float, int]], windows: int = 25) -> tuple[list[float], list[float]]:
    """(MB done, msg/s over the window ending there) for about ``windows`` equal windows of messages."""
    if len(samples) < 2:
        return [], []
    total = samples[-1][1]
    step = max(1, total // windows)
    xs: list[float] = []
    ys: list[float] = []
    last_t, last_n = samples[0]
    for t, n in samples[1:]:
        if n - last_n >= step or n == total:
            if t > last_t and n > last_n:
                xs.append(n * VALUE_BYTES / MB)
                ys.append((n - last_n) / (t - last_t))
            last_t, last_n = t, n
    return xs, ys


# -------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setup", action="store_true", help="install the peers if missing, then exit")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20,000 messages, 1.5 s latency runs")
    parser.add_argument("--messages", type=int, default=None, help="messages per run (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median counts (default 3)")
    parser.add_argument("--rates", default="10000,100000", help="latency rates, msg/s (default 10000,100000)")
    parser.add_argument("--latency-seconds", type=float, default=None, help="traffic per latency run (5)")
    parser.add_argument("--raw-mb", type=int, default=None, help="MiB per raw-limit round (default 512)")
    parser.add_argument(
        "--systems",
        default="lumber,rabbitmq,activemq",
        help="comma-separated subset of lumber,rabbitmq,activemq",
    )
    parser.add_argument(
        "--out-dir", type=Path, default=REPO / "bench" / "results", help="paper.json, paper.png"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.messages is None:
        args.messages = 20_000 if args.quick else 200_000
    if args.latency_seconds is None:
        args.latency_seconds = 1.5 if args.quick else 5.0
    if args.raw_mb is None:
        args.raw_mb = 64 if args.quick else 512
    args.rates = [int(r) for r in args.rates.split(",") if r]
    args.systems = {s.strip() for s in args.systems.split(",") if s.strip()}
    unknown = args.systems - {"lumber", "rabbitmq", "activemq"}
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.messages % 50:
        parser.error("--messages must be a multiple of 50 (batch 50)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
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
            if "lumber" in args.systems:
                cluster = stack.enter_context(
                    bench_cluster(
                        scratch / "lumber", flush_messages=LUMBER_FLUSH_MESSAGES, flush_ms=LUMBER_FLUSH_MS
                    )
                )
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
            if "rabbitmq" in args.systems:
                rabbit = stack.enter_context(RabbitMQServer(scratch / "rabbitmq"))
                targets.append(RabbitMQTarget(rabbit))
            if "activemq" in args.systems:
                active = stack.enter_context(ActiveMQServer(scratch / "activemq"))
                targets.append(ActiveMQTarget(active))
            progress.remove_task(task)
            for target in targets:
                report.systems[target.name] = SystemResult(target.name)

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
            if cluster is not None:
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
            if cluster is not None:
                run_acks_and_validation(cluster, args, report, console)
            report.load_after = load_note()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    console.print(f"machine: before {report.load_before}; after {report.load_after}")
    print_tables(report, console)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(report, args.out_dir / "paper.json")
    draw_chart(report, args.out_dir / "paper.png")
    console.print(f"wrote {args.out_dir / 'paper.json'} and {args.out_dir / 'paper.png'}")
    return 1 if any(result.failures for result in report.systems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
