"""The latency runs of the paper's Section 5 experiment (:mod:`bench.paper`): a paced producer stamps each
message with its scheduled send time; a consumer in a child process (``spawn``) records receive time
minus stamp, for Lumber, RabbitMQ and ActiveMQ; :mod:`bench.latency_verdict` judges each run."""

from __future__ import annotations

import multiprocessing
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench.latency_verdict import MAX_BEHIND_S, judge
from bench.paper_common import (
    ACTIVEMQ,
    LATENCY_GRACE_S,
    LATENCY_TAIL_S,
    PREFETCH_BYTES,
    PREFETCH_MESSAGES,
    RABBITMQ,
    LatencyResult,
    stamped,
)
from bench.paper_targets import (
    LATENCY_DESTINATION,
    LATENCY_QUEUE,
    StompCounter,
    rabbitmq_connection,
    stomp_connection,
)
from bench.peers import (
    ActiveMQServer,
    RabbitMQServer,
)
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition

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
    verdict = judge(
        rate=rate,
        measured=measured,
        received=result.received,
        achieved_rate=result.achieved_rate,
        behind_after=sent if behind else None,
        p50_ms=result.p50_ms,
        growth_ms=result.growth_ms,
        grace_s=LATENCY_GRACE_S,
    )
    result.sustained, result.verdict = verdict.sustained, verdict.text
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
    connection = stomp_connection(server.port, StompCounter())
    headers = {"persistent": "true"}

    def send(values: list[bytes]) -> None:
        for value in values:
            connection.send(LATENCY_DESTINATION, value, headers=headers)

    return LatencySetup(
        ACTIVEMQ, "activemq", {"port": server.port}, send, lambda: None, connection.disconnect, 1
    )
