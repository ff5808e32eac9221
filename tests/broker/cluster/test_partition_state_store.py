"""Conditional state writes against a real ZooKeeper (broker/cluster/partition_state_store.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from broker.cluster.errors import ControllerMovedError
from broker.cluster.partition_state import PartitionState
from broker.cluster.partition_state_store import create_missing_states, update_isr, update_isrs, write_states
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition
from tests.broker.cluster.helpers import add_broker

TP0 = TopicPartition("t", 0)


def _setup(zk: Any, partitions: int = 1) -> TopicAdmin:
    for broker_id in (1, 2, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    zk.create("/controller_epoch", b"2")
    admin = TopicAdmin(zk)
    admin.create_topic("t", partitions, assignment={p: [1, 2, 3] for p in range(partitions)})
    return admin


def test_leader_isr_update_is_conditional(zk: Any) -> None:
    admin = _setup(zk)
    read = admin.describe_states("t")[0]
    assert read == PartitionState(1, 0, (1, 2, 3), 2, 0)
    shrunk = update_isr(zk, TP0, read, [1, 2])
    assert shrunk == PartitionState(1, 0, (1, 2), 2, 1)
    data, stat = zk.get("/brokers/topics/t/partitions/0/state")
    assert data == b'{"controller_epoch":2,"isr":[1,2],"leader":1,"leader_epoch":0,"version":1}'
    assert stat.version == 1
    # a second update from the stale read loses
    assert update_isr(zk, TP0, read, [1]) is None
    assert zk.get("/brokers/topics/t/partitions/0/state")[1].version == 1


def test_isr_updates_are_one_batch_each_judged_alone(zk: Any) -> None:
    admin = _setup(zk, partitions=300)
    states = admin.describe_states("t")
    stale = states[7]
    assert update_isr(zk, TopicPartition("t", 7), stale, [1, 3]) is not None  # partition 7 moves on
    changes: dict[TopicPartition, tuple[PartitionState, tuple[int, ...]]] = {
        TopicPartition("t", p): (states[p], (1, 2)) for p in range(300)
    }
    changes[TopicPartition("gone", 0)] = (states[0], (1,))
    written = update_isrs(zk, changes)
    assert len(written) == 301
    assert written[TopicPartition("t", 7)] is None  # BadVersion: only this one
    assert written[TopicPartition("gone", 0)] is None  # NoNode
    assert sorted(tp.partition for tp, state in written.items() if state is not None) == [
        p for p in range(300) if p != 7
    ]
    assert written[TopicPartition("t", 0)] == PartitionState(1, 0, (1, 2), 2, 1)
    for p in (0, 150, 299):
        data, stat = zk.get(f"/brokers/topics/t/partitions/{p}/state")
        assert (data, stat.version) == (
            b'{"controller_epoch":2,"isr":[1,2],"leader":1,"leader_epoch":0,"version":1}',
            1,
        )
    assert zk.get("/brokers/topics/t/partitions/7/state")[0] == (
        b'{"controller_epoch":2,"isr":[1,3],"leader":1,"leader_epoch":0,"version":1}'
    )


def test_isr_update_loses_to_a_controller_write(zk: Any) -> None:
    admin = _setup(zk)
    leader_read = admin.describe_states("t")[0]
    epoch_version = zk.get("/controller_epoch")[1].version
    elected = PartitionState(2, 1, (2, 3), 2)
    written = write_states(zk, {TP0: (leader_read, elected)}, epoch_version)
    assert written == {TP0: PartitionState(2, 1, (2, 3), 2, 1)}
    assert update_isr(zk, TP0, leader_read, [1, 2]) is None  # the old leader's shrink comes too late
    assert zk.get("/brokers/topics/t/partitions/0/state")[0] == (
        b'{"controller_epoch":2,"isr":[2,3],"leader":2,"leader_epoch":1,"version":1}'
    )
    assert update_isr(zk, TopicPartition("gone", 0), leader_read, [1]) is None  # NoNode


def test_a_controller_that_moved_cannot_write(zk: Any) -> None:
    admin = _setup(zk)
    read = admin.describe_states("t")[0]
    old_version = zk.get("/controller_epoch")[1].version
    zk.set("/controller_epoch", b"3", version=old_version)  # another controller was elected
    with pytest.raises(ControllerMovedError) as info:
        write_states(zk, {TP0: (read, PartitionState(2, 1, (2, 3), 2))}, old_version)
    assert str(info.value) == (
        "controller moved: /controller_epoch expected at znode version 0, found version 1 (epoch 3)"
    )
    assert zk.get("/brokers/topics/t/partitions/0/state")[1].version == 0  # nothing written


def test_stale_state_version_is_none_for_that_partition_only(zk: Any) -> None:
    admin = _setup(zk, partitions=2)
    states = admin.describe_states("t")
    tp1 = TopicPartition("t", 1)
    update_isr(zk, tp1, states[1], [1, 2])  # moves partition 1 on
    version = zk.get("/controller_epoch")[1].version
    result = write_states(
        zk,
        {TP0: (states[0], PartitionState(3, 1, (3,), 2)), tp1: (states[1], PartitionState(3, 1, (3,), 2))},
        version,
    )
    assert result == {TP0: PartitionState(3, 1, (3,), 2, 1), tp1: None}


def test_create_missing_states_for_an_old_topic(zk: Any) -> None:
    for broker_id in (1, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    zk.create("/controller_epoch", b"5")
    # an older Lumber's topic: only the assignment node; partition 1 got its <p> node but no state
    zk.create(
        "/brokers/topics/old", b'{"version":1,"partitions":{"0":[2,1,3],"1":[1,3],"2":[2]}}', makepath=True
    )
    zk.create("/brokers/topics/old/partitions/1", b"", makepath=True)
    created = create_missing_states(
        zk,
        {"old": {0: [2, 1, 3], 1: [1, 3], 2: [2]}},
        live_brokers=[1, 3],
        controller_epoch=5,
        controller_epoch_zk_version=0,
    )
    assert created == {
        TopicPartition("old", 0): PartitionState(1, 0, (1, 3), 5, 0),
        TopicPartition("old", 1): PartitionState(1, 0, (1, 3), 5, 0),
    }
    assert zk.get("/brokers/topics/old/partitions/0/state")[0] == (
        b'{"controller_epoch":5,"isr":[1,3],"leader":1,"leader_epoch":0,"version":1}'
    )
    assert zk.exists("/brokers/topics/old/partitions/2") is None  # broker 2 is down: no state
    # running it again creates nothing and leaves the states as they are
    assert create_missing_states(zk, {"old": {0: [2, 1, 3], 1: [1, 3]}}, [1, 3], 5, 0) == {}
    with pytest.raises(ControllerMovedError):
        create_missing_states(zk, {"old": {2: [2]}}, [2], 5, 7)


def test_thousand_partitions_created_loaded_and_rewritten(zk: Any) -> None:
    """1,000 partitions of 3 replicas, each state written, read and rewritten exactly. The times are printed
    only: how fast lives in ``bench/replication.py``'s scale part (BENCHMARKS.md), not in a timed test that
    a loaded machine fails (1.03 s against a 1 s bound once, at load average 12)."""
    for broker_id in (1, 2, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    zk.create("/controller_epoch", b"1")
    admin = TopicAdmin(zk)
    start = time.perf_counter()
    admin.create_topic("big", 1000, replication_factor=3)
    create_s = time.perf_counter() - start
    start = time.perf_counter()
    states = admin.describe_states("big")
    load_s = time.perf_counter() - start
    assert len(states) == 1000
    updates = {
        TopicPartition("big", p): (s, PartitionState(s.isr[1], s.leader_epoch + 1, s.isr[1:], 1))
        for p, s in states.items()
    }
    start = time.perf_counter()
    written = write_states(zk, updates, 0)
    write_s = time.perf_counter() - start
    assert all(w is not None and w.zk_version == 1 for w in written.values())
    assert admin.describe_states("big")[999] == written[TopicPartition("big", 999)]
    print(
        f"\n1000 partitions x3: create {create_s * 1000:.0f} ms, load {load_s * 1000:.0f} ms, "
        f"controller rewrite {write_s * 1000:.0f} ms"
    )
