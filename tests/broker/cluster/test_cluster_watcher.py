"""The broker's watch on ZooKeeper's cluster state (broker/cluster/cluster_watcher.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.protocol.states import Callback

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.broker_registration import BrokerRegistration
from broker.cluster.cluster_view import EMPTY_VIEW, ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.partition_state import PartitionState
from broker.cluster.partition_state_store import update_isr
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zk_paths import encode_assignment
from broker.record.topic_partition import TopicPartition
from tests.broker.cluster.helpers import add_broker, wait_until
from tests.support.zookeeper import expire_session, new_client

B1 = BrokerInfo(1, "127.0.0.1", 9091)
B2 = BrokerInfo(2, "127.0.0.1", 9092)
WAIT_S = 10.0


class Changes:
    """Records on_change calls and the threads they ran on."""

    def __init__(self) -> None:
        self.calls: list[tuple[ClusterView, ClusterView]] = []
        self.threads: set[str] = set()
        self.concurrent = 0
        self._active = 0
        self._lock = threading.Lock()

    def __call__(self, old: ClusterView, new: ClusterView) -> None:
        with self._lock:
            self._active += 1
            self.concurrent = max(self.concurrent, self._active)
        self.threads.add(threading.current_thread().name)
        self.calls.append((old, new))
        with self._lock:
            self._active -= 1

    def wait(self, count: int, last: ClusterView | None = None) -> list[tuple[ClusterView, ClusterView]]:
        """The calls, once there are ``count`` and (given ``last``) the latest one brought ``last``: the
        notify thread may still be delivering the view the watcher already holds."""
        wait_until(
            lambda: len(self.calls) >= count and (last is None or self.calls[-1][1] == last),
            WAIT_S,
            f"{count} on_change calls" + ("" if last is None else ", the last bringing the view awaited"),
        )
        return list(self.calls)


@pytest.fixture
def other(zk_connect: str) -> Iterator[Any]:
    """A second session: the other brokers and the admin tool."""
    client = new_client(zk_connect)
    yield client
    client.stop()
    client.close()


def test_start_reads_the_current_state(zk: Any, other: Any) -> None:
    add_broker(other, 1, 9091)
    # broker 2 is down: write the assignment as it was made while it was up
    other.create("/brokers/topics/events", encode_assignment({0: [1], 1: [2]}), makepath=True)
    watcher = ClusterWatcher(zk)
    watcher.start()
    try:
        assert watcher.view == ClusterView(brokers={1: B1}, topics={"events": {0: (1,), 1: (2,)}})
        assert watcher.view.controller_id == -1  # no /controller
        # a topic node of an older Lumber: no state nodes, so no leader until the controller makes them
        assert watcher.view.leader("events", 0) == -1
        assert watcher.view.leader("events", 1) == -1
        assert watcher.view.partitions_of(2) == [TopicPartition("events", 1)]
    finally:
        watcher.stop()


def test_empty_cluster_creates_the_parents(zk: Any) -> None:
    watcher = ClusterWatcher(zk)
    watcher.start()
    try:
        assert watcher.view == EMPTY_VIEW
        assert sorted(zk.get_children("/brokers")) == ["ids", "topics"]
        assert watcher.wait_for(lambda v: 1 in v.brokers, 0.2) is False
    finally:
        watcher.stop()


def test_sees_brokers_and_topics_come_and_go_with_exact_changes(zk: Any, other: Any, zk_connect: str) -> None:
    changes = Changes()
    watcher = ClusterWatcher(zk, on_change=changes)
    watcher.start()
    admin = TopicAdmin(other)
    second = new_client(zk_connect)
    try:
        v0 = EMPTY_VIEW
        registration = BrokerRegistration(other, 1, "127.0.0.1", 9091)
        registration.register()
        v1 = ClusterView(brokers={1: B1}, topics={})
        assert watcher.wait_for(lambda v: v == v1, WAIT_S)
        assert changes.wait(1) == [(v0, v1)]

        admin.create_topic("t", 3, assignment={0: [1], 1: [1], 2: [1]})
        other.set("/brokers/topics/t", encode_assignment({0: [1], 1: [2], 2: [1]}))  # 2 is not up yet
        other.set(
            "/brokers/topics/t/partitions/1/state",
            b'{"controller_epoch":0,"isr":[2],"leader":2,"leader_epoch":1,"version":1}',
        )
        states = {
            TopicPartition("t", 0): PartitionState(1, 0, (1,), 0, 0),
            TopicPartition("t", 1): PartitionState(2, 1, (2,), 0, 1),
            TopicPartition("t", 2): PartitionState(1, 0, (1,), 0, 0),
        }
        v2 = ClusterView(brokers={1: B1}, topics={"t": {0: (1,), 1: (2,), 2: (1,)}}, states=states)
        assert watcher.wait_for(lambda v: v == v2, WAIT_S)
        assert watcher.view.leader("t", 1) == -1

        add_broker(second, 2, 9092)
        v3 = ClusterView(brokers={1: B1, 2: B2}, topics={"t": {0: (1,), 1: (2,), 2: (1,)}}, states=states)
        assert watcher.wait_for(lambda v: v == v3, WAIT_S)
        assert watcher.view.leader("t", 1) == 2

        registration.deregister()
        v4 = ClusterView(brokers={2: B2}, topics={"t": {0: (1,), 1: (2,), 2: (1,)}}, states=states)
        assert watcher.wait_for(lambda v: v == v4, WAIT_S)
        assert watcher.view.controller_id == -1
        assert watcher.view.leader("t", 0) == -1

        admin.delete_topic("t")
        v5 = ClusterView(brokers={2: B2}, topics={})
        assert watcher.wait_for(lambda v: v == v5, WAIT_S)

        second.stop()  # broker 2's session ends: its node goes at once
        v6 = EMPTY_VIEW
        assert watcher.wait_for(lambda v: v == v6, WAIT_S)

        calls = changes.wait(6, last=v6)
        # the creation, the rewritten assignment and the state may arrive as one to three changes
        assert calls[0] == (v0, v1)
        assert calls[-4:] == [(calls[-4][0], v3), (v3, v4), (v4, v5), (v5, v6)]
        assert calls[-4][0] == v2
        assert all(old == prev_new for (old, _), (_, prev_new) in zip(calls[1:], calls, strict=False))
        assert changes.threads == {"cluster-watcher-notify"}
        assert changes.concurrent == 1
    finally:
        watcher.stop()
        second.stop()
        second.close()


def test_refresh_reads_at_once_and_the_watch_agrees(zk: Any, other: Any) -> None:
    add_broker(zk, 1, 9091)
    changes = Changes()
    watcher = ClusterWatcher(zk, on_change=changes)
    watcher.start()
    try:
        TopicAdmin(zk).create_topic("fresh", 1)
        view = watcher.refresh()
        expected = ClusterView(
            brokers={1: B1},
            topics={"fresh": {0: (1,)}},
            states={TopicPartition("fresh", 0): PartitionState(1, 0, (1,), 0, 0)},
        )
        assert view == expected
        assert watcher.view == expected
        # the watch fires too; it finds nothing new, so there is exactly one change
        assert changes.wait(1) == [(ClusterView(brokers={1: B1}, topics={}), expected)]
        TopicAdmin(other).create_topic("later", 1)
        assert watcher.wait_for(lambda v: "later" in v.topics, WAIT_S)
        assert len(changes.wait(2)) == 2
    finally:
        watcher.stop()


def test_controller_id_reads_an_election_the_watch_has_not_delivered(zk: Any, other: Any) -> None:
    # kazoo delivers watch events on one callback thread: held here, the watcher cannot hear of the
    # election, as on a busy broker just after it registered (a client asking then was told "none")
    watcher = ClusterWatcher(zk)
    watcher.start()
    gate = threading.Event()
    held = threading.Event()

    def hold() -> None:
        held.set()
        gate.wait(WAIT_S)

    zk.handler.dispatch_callback(Callback("watch", hold, ()))
    try:
        assert held.wait(WAIT_S)
        other.create("/controller", b'{"brokerid":2,"timestamp":"1","version":1}', ephemeral=True)
        assert watcher.view.controller_id == -1  # the watch is held
        assert watcher.controller_id() == 2
        assert watcher.view.controller_id == 2  # published, so later answers agree
        other.delete("/controller")
        assert watcher.controller_id() == 2  # a known controller is the view's: no read per request
    finally:
        gate.set()
        watcher.stop()


def test_changed_topic_data_is_seen(zk: Any, other: Any) -> None:
    add_broker(other, 1, 9091)
    add_broker(other, 2, 9092)
    TopicAdmin(other).create_topic("grow", 1, assignment={0: [1]})
    watcher = ClusterWatcher(zk)
    watcher.start()
    try:
        # an assignment rewritten in place (what adding partitions does in Kafka)
        other.set("/brokers/topics/grow", b'{"version":1,"partitions":{"0":[1],"1":[2]}}')
        assert watcher.wait_for(lambda v: v.topics.get("grow") == {0: (1,), 1: (2,)}, WAIT_S)
    finally:
        watcher.stop()


def test_unreadable_topic_keeps_its_last_assignment(
    zk: Any, other: Any, caplog: pytest.LogCaptureFixture
) -> None:
    add_broker(other, 1, 9091)
    TopicAdmin(other).create_topic("good", 1)
    other.create("/brokers/topics/garbage", b"not json")
    watcher = ClusterWatcher(zk)
    watcher.start()
    try:
        assert watcher.view.topics == {"good": {0: (1,)}}
        other.set("/brokers/topics/good", b'{"version":1}')
        TopicAdmin(other).create_topic("marker", 1)
        assert watcher.wait_for(lambda v: "marker" in v.topics, WAIT_S)
        assert watcher.view.topics == {"good": {0: (1,)}, "marker": {0: (1,)}}
        errors = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
        assert errors[0].startswith("cluster: topic 'garbage': /brokers/topics/garbage: does not hold JSON")
        assert errors[0].endswith("; leaving it out")
        assert any(
            m.startswith("cluster: topic 'good': /brokers/topics/good: is not a partition assignment")
            and m.endswith("; keeping its last assignment")
            for m in errors
        )
    finally:
        watcher.stop()


def test_on_change_errors_are_logged_and_later_changes_still_delivered(
    zk: Any, other: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[ClusterView] = []

    def on_change(_old: ClusterView, new: ClusterView) -> None:
        seen.append(new)
        if len(seen) == 1:
            raise RuntimeError("listener bug")

    watcher = ClusterWatcher(zk, on_change=on_change)
    watcher.start()
    try:
        add_broker(other, 1, 9091)
        wait_until(lambda: len(seen) == 1, WAIT_S)
        add_broker(other, 2, 9092)
        wait_until(lambda: len(seen) == 2, WAIT_S)
        assert seen == [
            ClusterView(brokers={1: B1}, topics={}),
            ClusterView(brokers={1: B1, 2: B2}, topics={}),
        ]
        failures = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in failures] == [
            "cluster: on_change failed for the change to brokers [1], topics []"
        ]
        assert failures[0].exc_info is not None
        assert str(failures[0].exc_info[1]) == "listener bug"
    finally:
        watcher.stop()


def test_watches_come_back_after_session_expiry(zk: Any, other: Any, zk_connect: str) -> None:
    add_broker(other, 1, 9091)
    changes = Changes()
    watcher = ClusterWatcher(zk, on_change=changes)
    watcher.start()
    try:
        first_session = zk.client_id[0]
        expire_session(zk, zk_connect)
        wait_until(lambda: zk.connected and zk.client_id[0] != first_session, WAIT_S, "a new session")
        admin = TopicAdmin(other)
        admin.create_topic("after", 1)
        expected = ClusterView(
            brokers={1: B1},
            topics={"after": {0: (1,)}},
            states={TopicPartition("after", 0): PartitionState(1, 0, (1,), 0, 0)},
        )
        assert watcher.wait_for(lambda v: v == expected, WAIT_S)
        add_broker(other, 2, 9092)
        assert watcher.wait_for(lambda v: 2 in v.brokers, WAIT_S)
        admin.delete_topic("after")
        assert watcher.wait_for(lambda v: not v.topics, WAIT_S)
        final = ClusterView(brokers={1: B1, 2: B2}, topics={})
        assert watcher.view == final
        calls = changes.wait(3)
        assert calls[-1][1] == final
        assert all(old == prev_new for (old, _), (_, prev_new) in zip(calls[1:], calls, strict=False))
    finally:
        watcher.stop()


def test_stop_ends_the_notifications(zk: Any, other: Any) -> None:
    changes = Changes()
    watcher = ClusterWatcher(zk, on_change=changes)
    # another module's watcher may live on this worker (tests/lumber/console's session-long group leader)
    before = set(threading.enumerate())
    watcher.start()
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith("cluster-watcher")]
    assert sorted(t.name for t in started) == ["cluster-watcher", "cluster-watcher-notify"]
    add_broker(other, 1, 9091)
    changes.wait(1)
    watcher.stop()
    watcher.stop()  # idempotent
    assert [t.name for t in started if t.is_alive()] == []
    add_broker(other, 2, 9092)
    TopicAdmin(other).create_topic("ignored", 1)
    # a fresh watcher sees it, the stopped one does not
    fresh = ClusterWatcher(zk)
    fresh.start()
    try:
        assert sorted(fresh.view.brokers) == [1, 2]
    finally:
        fresh.stop()
    assert watcher.view == ClusterView(brokers={1: B1}, topics={})
    assert len(changes.calls) == 1


def test_states_controller_configs_and_shutdowns_are_watched(zk: Any, other: Any) -> None:
    for broker_id in (1, 2):
        add_broker(other, broker_id, 9090 + broker_id)
    TopicAdmin(other).create_topic(
        "r", 2, assignment={0: [1, 2], 1: [2, 1]}, configs={"min.insync.replicas": "2"}
    )
    changes = Changes()
    watcher = ClusterWatcher(zk, on_change=changes)
    watcher.start()
    try:
        tp = TopicPartition("r", 0)
        assert watcher.view.state(tp) == PartitionState(1, 0, (1, 2), 0, 0)
        assert watcher.view.topic_configs == {"r": {"min.insync.replicas": "2"}}
        assert watcher.view.under_replicated(tp) is False

        start = time.perf_counter()
        assert update_isr(other, tp, watcher.view.states[tp], [1]) is not None
        assert watcher.wait_for(lambda v: v.isr(tp) == (1,), WAIT_S)
        latency_ms = (time.perf_counter() - start) * 1000
        print(f"\nstate change seen by the watcher after {latency_ms:.1f} ms")
        assert latency_ms < 500
        assert watcher.view.under_replicated(tp) is True
        assert watcher.view.states[tp].zk_version == 1

        other.create("/controller", b'{"brokerid":2,"timestamp":"1","version":1}', ephemeral=True)
        assert watcher.wait_for(lambda v: v.controller_id == 2, WAIT_S)
        other.create(
            "/admin/controlled_shutdown/1",
            b'{"broker":1,"timestamp_ms":1,"version":1}',
            makepath=True,
            ephemeral=True,
        )
        assert watcher.wait_for(lambda v: v.shutting_down == frozenset({1}), WAIT_S)
        other.set("/config/topics/r", b'{"config":{"min.insync.replicas":"1"},"version":1}')
        assert watcher.wait_for(lambda v: v.topic_config("r") == {"min.insync.replicas": "1"}, WAIT_S)
        other.delete("/controller")
        other.delete("/admin/controlled_shutdown/1")
        assert watcher.wait_for(lambda v: v.controller_id == -1 and not v.shutting_down, WAIT_S)
        # an old topic's states created later (the controller's repair) are seen
        other.create("/brokers/topics/old", encode_assignment({0: [1]}))
        assert watcher.wait_for(lambda v: "old" in v.topics, WAIT_S)
        assert watcher.view.leader("old", 0) == -1
        other.create(
            "/brokers/topics/old/partitions/0/state",
            b'{"controller_epoch":1,"isr":[1],"leader":1,"leader_epoch":0,"version":1}',
            makepath=True,
        )
        assert watcher.wait_for(lambda v: v.leader("old", 0) == 1, WAIT_S)
        # calls chain and the old view never goes back
        calls = changes.calls
        assert all(old == prev_new for (old, _), (_, prev_new) in zip(calls[1:], calls, strict=False))
    finally:
        watcher.stop()


def test_thousand_partitions_load_and_one_change_is_one_read(zk: Any, other: Any) -> None:
    for broker_id in (1, 2, 3):
        add_broker(other, broker_id, 9090 + broker_id)
    TopicAdmin(other).create_topic("big", 1000, replication_factor=3)
    watcher = ClusterWatcher(zk)
    start = time.perf_counter()
    watcher.start()
    load_s = time.perf_counter() - start
    try:
        assert len(watcher.view.states) == 1000
        print(f"\nwatcher start with 1000 partitions x3: {load_s * 1000:.0f} ms")  # printed, not bounded
        tp = TopicPartition("big", 500)
        state = watcher.view.states[tp]
        other.set(
            "/brokers/topics/big/partitions/500/state",
            b'{"controller_epoch":0,"isr":[%d],"leader":%d,"leader_epoch":1,"version":1}'
            % (state.isr[0], state.isr[0]),
        )
        start = time.perf_counter()
        assert watcher.wait_for(lambda v: v.leader_epoch(tp) == 1, WAIT_S)
        print(f"one state change among 1000 seen after {(time.perf_counter() - start) * 1000:.1f} ms")
    finally:
        watcher.stop()
