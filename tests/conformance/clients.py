"""The standard clients as a scenario uses them: confluent-kafka (librdkafka), kcat, kafka-python, aiokafka.

Each helper returns plain data (records as dicts, errors as Kafka's error names) so a scenario's transcript
holds nothing client-specific. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import subprocess
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    # kafka-python loads its protocol schemas with importlib.resources' legacy read_text / open_text
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioPartition
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpPartition

Record = dict[str, Any]
#: how long an aiokafka helper lets its event loop run after ``stop()``: a TLS connection's transport closes
#: a few loop turns after aiokafka closes it, and a loop ended before that leaves it unclosed
TLS_CLOSE_S = 0.1


def collect_unclosed_sockets() -> None:
    """Collect the sockets a client left to the garbage collector, here and without a ResourceWarning (which
    would otherwise fail whichever later test happens to collect them): an aiokafka TLS transport whose close
    had not finished when its event loop ended (on a loaded machine ``TLS_CLOSE_S`` is not always enough),
    a kafka-python client's bootstrap sockets after a refused login."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def error_name(exc: BaseException) -> str:
    """Kafka's name of the error a client raised (librdkafka's name for its own local errors)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def create_topic(
    target: Target,
    topic: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
    replication_factor: int = 1,
) -> str | None:
    """CreateTopics through confluent-kafka's AdminClient; None, or the error name the broker answered."""
    admin = AdminClient(target.client_config)
    new = NewTopic(topic, partitions, replication_factor, config=dict(configs or {}))
    try:
        admin.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
    except KafkaException as exc:
        return error_name(exc)
    wait_for_leaders(target, topic, partitions)
    return None


def wait_for_leaders(target: Target, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Wait until Metadata names a leader for each of the topic's partitions."""
    admin = AdminClient(target.client_config)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} has no leader for each of its {partitions} partitions after {timeout_s} s")


def produce(
    target: Target,
    topic: str,
    records: Sequence[Record],
    config: Mapping[str, Any] | None = None,
) -> list[Record]:
    """Produce ``records`` (dicts with ``value`` and optionally ``key``, ``partition``, ``headers``,
    ``timestamp``) with one confluent-kafka producer, then flush; the delivery reports, in order."""
    reports: list[Record] = []
    producer = Producer({**target.client_config, "linger.ms": 5, **(config or {})})

    def delivered(err: KafkaError | None, msg: Any) -> None:
        reports.append(
            {"error": err.name() if err else None, "partition": msg.partition(), "offset": msg.offset()}
        )

    for record in records:
        kwargs = {k: record[k] for k in ("key", "partition", "headers", "timestamp") if k in record}
        producer.produce(topic, record.get("value"), on_delivery=delivered, **kwargs)
    remaining = producer.flush(30)
    if remaining:
        raise AssertionError(f"{remaining} records to {topic} still not delivered after 30 s")
    return reports


def _text(raw: str | bytes | None) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


def _headers(raw: Any) -> list[list[Any]]:
    return [[k, _text(v)] for k, v in (raw or [])]


def consume(
    target: Target,
    topic: str,
    partitions: Sequence[int],
    count: int,
    timeout_s: float = 20.0,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read ``partitions`` from offset 0 with confluent-kafka until ``count`` records or ``timeout_s``;
    the records (partition order, then offset) and the errors seen."""
    consumer = Consumer(
        {
            **target.client_config,
            "group.id": f"conformance-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **(config or {}),
        }
    )
    records: list[Record] = []
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout_s
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            failure = msg.error()
            if failure is not None:
                if failure.code() != KafkaError._PARTITION_EOF:
                    errors.append(str(failure.name()))
                continue
            key, value = msg.key(), msg.value()
            ts_type, ts = msg.timestamp()
            records.append(
                {
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "key": _text(key),
                    "value": _text(value),
                    "headers": _headers(msg.headers()),
                    "timestamp_type": ts_type,
                    "timestamp": ts,
                }
            )
    finally:
        consumer.close()
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    return {"records": records, "errors": sorted(set(errors))}


def consume_to_end(target: Target, topic: str, partition: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Read ``topic-partition`` with confluent-kafka from offset 0 until the end it had when the read began
    (librdkafka's partition EOF); the records, the errors seen and whether the end was reached."""
    consumer = Consumer(
        {
            **target.client_config,
            "group.id": f"conformance-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    records: list[Record] = []
    errors: list[str] = []
    reached_end = False
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout_s
        while not reached_end and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            failure = msg.error()
            if failure is not None:
                if failure.code() == KafkaError._PARTITION_EOF:
                    reached_end = True
                else:
                    errors.append(str(failure.name()))
                continue
            records.append({"offset": msg.offset(), "key": _text(msg.key()), "value": _text(msg.value())})
    finally:
        consumer.close()
    return {"records": records, "errors": sorted(set(errors)), "reached_end": reached_end}


def kcat(args: Sequence[str], stdin: str | None = None, timeout_s: float = 60.0) -> tuple[int, str, str]:
    """Run kcat; its exit code, stdout and stderr."""
    done = subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    return done.returncode, done.stdout, done.stderr


def kafka_python_read_all(
    target: Target, topic: str, partition: int, timeout_s: float = 30.0
) -> dict[str, Any]:
    """kafka-python reads ``topic-partition`` from offset 0 to its end; the records and any error."""
    consumer = KafkaConsumer(**target.kafka_python_config, enable_auto_commit=False, consumer_timeout_ms=2000)
    tp = KpPartition(topic, partition)
    records: list[Record] = []
    error: str | None = None
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    {
                        "offset": m.offset,
                        "key": m.key.decode() if m.key is not None else None,
                        "value": m.value.decode() if m.value is not None else None,
                    }
                    for m in batch
                )
        if consumer.position(tp) < end:
            error = f"stopped at {consumer.position(tp)} of {end}"
    except Exception as exc:
        error = type(exc).__name__
    finally:
        consumer.close()
    return {"records": records, "error": error}


def aiokafka_read_all(target: Target, topic: str, partition: int, timeout_s: float = 30.0) -> dict[str, Any]:
    """aiokafka reads ``topic-partition`` from offset 0 to its end; the records and any error."""

    async def run() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(**target.aiokafka_config(), enable_auto_commit=False)
        tp = AioPartition(topic, partition)
        records: list[Record] = []
        error: str | None = None
        await consumer.start()
        try:
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            consumer.seek(tp, 0)
            deadline = time.monotonic() + timeout_s
            while await consumer.position(tp) < end and time.monotonic() < deadline:
                for batch in (await consumer.getmany(tp, timeout_ms=500)).values():
                    records.extend(
                        {
                            "offset": m.offset,
                            "key": m.key.decode() if m.key is not None else None,
                            "value": m.value.decode() if m.value is not None else None,
                        }
                        for m in batch
                    )
            if await consumer.position(tp) < end:
                error = f"stopped at {await consumer.position(tp)} of {end}"
        except Exception as exc:
            error = type(exc).__name__
        finally:
            await consumer.stop()
            await asyncio.sleep(TLS_CLOSE_S)
        return {"records": records, "error": error}

    read = asyncio.run(run())
    collect_unclosed_sockets()
    return read


def advertised_api_keys(bootstrap: str) -> set[int]:
    """The api keys the first bootstrap broker lists in its ApiVersions v0 response (read on a raw socket:
    kafka-python's ``api_versions()`` raises on keys it does not know)."""
    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    client = b"conformance"
    request = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"{host}:{port} closed the connection before answering ApiVersions")
            data += chunk
    _correlation_id, _error_code, count = struct.unpack_from(">ihi", data, 4)
    return {struct.unpack_from(">h", data, 14 + 6 * i)[0] for i in range(count)}
