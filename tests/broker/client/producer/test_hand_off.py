"""The hand-off between appending threads and the sender: the condition alone, then a producer against a
real broker process whose buffer stays small while every record arrives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import broker.client.producer.hand_off as hand_off_module
from broker.client.producer.hand_off import HandOff
from broker.record.batch_header import HEADER_SIZE
from broker.record.record_encoder import record_bound
from broker.record.record_header import encode_headers
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import HOST, consumer, producer, read_batches

HOST_HEADER = ("host", HOST.encode())
LONG_WAIT_S = 5.0


@pytest.fixture
def long_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits of 5 s instead of 1 ms: a wait that ends early ended for its reason, not its timeout."""
    monkeypatch.setattr(hand_off_module, "HANDOFF_WAIT_S", LONG_WAIT_S)


def hand_off() -> tuple[threading.Lock, HandOff]:
    lock = threading.Lock()
    return lock, HandOff(lock, threading.Condition(lock))


def appender(
    lock: threading.Lock, handoff: HandOff, first: Callable[[], None]
) -> tuple[threading.Thread, list[float]]:
    """A started thread that, under the lock, runs ``first``, then waits for the sender as an appending thread
    does once it closed 300; the list gets how long it waited."""
    waited: list[float] = []

    def run() -> None:
        with lock:
            first()
            handoff.weight = 300
            started = time.monotonic()
            handoff.wait_for_sender()
            waited.append(time.monotonic() - started)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, waited


def test_an_appending_thread_waits_for_the_senders_next_pass(long_wait: None) -> None:
    lock, handoff = hand_off()
    with lock:
        handoff.pass_begins()  # the sender's thread is this one, as a real sender's is its own
    thread, waited = appender(lock, handoff, lambda: None)
    time.sleep(0.2)
    with lock:
        assert waited == []  # still waiting: no pass yet
        handoff.pass_begins()
    thread.join(LONG_WAIT_S)
    assert len(waited) == 1
    assert 0.15 < waited[0] < LONG_WAIT_S / 2
    assert handoff.weight == 0


@pytest.mark.parametrize("case", ["held back by the brokers", "the sender's own thread"])
def test_no_wait_when_a_pass_would_not_help(long_wait: None, case: str) -> None:
    lock, handoff = hand_off()

    def first() -> None:
        if case == "the sender's own thread":
            handoff.pass_begins()
        else:
            handoff.held_back = True

    thread, waited = appender(lock, handoff, first)
    thread.join(LONG_WAIT_S)
    assert len(waited) == 1
    assert waited[0] < 0.5
    assert handoff.weight == 300  # nothing passed


def test_a_wait_that_times_out_starts_counting_again() -> None:
    lock, handoff = hand_off()
    with lock:
        handoff.weight = 301
        handoff.wait_for_sender()  # no sender: 1 ms, then on
        assert handoff.weight == 0


def test_one_record_per_batch_keeps_the_buffer_small_and_loses_nothing(broker_cluster: Any) -> None:
    """acks=0, one 200-byte record per batch: the appending thread used to run ahead of the sender until
    ``buffer_memory`` (32 MiB) was full; now it waits for the sender every 150 batches. Every record
    arrives, one per batch, in order."""
    broker_cluster.create_topic("handed", 1)
    count = 30_000
    values = [b"%08d" % i + b"v" * 192 for i in range(count)]
    bound = record_bound(len(values[0]), 1, len(encode_headers([HOST_HEADER])))
    most = 0
    with producer(broker_cluster, acks="0", batch_size=HEADER_SIZE + bound) as p:
        p.partitions_for("handed")
        for value in values:
            p.send("handed", value, partition=0)
            most = max(most, p.buffered_bytes)
        p.flush()
    assert most < 2 * 1024 * 1024, f"{most} bytes buffered at most"
    with consumer(broker_cluster, TopicPartition("handed", 0)) as c:
        batches = read_batches(c, count, timeout_s=60)
    assert [b.record_count for b in batches] == [1] * count
    assert [v for b in batches for v in b.values().values] == values
