"""The console shows the cluster's health, in Debian's Chromium against a stack of its own (three real
brokers and ``lumber console``): healthy, then with a broker killed: a banner naming the broker down and the
partitions offline, under min ISR and under-replicated; the dead broker listed as down; the topic page's ISR
column and marks (lumber/console/cluster_pages.py, topic_pages.py, cluster_reader.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.config import ConsoleConfig, LumberConfig, dump_config
from lumber.dev.process import free_port, start_and_wait, stop
from tests.lumber.console.conftest import Visit
from tests.support.broker_cluster import BrokerCluster, servers, wait_for
from tests.support.confluent_group import confluent_group_member

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def health_stack(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> Iterator[tuple[str, BrokerCluster]]:
    cluster = start_cluster(3)
    config = LumberConfig().replace(console=ConsoleConfig(port=free_port()))
    config = config.replace(zookeeper=config.zookeeper.replace(connect=cluster.zk_connect))
    config = config.replace(
        consumer=config.consumer.replace(
            bootstrap_servers=cluster.bootstrap_servers.split(","), auto_offset_reset="earliest"
        )
    )
    path = tmp_path / "console.toml"
    path.write_text(dump_config(config))
    url = f"http://127.0.0.1:{config.console.port}"

    def answers() -> bool:
        try:
            return httpx.get(url + "/?format=json", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    argv = [sys.executable, "-m", "lumber", "--config", str(path), "console"]
    console = start_and_wait("console", argv, tmp_path / "console.log", answers, timeout_s=60)
    try:
        yield url, cluster
    finally:
        stop(console[0], popen=console[1])


@pytest.fixture
def health_visit(browser: Any, health_stack: tuple[str, BrokerCluster], tmp_path: Path) -> Iterator[Visit]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    yield Visit(page, health_stack[0], tmp_path)
    page.close()


def cluster_json(url: str) -> Any:
    answer = httpx.get(url + "/", params={"format": "json"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_banner_names_a_broker_down_and_what_it_left_behind(
    health_stack: tuple[str, BrokerCluster], health_visit: Visit
) -> None:
    url, cluster = health_stack
    wait_for(lambda: cluster.controller_id() >= 0, 30, "a controller")
    victim = next(b for b in (2, 1) if b != cluster.controller_id())
    other = next(b for b in (0, 1, 2) if b not in (victim, cluster.controller_id()))
    survivor = cluster.controller_id()
    # events: replicated on all three, min.insync.replicas=3, so losing one puts it under min ISR
    cluster.create_topic("events", 1, {0: [survivor, other, victim]}, configs={"min.insync.replicas": "3"})
    cluster.create_topic("solo", 1, {0: [victim]})  # only the victim holds it: offline once it dies
    cluster.create_topic("pair", 1, {0: [other, victim]})  # loses a replica: under-replicated
    page = health_visit.open("/", "healthy")
    assert page.inner_text("#health") == "Healthy: every broker up, every partition led and fully replicated."

    cluster.brokers[victim].kill()
    wait_for(lambda: len(cluster_json(url)["problems"]) == 4, 60, "the console to see the broker gone")
    data = cluster_json(url)
    assert data["problems"] == [
        f"broker {victim} is down (not registered in ZooKeeper)",
        "1 partition offline (no live leader)",
        "1 partition under min ISR (acks=all produces refused)",
        "2 partitions under-replicated",
    ]
    up = sorted([(survivor, "up"), (other, "up")])
    assert [(b["id"], b["state"]) for b in data["brokers"]] == [*up, (victim, "down")]

    page = health_visit.open("/", "broker-down")
    assert page.get_attribute("#health", "role") == "alert"
    assert page.locator("#health li").all_inner_texts() == data["problems"]
    down_row = page.locator("main table").first.locator("tr.bad")
    assert down_row.locator("td").all_inner_texts() == [str(victim), "-", "down", ""]
    rows = {
        cells[0]: cells
        for cells in (
            r.locator("td").all_inner_texts()
            for r in page.locator("main table").nth(1).locator("tr").all()[1:]
        )
    }
    assert rows["solo"][2:6] == [
        "offline",
        str(victim),
        str(victim),
        "offline",
    ]  # the last ISR kept, as Kafka
    assert rows["events"][5] == "under-replicated, under min ISR (2 < 3)"
    assert rows["pair"][5] == "under-replicated"

    page = health_visit.open("/topics/events", "topic-under-min-isr")
    assert page.locator("#health li").all_inner_texts() == [
        "partition 0: under-replicated, under min ISR (2 < 3)"
    ]
    partition_row = page.locator("main table").first.locator("tr").nth(1)
    assert partition_row.get_attribute("class") == "bad"
    cells = partition_row.locator("td").all_inner_texts()
    assert cells[1:3] == [str(survivor), f"{survivor},{other},{victim}"]
    assert sorted(int(b) for b in cells[3].split(",")) == sorted((survivor, other))
    assert cells[4] == "under-replicated, under min ISR (2 < 3)"


def test_a_partition_without_a_commit_is_lag_from_the_reset_position(
    health_stack: tuple[str, BrokerCluster], health_visit: Visit
) -> None:
    """A confluent-kafka group reads both partitions and commits one: the other is "no commit", its lag
    from the log start (the console's [consumer] auto_offset_reset is earliest), in the group's total."""
    url, cluster = health_stack
    cluster.create_topic("events", 2, {0: [0], 1: [1]})
    with Producer(ProducerConfig(bootstrap_servers=servers(cluster), acks="all")) as producer:
        for i in range(10):
            producer.send("events", b"v%d" % i, partition=i % 2).result(10)
    with confluent_group_member(servers(cluster), "readers", "events", 10, {0: 4}):
        page = health_visit.open("/groups", "groups-no-commit")
        row = page.locator("main tr", has_text="readers").locator("td").all_inner_texts()
        assert row[5:7] == ["2", "6"]  # partitions, total lag: 1 + 5
        page = health_visit.open("/groups/readers", "group-no-commit")
        rows = page.locator("main table").nth(1).locator("tr").all()[1:]
        cells = [r.locator("td").all_inner_texts()[:6] for r in rows]
        assert [c[:2] + c[3:6] for c in cells] == [
            ["events", "0", "4", "5", "1"],
            ["events", "1", "no commit", "5", "5"],
        ]
        data = httpx.get(url + "/groups/readers", params={"format": "json"}, timeout=30).json()
    assert data["total_lag"] == 6
    assert [(p["lag"], p["no_commit"]) for p in data["partitions"]] == [(1, False), (5, True)]

    # the member left: reset the group's offsets from the console, after a confirmation showing the moves
    page = health_visit.open("/groups/readers?kind=kafka", "group-before-reset")
    page.fill('input[name="topic"]', "events")
    page.click('button:has-text("Show the moves")')
    page.wait_for_url("**/groups/readers/reset?topic=events&to=earliest&kind=kafka")
    moves = [r.locator("td").all_inner_texts() for r in page.locator("main table tr").all()[1:]]
    assert moves == [["0", "4", "0"], ["1", "-", "0"]]
    unchanged = httpx.get(url + "/groups/readers", params={"format": "json"}, timeout=30).json()
    # the confirmation wrote nothing (with no member, only committed partitions are listed)
    assert [(p["partition"], p["committed"]) for p in unchanged["partitions"]] == [(0, 4)]
    page.click("#confirm")
    page.wait_for_selector("#done")
    assert health_visit.errors == []
    after = httpx.get(url + "/groups/readers", params={"format": "json"}, timeout=30).json()
    assert [(p["committed"], p["lag"]) for p in after["partitions"]] == [(0, 5), (0, 5)]
    refused = httpx.post(
        url + "/groups/readers/reset", params={"topic": "events", "to": "latest"}, timeout=30
    )
    assert refused.status_code == 400


def test_a_throttled_move_in_progress_shows_its_replicas_throttle_and_bytes_left(
    health_stack: tuple[str, BrokerCluster], health_visit: Visit, tmp_path: Path
) -> None:
    """``lumber topics alter --replication-factor 3 --throttle 32KiB/s`` of a 3 MiB partition (a follower's
    first fetch may take up to 1 MiB before the throttle holds it back): while the copy runs the console
    shows the move (adding 1 and 2, throttled, the bytes each still copies, at most the leader's log), does
    not call the partition under-replicated, and counts it in the banner."""
    url, cluster = health_stack
    cluster.create_topic("moving", 1, {0: [0]})
    with Producer(ProducerConfig(bootstrap_servers=servers(cluster), acks="all")) as producer:
        for i in range(3072):
            producer.send("moving", b"%06d" % i + b"x" * 1018, partition=0)
        producer.flush()
    leader_bytes = sum(p.stat().st_size for p in (cluster.broker(0).log_dir / "moving-0").glob("*.log"))
    assert leader_bytes > 3 * 1024 * 1024
    config = tmp_path / "mover.toml"
    config.write_text(f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n')
    mover = subprocess.Popen(
        [
            *(sys.executable, "-m", "lumber", "--config", str(config), "topics", "alter", "moving"),
            *("--replication-factor", "3", "--throttle", "32768", "--timeout", "120s"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def moving_partition() -> dict[str, Any] | None:
            data = httpx.get(url + "/topics/moving", params={"format": "json"}, timeout=30).json()
            found: dict[str, Any] = data["partitions"][0]
            move = found["reassignment"]
            return found if move is not None and move["bytes_left"] and len(move["bytes_left"]) == 2 else None

        wait_for(lambda: moving_partition() is not None, 60, "the console to show the move")
        partition = moving_partition()
        assert partition is not None
        move = partition["reassignment"]
        assert (move["target_replicas"], move["adding_replicas"], move["removing_replicas"]) == (
            [0, 1, 2],
            [1, 2],
            [],
        )
        assert move["throttled"] is True
        assert sorted(move["bytes_left"]) == ["1", "2"]
        left = move["bytes_left"]
        assert all(0 < n <= leader_bytes for n in left.values()), (left, leader_bytes)
        assert partition["under_replicated"] is False
        assert "1 partition being reassigned" in cluster_json(url)["problems"]

        page = health_visit.open("/topics/moving", "topic-moving")
        cells = page.locator("main table").first.locator("tr").nth(1).locator("td").all_inner_texts()
        shown = (
            r"reassigning to 0,1,2 \(adding 1,2, removing -, throttled; "
            r"[\d,]+ bytes left on 1, [\d,]+ bytes left on 2\)"
        )
        assert re.fullmatch(shown, cells[4]), cells[4]
        assert health_visit.errors == []
    finally:
        mover.kill()
        mover.wait(10)
