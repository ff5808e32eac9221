"""The group page's lag history (lumber/console/lag_history.py and its two sources) on the stack of
``conftest.py``, in Debian's Chromium: a kafka group's from its commits in ``__consumer_offsets``, a
zookeeper group's from the lag exporter (``lumber groups lag --watch --metrics-port``) named by
``[console] lag_exporter_url``. The JSON twins give the exact (committed, log end, lag) points; the pages
draw one sparkline per partition and one for the total, with no console error."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.record.topic_partition import TopicPartition
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from lumber.config import dump_config
from lumber.dev.process import free_port, start_and_wait, stop
from tests.lumber.console.conftest import ConsoleStack, Visit, json_of
from tests.support.broker_cluster import wait_for
from tests.support.load_job import unique_topic

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as ConfluentPartition

Point = tuple[int, int, int]  # committed, log end, lag


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def produce(stack: ConsoleStack, topic: str, partition: int, count: int) -> None:
    """``count`` records to ``topic-partition`` with confluent-kafka, each acknowledged by the broker."""
    producer = Producer({"bootstrap.servers": stack.cluster.bootstrap_servers, "linger.ms": 0, "acks": "all"})
    failed: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=b"v%d" % i,
            partition=partition,
            on_delivery=lambda e, _m: failed.append(e) if e else None,
        )
    assert producer.flush(30) == 0
    assert failed == []


def commit_outside_a_generation(stack: ConsoleStack, group: str, topic: str, count: int) -> None:
    """``count`` commits of ``topic``-0 by a confluent-kafka consumer of ``group`` that assigns itself the
    partition (no group membership: generation -1), asynchronous but the last."""
    consumer = Consumer({"bootstrap.servers": stack.cluster.bootstrap_servers, "group.id": group})
    try:
        consumer.assign([ConfluentPartition(topic, 0)])
        for n in range(1, count):
            consumer.commit(offsets=[ConfluentPartition(topic, 0, n % 10)], asynchronous=True)
        done = consumer.commit(offsets=[ConfluentPartition(topic, 0, 1)], asynchronous=False)
        assert [(c.offset, c.error) for c in done or []] == [(1, None)]
    finally:
        consumer.close()


def points(history: list[dict[str, Any]]) -> list[Point]:
    return [(h["committed"], h["log_end"], h["lag"]) for h in history]


def test_kafka_group_history_from_the_offsets_topic(visit: Visit, console_stack: ConsoleStack) -> None:
    """A confluent-kafka member commits three times (produce, commit, commit, produce, commit): the page
    shows a point per commit at its commit time, with the log end of that time."""
    stack = console_stack
    topic, group = unique_topic("lagged"), unique_topic("khistory")
    stack.create_topic(topic, 2)
    produce(stack, topic, 0, 10)
    produce(stack, topic, 1, 4)
    consumer = Consumer(
        {
            "bootstrap.servers": stack.cluster.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 3_600_000,
        }
    )
    brackets: list[tuple[int, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, f"{group}: no assignment of {topic}"
            consumer.poll(0.2)

        def commit(offsets: dict[int, int]) -> None:
            time.sleep(0.01)  # each commit in a millisecond of its own, after the records before it
            before = now_ms()
            done = consumer.commit(
                offsets=[ConfluentPartition(topic, p, o) for p, o in sorted(offsets.items())],
                asynchronous=False,
            )
            brackets.append((before, now_ms()))
            assert [(c.partition, c.offset, c.error) for c in done or []] == [
                (p, o, None) for p, o in sorted(offsets.items())
            ]

        commit({0: 2, 1: 1})
        commit({0: 6, 1: 4})
        # another group of the same offsets partition commits 1,500 times: the page reads back through
        # them in growing chunks (1,000 records, then 2,000), the third commit in the first chunk
        count = len(consumer.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions)
        noise = next(
            name
            for name in (f"{group}-noise-{i}" for i in range(10_000))
            if partition_for(name, count) == partition_for(group, count)
        )
        commit_outside_a_generation(stack, noise, topic, 1500)
        time.sleep(0.01)  # the next records are stamped after the second commit
        produce(stack, topic, 0, 5)
        commit({0: 12, 1: 4})

        data = json_of(stack, f"/groups/{group}", kind="kafka")
        assert [points(p["history"]) for p in data["partitions"]] == [
            [(2, 10, 8), (6, 10, 4), (12, 15, 3)],
            [(1, 4, 3), (4, 4, 0), (4, 4, 0)],
        ]
        history = data["lag_history"]
        assert points(history["total"]) == [(3, 14, 11), (10, 14, 4), (16, 19, 3)]
        times = [h["time_ms"] for h in history["total"]]
        assert all(low <= t <= high for t, (low, high) in zip(times, brackets, strict=True)), (
            times,
            brackets,
        )
        for p in data["partitions"]:
            assert [h["time_ms"] for h in p["history"]] == times
        assert (history["history_ms"], history["note"]) == (3_600_000, None)
        assert history["source"].startswith("__consumer_offsets-")

        page = visit.open(f"/groups/{group}?kind=kafka", "kafka-group-history")
        sparks = page.locator("main svg.sparkline")
        assert sparks.count() == 3
        assert [sparks.nth(i).get_attribute("data-points") for i in range(3)] == ["3", "3", "3"]
        assert page.locator("main .lag-total svg.sparkline text").text_content() == "3"
        assert page.locator("main table").nth(1).locator("svg.sparkline polyline").count() == 2

        # a window without the commits: no points, and the page says so
        data = json_of(stack, f"/groups/{group}", kind="kafka", history="1ms")
        assert [p["history"] for p in data["partitions"]] == [[], []]
        assert data["lag_history"]["note"].startswith(f"no commit of group {group!r} in __consumer_offsets-")
        bad = stack.get(f"/groups/{group}", kind="kafka", history="soon", format="json")
        assert (bad.status_code, bad.json()["message"]) == (
            400,
            "parameter history='soon': history 'soon': expected a duration such as 90s, 30m, 1h, 2h30m or 1d",
        )
    finally:
        consumer.close()


@pytest.fixture
def exporter_console(console_stack: ConsoleStack, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A lag exporter watching every zookeeper group every 200 ms (window 1000: nothing leaves it during
    the test), and a second console on the stack whose ``lag_exporter_url`` names it: (exporter URL,
    console URL)."""
    stack = console_stack
    exporter_port, console_port = free_port(), free_port()
    exporter_url = f"http://127.0.0.1:{exporter_port}"
    config = stack.config.replace(
        console=stack.config.console.replace(port=console_port, lag_exporter_url=exporter_url)
    )
    config_path = tmp_path / "lumber.toml"
    config_path.write_text(dump_config(config))
    lumber = [sys.executable, "-m", "lumber", "--config", str(config_path)]
    exporter = [
        *lumber,
        "groups",
        "lag",
        "--all-groups",
        "--kind",
        "zookeeper",
        "--watch",
        "--interval",
        "200ms",
        "--window",
        "1000",
        "--json",
        "--metrics-port",
        str(exporter_port),
    ]
    console_url = f"http://127.0.0.1:{console_port}"

    def answers(url: str) -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    with ExitStack() as started:
        for name, argv, url in (
            ("lag-exporter", exporter, f"{exporter_url}/lag-history"),
            ("console-with-exporter", [*lumber, "console"], f"{console_url}/groups"),
        ):
            process = start_and_wait(
                name, argv, tmp_path / f"{name}.log", partial(answers, url), timeout_s=60
            )
            started.callback(stop, process[0], popen=process[1])
        yield exporter_url, console_url


def test_zookeeper_group_history_from_the_lag_exporter(
    visit: Visit, console_stack: ConsoleStack, exporter_console: tuple[str, str]
) -> None:
    """A zookeeper group commits, its topic grows, it commits again: the exporter's observations, read
    by the console, give exactly those three states in order; without an exporter the page says where
    history would come from."""
    stack = console_stack
    exporter_url, console_url = exporter_console
    topic, group = unique_topic("zklagged"), unique_topic("zkhistory")
    stack.create_topic(topic, 1)
    produce(stack, topic, 0, 10)
    tp = TopicPartition(topic, 0)
    member = GroupConsumer(
        group,
        zookeeper_connect=stack.cluster.zk_connect,
        config=GroupConfig(auto_commit_enable=False),
        consumer_config=ConsumerConfig(
            bootstrap_servers=stack.cluster.bootstrap_servers.split(","),
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        ),
    )
    try:
        member.subscribe([topic])
        seen: list[Any] = []

        def read_all() -> bool:
            seen.extend(member.poll(timeout_ms=200))
            return len(seen) >= 10

        wait_for(read_all, 60, "the member to read the 10 records")

        def observed(state: Point) -> bool:
            found = httpx.get(f"{exporter_url}/lag-history", params={"group": group}, timeout=5)
            if found.status_code != 200:
                return False
            partitions = found.json()["groups"][0]["partitions"]
            return any(
                (s["committed_offset"], s["log_end_offset"], s["lag"]) == state
                for partition in partitions
                for s in partition["samples"]
            )

        member.commit({tp: 3})
        wait_for(lambda: observed((3, 10, 7)), 30, "the exporter to observe the first commit")
        produce(stack, topic, 0, 4)
        wait_for(lambda: observed((3, 14, 11)), 30, "the exporter to observe the new records")
        member.commit({tp: 8})
        wait_for(lambda: observed((8, 14, 6)), 30, "the exporter to observe the second commit")

        response = httpx.get(f"{console_url}/groups/{group}", params={"format": "json"}, timeout=30)
        assert response.status_code == 200, response.text
        data = response.json()
        [partition] = data["partitions"]
        shown = points(partition["history"])
        distinct = [state for i, state in enumerate(shown) if i == 0 or shown[i - 1] != state]
        assert distinct == [(3, 10, 7), (3, 14, 11), (8, 14, 6)]
        assert points(data["lag_history"]["total"]) == shown  # one partition: the total is its own
        assert (data["lag_history"]["source"], data["lag_history"]["history_ms"]) == (
            f"{exporter_url}/lag-history",
            None,
        )
        # exactly the exporter's samples, oldest first (it has observed more since)
        exported = httpx.get(f"{exporter_url}/lag-history", params={"group": group}, timeout=5).json()
        # a sample taken before the first commit (the member registered, nothing committed yet) is marked
        # no_commit, and the console's history leaves it out
        [samples] = [
            [s for s in p["samples"] if not s.get("no_commit", False)]
            for p in exported["groups"][0]["partitions"]
        ]
        assert [(h["time_ms"], h["committed"], h["log_end"]) for h in partition["history"]] == [
            (s["observed_at_ms"], s["committed_offset"], s["log_end_offset"]) for s in samples[: len(shown)]
        ]

        unwatched = httpx.get(f"{exporter_url}/lag-history", params={"group": "nobody"}, timeout=5)
        assert (unwatched.status_code, unwatched.json()) == (
            404,
            {"groups": [], "error": "group 'nobody' is not watched by this lag exporter"},
        )

        visit.base_url = console_url
        page = visit.open(f"/groups/{group}", "zookeeper-group-history")
        sparks = page.locator("main svg.sparkline")
        assert sparks.count() == 2
        drawn = int(sparks.nth(0).get_attribute("data-points") or 0)  # the exporter observed on meanwhile
        assert drawn >= len(shown)
        polyline = sparks.nth(0).locator("polyline").get_attribute("points") or ""
        assert len(polyline.split()) == drawn

        # the stack's own console has no exporter: no history, and where it would come from
        data = json_of(stack, f"/groups/{group}")
        assert data["partitions"][0]["history"] == []
        assert data["lag_history"]["note"].startswith("ZooKeeper keeps only each partition's last commit")
    finally:
        member.close()
