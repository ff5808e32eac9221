"""The broker process: several brokers sharing a cluster, kill -9 and restart, a taken broker id; against
real broker processes and a real ZooKeeper."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.broker.server.helpers import (
    batch,
    connect,
    fetch,
    offsets_in,
    produce,
)
from tests.support.broker_cluster import BrokerCluster

# ------------------------------------------------------------------------------------------ metadata


def test_three_brokers_spread_a_twelve_partition_topic(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(3)
    assignment = cluster.create_topic("spread", 12)
    leaders = [assignment[p][0] for p in range(12)]
    assert sorted(leaders.count(b) for b in range(3)) == [4, 4, 4]
    for broker in cluster.brokers:
        conn = connect(broker)
        try:
            response = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name="spread")]))
        finally:
            conn.close()
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
            (b.broker_id, "127.0.0.1", b.port) for b in cluster.brokers
        ]
        assert response.controller_id == 0
        (topic,) = response.topics
        assert topic.error_code == 0
        assert [(p.partition_index, p.leader_id, list(p.replica_nodes)) for p in topic.partitions] == [
            (p, leaders[p], [leaders[p]]) for p in range(12)
        ]
        # each broker keeps exactly the partitions it leads
        on_disk = sorted(d.name for d in broker.log_dir.iterdir() if d.name.startswith("spread-"))
        assert on_disk == sorted(f"spread-{p}" for p in range(12) if leaders[p] == broker.broker_id)
    # a produce to a partition led elsewhere is refused with NOT_LEADER_OR_FOLLOWER
    other = next(p for p in range(12) if leaders[p] != 0)
    conn = connect(cluster.brokers[0])
    try:
        assert produce(conn, "spread", other, batch(0, 1)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        mine = next(p for p in range(12) if leaders[p] == 0)
        answer = produce(conn, "spread", mine, batch(0, 3))
        assert (answer.error_code, answer.base_offset) == (0, 0)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------ lifecycle


def test_kill_and_restart_keeps_every_acknowledged_record(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.brokers[0]
    broker_cluster.create_topic("durable", 1)
    conn = connect(broker)
    try:
        for i in range(20):
            assert produce(conn, "durable", 0, batch(i * 5, 5), acks=-1).base_offset == i * 5
    finally:
        conn.close()
    broker.kill()
    broker.restart()
    conn = connect(broker)
    try:
        parts = fetch(conn, [("durable", 0, 0, 1 << 20)])
        assert offsets_in(parts[("durable", 0)].records) == list(range(100))
        assert produce(conn, "durable", 0, batch(100, 1), acks=-1).base_offset == 100
    finally:
        conn.close()
    assert "is up" in broker.log()


def test_a_taken_broker_id_is_refused(broker_cluster: BrokerCluster, tmp_path: Any) -> None:
    taken = broker_cluster.brokers[0]
    config = tmp_path / "dup.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\nsession_timeout_ms = 1000\n'
        f'[broker]\nbroker_id = 0\nport = 0\n[log]\nlog_dirs = ["{tmp_path / "dup-logs"}"]\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "broker", "start"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "broker id 0 is taken" in result.stderr
    assert f"127.0.0.1:{taken.port}" in result.stderr
    assert taken.running


def test_a_sigterm_right_after_registration_shuts_down_cleanly(broker_cluster: BrokerCluster) -> None:
    # the harness returns as soon as the broker is registered, while start() may still be running: the
    # signal must not run shutdown() on top of it (it once deadlocked there until the harness's SIGKILL)
    broker = broker_cluster.broker(0)
    for round_number in range(5):
        broker.stop()
        text = broker.log()
        assert text.count("broker 0 stopped") == round_number + 1, text[-2000:]
        assert broker_cluster.zk.exists("/brokers/ids/0") is None
        broker.start()
