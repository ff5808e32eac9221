"""bench/paper_kafka_connections.py: the shares of the records among N clients, and the crowd of client
threads released together (the phases themselves run in tests/bench/test_paper_kafka.py)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from bench.paper_kafka_connections import Crowd, connections_case, shares


def test_shares_cover_every_record_once() -> None:
    assert shares(600, 1) == [(0, 600)]
    assert shares(10, 3) == [(0, 3), (3, 6), (6, 10)]
    ranges = shares(20_000, 100)
    assert ranges[0] == (0, 200)
    assert ranges[-1] == (19_800, 20_000)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    with pytest.raises(ValueError, match="10 records cannot be shared by 11 clients"):
        shares(10, 11)
    with pytest.raises(ValueError, match="cannot be shared by 0 clients"):
        shares(10, 0)


def test_case_names() -> None:
    assert connections_case("produce", 1) == "produce, 1 connection"
    assert connections_case("consume", 100) == "consume, 100 connections"


def test_the_crowd_waits_for_run_then_all_run() -> None:
    started: list[float] = []
    lock = threading.Lock()

    def body() -> None:
        with lock:
            started.append(time.monotonic())

    crowd = Crowd([body] * 5)
    time.sleep(0.2)
    assert started == []  # created, started, waiting: nothing ran before the clock
    released = time.monotonic()
    crowd.run()
    assert len(started) == 5
    assert min(started) >= released


def test_the_crowd_reports_how_many_failed_and_the_first() -> None:
    def ok() -> None:
        return

    def broken() -> None:
        raise RuntimeError("topic-0: consumed 3 of 4")

    with pytest.raises(RuntimeError, match="2 of 3 clients failed, the first: topic-0: consumed 3 of 4"):
        Crowd([ok, broken, broken]).run()
