"""The idempotent producer end to end (KIP-98): Lumber's producer, confluent-kafka and kafka-python against
real broker processes, through kill -9 and SIGSTOP of the broker: every acknowledged record is stored
exactly once, at the offset it was acknowledged with."""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from broker.client.errors import BrokerResponseError
from broker.client.producer.producer_batch import RecordMetadata
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import consumer, producer, read_batches, read_records
from tests.broker.server.helpers import connect, produce
from tests.broker.server.test_idempotent_produce import idempotent_batch
from tests.support.broker_cluster import KILL_LOOP_SESSION_TIMEOUT_MS, servers
from tests.support.sigstop import pause, resume

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    from confluent_kafka import Producer as ConfluentProducer

PARTITIONS = 3
KILL_ROUNDS = 10


def read_all(cluster: Any, topic: str, count: int) -> list[Any]:
    """Every record of ``topic``'s partitions, once ``count`` are there (fails if fewer arrive)."""
    with consumer(cluster, *(TopicPartition(topic, p) for p in range(PARTITIONS))) as c:
        records = read_records(c, count, timeout_s=60)
        # nothing more than that: a short poll finds no further record
        extra = c.poll(timeout_ms=500)
    return records + list(extra)


def check_exactly_once(
    records: list[Any], acknowledged: dict[bytes, tuple[int, int]], sent: int
) -> Counter[bytes]:
    """0 lost, 0 duplicated: each acknowledged value once, at its acknowledged partition and offset."""
    counts = Counter(r.value for r in records)
    duplicated = {v: n for v, n in counts.items() if n > 1}
    assert duplicated == {}, f"{len(duplicated)} values stored more than once, e.g. {list(duplicated)[:5]}"
    where = {r.value: (r.partition, r.offset) for r in records}
    lost = [v for v in acknowledged if v not in where]
    assert lost == [], f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    moved = {v: (acknowledged[v], where[v]) for v in acknowledged if acknowledged[v] != where[v]}
    assert moved == {}, (
        f"{len(moved)} records stored elsewhere than acknowledged, e.g. {list(moved.items())[:5]}"
    )
    assert set(counts) <= {b"v%07d" % i for i in range(sent)}
    return counts


def kill_rounds(cluster: Any, rounds: int, rng: random.Random, producing: Callable[[], bool]) -> None:
    """kill -9 the broker ``rounds`` times, each after 0.3-1.0 s of producing, restarting it each time."""
    broker = cluster.brokers[0]
    for _ in range(rounds):
        time.sleep(rng.uniform(0.3, 1.0))
        assert producing(), "the producer stopped before the kill rounds ended"
        broker.kill()
        broker.start()


@pytest.mark.slow
def test_lumber_producer_through_ten_kill_9s_stores_every_acknowledged_record_once(
    start_cluster: Callable[..., Any],
) -> None:
    cluster = start_cluster(1, session_timeout_ms=KILL_LOOP_SESSION_TIMEOUT_MS)  # each restart waits one out
    cluster.create_topic("idem", PARTITIONS)
    acknowledged: dict[bytes, tuple[int, int]] = {}
    failed: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()
    sent = 0

    def on_delivery(value: bytes) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            with lock:
                if metadata is not None:
                    acknowledged[value] = (metadata.partition, metadata.offset)
                elif error is not None:
                    failed.append(error)

        return done

    with producer(
        cluster, linger_ms=2, retry_backoff_ms=50, request_timeout_ms=3_000, delivery_timeout_ms=110_000
    ) as p:

        def produce() -> None:
            nonlocal sent
            while not stop.is_set():
                value = b"v%07d" % sent
                p.send("idem", value, on_delivery=on_delivery(value))
                sent += 1
                if sent % 20 == 0:
                    time.sleep(0.005)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        try:
            kill_rounds(cluster, KILL_ROUNDS, random.Random(16), thread.is_alive)
        finally:
            stop.set()
            thread.join(10)
        p.flush(120)
    assert failed == []
    assert len(acknowledged) == sent
    counts = check_exactly_once(read_all(cluster, "idem", sent), acknowledged, sent)
    assert sum(counts.values()) == sent
    assert sent > 2000


@pytest.mark.slow
@pytest.mark.interop
def test_confluent_kafka_through_ten_kill_9s_stores_every_acknowledged_record_once(
    start_cluster: Callable[..., Any],
) -> None:
    cluster = start_cluster(1, session_timeout_ms=KILL_LOOP_SESSION_TIMEOUT_MS)  # each restart waits one out
    cluster.create_topic("idem", PARTITIONS)
    acknowledged: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []
    fatal: list[str] = []
    stop = threading.Event()
    sent = 0

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged[message.value()] = (message.partition(), message.offset())

    p = ConfluentProducer(
        {
            "bootstrap.servers": ",".join(servers(cluster)),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 110_000,
            "retry.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
            "error_cb": lambda error: fatal.append(str(error)) if error.fatal() else None,
        }
    )

    def produce() -> None:
        nonlocal sent
        while not stop.is_set():
            value = b"v%07d" % sent
            try:
                p.produce("idem", value, partition=sent % PARTITIONS, on_delivery=delivered)
            except BufferError:
                p.poll(0.05)
                continue
            sent += 1
            if sent % 20 == 0:
                p.poll(0.005)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        kill_rounds(cluster, KILL_ROUNDS, random.Random(17), thread.is_alive)
    finally:
        stop.set()
        thread.join(10)
    assert p.flush(120) == 0
    assert fatal == []
    assert errors == []
    assert len(acknowledged) == sent
    counts = check_exactly_once(read_all(cluster, "idem", sent), acknowledged, sent)
    assert sum(counts.values()) == sent
    assert sent > 2000


@pytest.mark.interop
def test_kafka_python_idempotent_by_default_gets_exact_offsets_and_no_duplicate_on_a_retry(
    broker_cluster: Any,
) -> None:
    """kafka-python is idempotent by default: the broker hands it a producer id; a request that times out
    (the broker is SIGSTOPped longer than ``request_timeout_ms``) is retried with the same sequence, and
    the broker, resumed, answers the retry with the original offsets instead of appending it again."""
    broker_cluster.create_topic("kp", 1)
    p = kafka.KafkaProducer(
        bootstrap_servers=servers(broker_cluster),
        acks="all",
        linger_ms=0,
        request_timeout_ms=1_500,
        retry_backoff_ms=100,
        max_in_flight_requests_per_connection=1,
    )
    try:
        first = [p.send("kp", b"first-%d" % i, partition=0) for i in range(5)]
        p.flush(20)
        assert [f.get(1).offset for f in first] == [0, 1, 2, 3, 4]
        broker = broker_cluster.brokers[0]
        pid = broker.popen.pid
        pause(pid)
        try:
            retried = p.send("kp", b"retried", partition=0)
            time.sleep(3.5)  # past request_timeout_ms: kafka-python gives up on the request, retries
        finally:
            resume(pid)
        assert retried.get(30).offset == 5
        # the retry really reached the broker, which recognised it
        assert "were appended at offsets [5, 5]: not appended again" in broker.log()
        last = p.send("kp", b"last", partition=0)
        assert last.get(30).offset == 6
    finally:
        p.close(10)
    with consumer(broker_cluster, TopicPartition("kp", 0)) as c:
        batches = read_batches(c, 7)
        c.seek(TopicPartition("kp", 0), 0)
        records = read_records(c, 7)
        assert c.poll(timeout_ms=500) == []
    assert [(r.offset, r.value) for r in records] == [(i, b"first-%d" % i) for i in range(5)] + [
        (5, b"retried"),
        (6, b"last"),
    ]
    producer_ids = {b.batch.producer_id for b in batches}
    assert len(producer_ids) == 1
    assert min(producer_ids) >= 0
    sequences = [(b.base_offset, b.batch.base_sequence, b.record_count) for b in batches]
    assert [s[1] for s in sequences] == [
        s[0] for s in sequences
    ]  # one producer from sequence 0: seq = offset


def test_a_fenced_lumber_producer_fails_the_batch_clearly_and_goes_on_with_a_new_producer_id(
    broker_cluster: Any,
) -> None:
    broker_cluster.create_topic("fence", 1)
    tp = TopicPartition("fence", 0)
    with producer(broker_cluster) as p:
        assert p.send("fence", b"a", partition=0).result(10).offset == 0
        with consumer(broker_cluster, tp) as c:
            (first,) = read_batches(c, 1)
        pid = first.batch.producer_id
        assert (pid, first.batch.producer_epoch, first.batch.base_sequence) == (pid, 0, 0)
        # another producer with the same id and a newer epoch fences this one
        conn = connect(broker_cluster.brokers[0])
        try:
            assert produce(conn, "fence", 0, idempotent_batch(pid, 1, 0, 1), acks=-1).base_offset == 1
        finally:
            conn.close()
        fenced = p.send("fence", b"b", partition=0)
        with pytest.raises(
            BrokerResponseError,
            match=rf"INVALID_PRODUCER_EPOCH \(error code 47\) \(.*epoch 0, smaller than the last seen epoch 1"
            rf".*the broker refused producer id {pid} epoch 0 sequences from 1, so these records were not "
            "stored: the batch fails and the producer goes on with a new producer id",
        ):
            fenced.result(10)
        assert p.send("fence", b"c", partition=0).result(10).offset == 2
    with consumer(broker_cluster, tp) as c:
        batches = read_batches(c, 3)
    ids = [
        (b.base_offset, b.batch.producer_id, b.batch.producer_epoch, b.batch.base_sequence) for b in batches
    ]
    assert ids[:2] == [(0, pid, 0, 0), (1, pid, 1, 0)]
    assert ids[2][0] == 2
    assert ids[2][1] not in (pid, -1)
    assert ids[2][2:] == (0, 0)  # a new id starts at epoch 0, sequence 0
