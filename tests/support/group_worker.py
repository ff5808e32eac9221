"""One unmodified third-party group consumer in its own process, for the group coordinator's tests:
``python -m tests.support.group_worker <kind> <bootstrap> <group> <topic> <events file>``.

``kind`` is ``confluent`` (confluent-kafka, librdkafka), ``kafka-python`` or ``aiokafka``. The consumer
subscribes to ``topic`` with ``group`` (range assignor, eager: every partition is revoked before a
rebalance), commits synchronously after every record, and writes one JSON line per event to the events
file, flushed at once (so a kill -9 loses nothing written). Its stderr (the test's ``<events stem>.log``)
carries the client's own account of where each assigned partition started: librdkafka's ``cgrp`` debug
and kafka-python's coordinator and offset-reset lines:

* ``{"e": "assign", "t": time, "gen": generation or -1, "parts": [...]}`` from the rebalance callback
  (kafka-python's and aiokafka's generation is read from their coordinator; confluent-kafka does not expose
  one, -1);
* ``{"e": "revoke", "t": time, "parts": [...]}``;
* ``{"e": "rec", "t": time, "p": partition, "o": offset, "v": value}`` for each record consumed;
* ``{"e": "commit", "t": time, "p": partition, "o": next offset}`` once a commit succeeded;
* ``{"e": "closed", "t": time}`` after a clean close on SIGTERM (the consumer leaves the group).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any, TextIO

SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 300


class Events:
    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, kind: str, **fields: Any) -> None:
        self._out.write(json.dumps({"e": kind, "t": time.time(), **fields}) + "\n")
        self._out.flush()


def run_confluent(bootstrap: str, group: str, topic: str, events: Events, stopping: list[bool]) -> None:
    from confluent_kafka import Consumer, KafkaException  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "partition.assignment.strategy": "range",
            "topic.metadata.refresh.interval.ms": 1000,
            # librdkafka's group account on stderr (the worker's .log): each committed offset the
            # coordinator answered ("... [p] back to pending list with offset ...") and where each
            # partition started, so that a start the test's checks refuse says whose answer it was
            "debug": "cgrp",
        }
    )

    def on_assign(_consumer: Any, parts: list[Any]) -> None:
        events.write("assign", gen=-1, parts=sorted(p.partition for p in parts))

    def on_revoke(_consumer: Any, parts: list[Any]) -> None:
        events.write("revoke", parts=sorted(p.partition for p in parts))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping[0]:
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        # a record without an offset would be logged as -1, never mistaken for offset 0
        offset, value = message.offset(), message.value() or b""
        offset = -1 if offset is None else offset
        events.write("rec", p=message.partition(), o=offset, v=value.decode())
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException:
            continue  # a rebalance under way: the next owner starts from the last commit
        events.write("commit", p=message.partition(), o=offset + 1)
    consumer.close()
    events.write("closed")


def run_kafka_python(bootstrap: str, group: str, topic: str, events: Events, stopping: list[bool]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer  # noqa: PLC0415
        from kafka.consumer.subscription_state import ConsumerRebalanceListener  # noqa: PLC0415
        from kafka.errors import KafkaError  # noqa: PLC0415
        from kafka.structs import OffsetAndMetadata  # noqa: PLC0415

    # the coordinator's own account on stderr (the worker's .log): which join and sync requests it sent and
    # what came back, so that a member that stops in a rebalance says where
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)
    logging.getLogger("kafka.consumer.fetcher").setLevel(logging.INFO)  # resets, out-of-range fetches
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        metadata_max_age_ms=1000,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            events.write("revoke", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            generation = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
            events.write(
                "assign",
                gen=getattr(generation, "generation_id", -1),
                parts=sorted(tp.partition for tp in assigned),
            )

    consumer.subscribe([topic], listener=Listener())
    while not stopping[0]:
        batches = consumer.poll(timeout_ms=100)
        for tp, messages in batches.items():
            for message in messages:
                events.write("rec", p=tp.partition, o=message.offset, v=message.value.decode())
                try:
                    consumer.commit({tp: OffsetAndMetadata(message.offset + 1, "", -1)})
                except KafkaError:
                    continue
                events.write("commit", p=tp.partition, o=message.offset + 1)
    consumer.close()
    events.write("closed")


def run_aiokafka(bootstrap: str, group: str, topic: str, events: Events, stopping: list[bool]) -> None:
    import asyncio  # noqa: PLC0415

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener  # noqa: PLC0415
    from aiokafka.errors import KafkaError  # noqa: PLC0415
    from aiokafka.structs import OffsetAndMetadata  # noqa: PLC0415

    async def consume() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            metadata_max_age_ms=1000,
        )

        owned: set[Any] = set()  # what the callbacks gave (aiokafka's assignment() lags a revoke)

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                owned.clear()
                events.write("revoke", parts=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                owned.update(assigned)
                coordinator = getattr(consumer, "_coordinator", None)
                events.write(
                    "assign",
                    gen=getattr(coordinator, "generation", -1),
                    parts=sorted(tp.partition for tp in assigned),
                )

        await consumer.start()
        consumer.subscribe([topic], listener=Listener())
        try:
            while not stopping[0]:
                batches = await consumer.getmany(timeout_ms=100)
                for tp, messages in batches.items():
                    for message in messages:
                        if tp not in owned:
                            # revoked while this batch was processed (a commit awaits, the rebalance runs):
                            # its records are the next owner's, from the last commit
                            break
                        events.write("rec", p=tp.partition, o=message.offset, v=message.value.decode())
                        try:
                            await consumer.commit({tp: OffsetAndMetadata(message.offset + 1, "")})
                        except KafkaError:
                            continue
                        events.write("commit", p=tp.partition, o=message.offset + 1)
        finally:
            await consumer.stop()

    asyncio.run(consume())
    events.write("closed")


def main(argv: list[str]) -> None:
    kind, bootstrap, group, topic, path = argv
    stopping = [False]

    def stop(_signum: int, _frame: Any) -> None:
        stopping[0] = True

    signal.signal(signal.SIGTERM, stop)
    with Path(path).open("a", encoding="utf-8") as out:
        events = Events(out)
        if kind == "confluent":
            run_confluent(bootstrap, group, topic, events, stopping)
        elif kind == "kafka-python":
            run_kafka_python(bootstrap, group, topic, events, stopping)
        elif kind == "aiokafka":
            run_aiokafka(bootstrap, group, topic, events, stopping)
        else:
            raise SystemExit(f"unknown consumer kind {kind!r}: confluent, kafka-python or aiokafka")


if __name__ == "__main__":
    main(sys.argv[1:])
