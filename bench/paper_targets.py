"""The systems under test of the paper's Section 5 experiment (:mod:`bench.paper`): Lumber (its own
producer and consumer), RabbitMQ (``pika``, AMQP 0-9-1) and ActiveMQ (``stomp.py``, STOMP 1.2), each a
:class:`~bench.paper_common.Target` that produces and consumes one round."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.paper_common import (
    ACTIVEMQ,
    PHASE_TIMEOUT_S,
    PREFETCH_BYTES,
    PREFETCH_MESSAGES,
    RABBITMQ,
    VALUE_BYTES,
    BrokerProbe,
    Meter,
    PhaseRun,
    cpu_seconds,
    own_cpu_seconds,
    wait_for,
)
from bench.peers import (
    LOOPBACK,
    ActiveMQServer,
    PeerError,
    RabbitMQServer,
)
from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.batch_header import HEADER_SIZE
from broker.record.record_encoder import record_bound
from broker.record.record_header import encode_headers
from broker.record.topic_partition import TopicPartition

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
            auto_offset_reset="earliest",
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


class StompCounter:
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
        self._listener = StompCounter()
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
