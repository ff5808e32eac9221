"""ThreadCounter (broker/server/thread_counter.py) against prometheus_client's own Counter: the same
increments give the same exposition but for the ``_created`` times, read back exactly by the text parser."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from broker.server.thread_counter import ThreadCounter
from tests.broker.server.test_thread_histogram import exposition, masked, samples

NAME = "kafka_server_brokertopicmetrics_bytesout"
HELP = "Log bytes sent to fetchers, per topic"


class Yields(Collector):
    def __init__(self, counter: ThreadCounter) -> None:
        self.counter = counter

    def collect(self) -> Iterator[Metric]:
        yield self.counter.family()


def test_the_same_exposition_as_prometheus_client_for_the_same_increments() -> None:
    ours = ThreadCounter(NAME, HELP, ["topic"])
    theirs_registry = CollectorRegistry()
    theirs = Counter(NAME, HELP, ["topic"], registry=theirs_registry)
    for topic, amounts in (("events", [4096, 1, 17_000_000]), ("audit", [1]), ("empty", [0])):
        for amount in amounts:
            ours.inc((topic,), amount)
            theirs.labels(topic).inc(amount)
    ours_registry = CollectorRegistry()
    ours_registry.register(Yields(ours))
    text = exposition(ours_registry)
    assert masked(text) == masked(exposition(theirs_registry))
    found = samples(text)
    assert found[(NAME + "_total", (("topic", "events"),))] == 17_004_097
    assert found[(NAME + "_total", (("topic", "audit"),))] == 1
    assert found[(NAME + "_total", (("topic", "empty"),))] == 0
    assert ThreadCounter(NAME + "_total", HELP).name == NAME  # as prometheus_client, _total is the sample's


def test_increments_from_many_threads_all_counted() -> None:
    counter = ThreadCounter("c", "C", ["topic"])

    def write() -> None:
        for _ in range(10_000):
            counter.inc(("events",), 3)

    writers = [threading.Thread(target=write) for _ in range(6)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert [(s.name, s.value) for s in counter.family().samples if s.name == "c_total"] == [
        ("c_total", 180_000)
    ]


def test_a_negative_increment_is_refused() -> None:
    counter = ThreadCounter("c", "C", ["topic"])
    with pytest.raises(ValueError, match="counter c: increments must not be negative, got -1"):
        counter.inc(("events",), -1)
