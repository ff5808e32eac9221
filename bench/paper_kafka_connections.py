"""Throughput with 1, 10 and 100 client connections (issue 39's growth), a phase of the Kafka comparison.

In each round of :class:`bench.paper_kafka.KafkaBench`, for each broker and each count ``N`` of
``--connections``:

* **produce, N connections**: ``N`` confluent-kafka producers (batch 50, ``acks=1``, as the comparison's
  batch-50 case), each its own librdkafka client with its own connection to the broker, write the run's
  records to one one-partition topic: producer ``i`` writes records ``[total * i // N, total * (i + 1) //
  N)``, so every count writes the same records in all. Every producer is created and connected (with the
  topic's metadata) before the clock starts, and waits in its own thread; the clock runs from releasing
  them all to the last one's ``flush()`` (every record acknowledged). Checked: no delivery error, nothing
  left unacknowledged, the partition's high watermark is the total.
* **consume, N connections**: ``N`` confluent-kafka consumers, each assigned the partition from offset
  ``total * i // N`` (no group: ``assign``, no commits), read their share up to offset ``total * (i + 1) //
  N`` and stop; each checks that it received every offset of its share once and in order (records past
  its share, fetched ahead, are not counted). A consumer's fetches are capped at its share's size
  (``max.partition.fetch.bytes``: 200 bytes a record, between 64 KiB and librdkafka's default 1 MiB;
  ``queued.min.messages``: the share) so that 100 consumers do not each fetch a megabyte they discard;
  a full queue pauses its fetches 10 ms, not librdkafka's 1 s, as :mod:`bench.paper_kafka_clients` says.

The clients run in Python threads of this process (librdkafka's threads do the network work; 100
producers are about 500 threads). The broker's CPU seconds per million records are read around each phase,
as for every case. Results go into the comparison under :func:`connections_case`'s names, counts into
:attr:`~bench.paper_kafka.KafkaComparison.connections`.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from bench.paper_kafka import BrokerUnderTest, KafkaBench
from bench.paper_kafka_clients import FETCH_QUEUE_BACKOFF_MS, PHASE_TIMEOUT_S, ConfluentProducer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaError, TopicPartition

#: the client counts issue 39 asks for
CONNECTIONS = (1, 10, 100)
#: a consumer's fetch size per record of its share, and the bounds of it
FETCH_BYTES_PER_RECORD = 200
MIN_FETCH_BYTES = 64 * 1024
MAX_FETCH_BYTES = 1024 * 1024


def connections_case(phase: str, connections: int) -> str:
    return f"{phase}, {connections:,} connection{'s' if connections != 1 else ''}"


def shares(total: int, clients: int) -> list[tuple[int, int]]:
    """``clients`` contiguous ranges ``[start, end)`` covering ``0 .. total``, their sizes at most 1 apart."""
    if not 1 <= clients <= total:
        raise ValueError(f"{total} records cannot be shared by {clients} clients (1 to {total})")
    return [(total * i // clients, total * (i + 1) // clients) for i in range(clients)]


class Crowd:
    """One thread per body, started and waiting before the clock; :meth:`run` releases them all, joins them
    and raises the first failure (with how many failed). Bodies never released (:meth:`run` not called)
    return after :data:`PHASE_TIMEOUT_S`."""

    def __init__(self, bodies: Sequence[Callable[[], None]]) -> None:
        self._go = threading.Event()
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._run, args=(body,), daemon=True) for body in bodies]
        for thread in self._threads:
            thread.start()

    def _run(self, body: Callable[[], None]) -> None:
        if not self._go.wait(PHASE_TIMEOUT_S):
            return
        try:
            body()
        except BaseException as exc:  # reported by run()
            self._errors.append(exc)

    def run(self) -> None:
        self._go.set()
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = sum(thread.is_alive() for thread in self._threads)
        if alive:
            raise TimeoutError(
                f"{alive} of {len(self._threads)} clients still running after {PHASE_TIMEOUT_S} s"
            )
        if self._errors:
            raise RuntimeError(
                f"{len(self._errors)} of {len(self._threads)} clients failed, the first: {self._errors[0]}"
            ) from self._errors[0]


class ShareReader:
    """A confluent-kafka consumer of offsets ``[start, end)`` of partition 0, connected on creation."""

    def __init__(self, bootstrap: str, topic: str, start: int, end: int) -> None:
        self.topic, self.start, self.end = topic, start, end
        fetch_bytes = min(MAX_FETCH_BYTES, max(MIN_FETCH_BYTES, (end - start) * FETCH_BYTES_PER_RECORD))
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{topic}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "max.partition.fetch.bytes": fetch_bytes,
                "queued.min.messages": max(1, end - start),
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            }
        )
        self.consumer.list_topics(topic, timeout=30)

    def read(self) -> None:
        """Every offset of the share once, in order; raise on an error, a gap or a timeout."""
        self.consumer.assign([TopicPartition(self.topic, 0, self.start)])
        expected = self.start
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while expected < self.end:
            # no more than are missing: librdkafka waits for a whole batch (or the timeout)
            for msg in self.consumer.consume(num_messages=min(10_000, self.end - expected), timeout=1.0):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"{self.topic}-0: consumer error {error}")
                offset = msg.offset()
                if offset is not None and offset >= self.end:
                    continue  # fetched ahead, past the share
                if offset != expected:
                    raise RuntimeError(
                        f"{self.topic}-0: the share [{self.start}, {self.end}) got offset {offset}, "
                        f"expected {expected}"
                    )
                expected += 1
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.topic}-0: the share [{self.start}, {self.end}) stopped at offset {expected} "
                    f"after {PHASE_TIMEOUT_S:.0f} s"
                )

    def close(self) -> None:
        self.consumer.close()


class ConnectionsPhase:
    """The phase :class:`~bench.paper_kafka.KafkaBench` runs in each round for each broker."""

    def __init__(self, counts: Sequence[int] = CONNECTIONS) -> None:
        self.counts = list(counts)

    def __call__(self, bench: KafkaBench, broker: BrokerUnderTest, round_number: int) -> None:
        bench.comparison.connections = self.counts
        total = len(bench.values)
        for clients in self.counts:
            topic = f"k{round_number}-{broker.slug}-c{clients}"
            ranges = shares(total, clients)
            if bench.phase(
                connections_case("produce", clients),
                broker,
                round_number,
                topic,
                1,
                total,
                partial(self._producers, bench, broker, topic, ranges),
            ):
                self._consume(bench, broker, round_number, topic, ranges)

    @staticmethod
    def _producers(
        bench: KafkaBench, broker: BrokerUnderTest, topic: str, ranges: list[tuple[int, int]]
    ) -> Callable[[], None]:
        producers = [ConfluentProducer(broker.bootstrap, topic, 50, "1") for _ in ranges]
        bodies = [
            partial(producer.send, bench.values[start:end], 0)
            for producer, (start, end) in zip(producers, ranges, strict=True)
        ]
        return Crowd(bodies).run

    @staticmethod
    def _consume(
        bench: KafkaBench,
        broker: BrokerUnderTest,
        round_number: int,
        topic: str,
        ranges: list[tuple[int, int]],
    ) -> None:
        case = connections_case("consume", len(ranges))
        readers: list[ShareReader] = []
        try:
            try:
                for start, end in ranges:
                    readers.append(ShareReader(broker.bootstrap, topic, start, end))
            except Exception as exc:
                bench.failed(case, broker, round_number, exc)
                return
            crowd = Crowd([reader.read for reader in readers])
            bench.measure(case, broker, round_number, len(bench.values), crowd.run)
        finally:
            for reader in readers:
                _close_quietly(reader)


def _close_quietly(reader: Any) -> None:
    try:
        reader.close()
    except Exception:  # a failed consumer may fail to close; the phase said why
        return
