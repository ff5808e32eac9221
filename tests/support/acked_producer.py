"""The replicated tests' load and checks (tests/broker/server/test_replication*.py,
test_partition_reassigner.py, tests/lumber/cli): short ISR lag settings (``REPLICATION``), an idempotent
acks=all producer on a thread that remembers where each acknowledged record went (``AckedProducer``), and the
checks that every acknowledged record comes back in order and that the replicas' segments are
byte-identical."""

from __future__ import annotations

import threading
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from broker.cluster.partition_state import PartitionState
from tests.support.broker_cluster import BROKER_SESSION_TIMEOUT_MS, BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentPartition


#: Short lag and fetch waits, so that ISR changes happen within a test's patience.
REPLICATION = {
    "replica_lag_time_max_ms": 3000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
}


class AckedProducer:
    """An idempotent acks=all confluent-kafka producer on a thread, remembering each acknowledged value
    with its partition and offset.

    The offset is None when librdkafka acknowledged the record without one: a request whose answer left
    its persistence uncertain (its records queued again for a retry) is followed by a success of the next
    request, which proves the earlier records were appended, and librdkafka reports them delivered then,
    with no offset (``rd_kafka_dr_implicit_ack``: "implicitly acked by subsequent batch success")."""

    def __init__(
        self,
        cluster: BrokerCluster,
        topic: str,
        partitions: int,
        *,
        idempotent: bool = True,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acknowledged: dict[bytes, tuple[int, int | None]] = {}
        self.errors: list[str] = []
        self.fatal: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = ConfluentProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": lambda error: self.fatal.append(str(error)) if error.fatal() else None,
                **(settings or {}),
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acknowledged[message.value()] = (message.partition(), message.offset())

    def _run(self) -> None:
        p = self._producer
        while not self._stop.is_set():
            value = b"v%07d" % self.sent
            try:
                p.produce(
                    self.topic, value, partition=self.sent % self.partitions, on_delivery=self._delivered
                )
            except BufferError:
                p.poll(0.05)
                continue
            self.sent += 1
            if self.sent % 20 == 0:
                p.poll(0.005)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, flush_s: float = 120.0) -> int:
        """Stop producing; returns how many messages are still undelivered after the flush."""
        self._stop.set()
        self._thread.join(10)
        return int(self._producer.flush(flush_s))


def read_partitions(
    cluster: BrokerCluster, topic: str, partitions: int, timeout_s: float = 60.0
) -> list[Any]:
    """Every record of ``topic`` below each partition's high watermark, with confluent-kafka."""
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "replication-test-reader",  # librdkafka needs one; offsets are never committed
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(ConfluentPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([ConfluentPartition(topic, p, 0) for p in range(partitions)])
        records: list[Any] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            assert time.monotonic() < deadline, (
                f"read {len(records)} records; partitions done: {sorted(done)}"
            )
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if offset >= ends[partition]:
                        done.add(partition)
                    continue
                raise AssertionError(f"consumer error: {error}")
            records.append(message)
            if offset + 1 >= ends[partition]:
                done.add(partition)
        return records
    finally:
        consumer.close()


def check_every_acknowledged_record(records: list[Any], load: AckedProducer, *, exactly_once: bool) -> None:
    """Every acknowledged value is read back at its acknowledged partition and offset (at its partition
    when librdkafka acknowledged it without an offset: :class:`AckedProducer`), and each partition holds
    its acknowledged values in the order they were produced; with ``exactly_once`` no value is stored
    twice."""
    counts = Counter(r.value() for r in records)
    if exactly_once:
        duplicated = {v: n for v, n in counts.items() if n > 1}
        assert duplicated == {}, f"{len(duplicated)} values stored twice, e.g. {list(duplicated)[:5]}"
    where = {r.value(): (r.partition(), r.offset()) for r in records}
    lost = sorted(v for v in load.acknowledged if v not in where)
    assert lost == [], f"{len(lost)} of {len(load.acknowledged)} acknowledged records lost, e.g. {lost[:5]}"
    moved = {
        v: (acked, where[v])
        for v, acked in load.acknowledged.items()
        if acked != where[v] and acked != (where[v][0], None)
    }
    assert moved == {}, (
        f"{len(moved)} records not where they were acknowledged, e.g. {list(moved.items())[:5]}"
    )
    for p in range(load.partitions):
        # the values are produced in increasing order, each partition's in turn
        stored = sorted((where[v][1], v) for v, (part, _offset) in load.acknowledged.items() if part == p)
        assert [v for _o, v in stored] == sorted(v for _o, v in stored), f"partition {p}: out of order"


def segment_bytes(log_dir: Path, topic: str, partition: int) -> bytes:
    """Every ``.log`` segment of the partition, concatenated in offset order."""
    folder = log_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(folder.glob("*.log")))


def wait_for_identical_replicas(
    cluster: BrokerCluster, topic: str, partition: int, timeout_s: float = 30.0
) -> bytes:
    """Wait until every replica's segments are byte-identical; returns them."""
    replicas = cluster.admin.describe_topic(topic)[partition]
    seen: list[int] = []

    def identical() -> bool:
        contents = [segment_bytes(cluster.brokers[r].log_dir, topic, partition) for r in replicas]
        seen[:] = [len(c) for c in contents]
        return len(set(contents)) == 1

    wait_for(
        identical,
        timeout_s,
        f"{topic}-{partition}'s replicas {list(replicas)} to hold the same bytes ({seen})",
    )
    return segment_bytes(cluster.brokers[replicas[0]].log_dir, topic, partition)


def new_leader(cluster: BrokerCluster, topic: str, partition: int, old: int) -> PartitionState:
    return cluster.wait_for_leader(
        topic, partition, lambda s: s.leader not in (-1, old), timeout_s=BROKER_SESSION_TIMEOUT_MS / 1000 + 15
    )
