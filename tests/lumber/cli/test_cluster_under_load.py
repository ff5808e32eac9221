"""``lumber cluster rebalance`` and ``decommission`` on real brokers and ZooKeeper, under a steady idempotent
acks=all producer (and a consumer group): grow a cluster from 3 to 5 brokers and rebalance, drain a broker
that leads partitions and stop it. Every acknowledged record is read back (by the group exactly once)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.acked_producer import (
    REPLICATION,
    AckedProducer,
    check_every_acknowledged_record,
    read_partitions,
)
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import KafkaError

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop, pytest.mark.slow]

SETTINGS: dict[str, Any] = {
    **REPLICATION,
    "flush_on_ack": True,
    "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
}


class GroupReader:
    """A confluent-kafka consumer in group ``readers`` on a thread: every value it is given, and every
    error that is not retriable."""

    def __init__(self, cluster: BrokerCluster, topic: str) -> None:
        self.values: Counter[bytes] = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._consumer = ConfluentConsumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "readers",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is None:
                self.values[message.value() or b""] += 1
            elif error.code() != KafkaError._PARTITION_EOF and not error.retriable():
                self.errors.append(str(error))
        self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def lumber_cluster(cluster: BrokerCluster, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "cli.toml"
    config.write_text(f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n')
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "cluster", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def replica_counts(cluster: BrokerCluster) -> Counter[int]:
    counts: Counter[int] = Counter()
    for topic in cluster.admin.list_topics():
        for replicas in cluster.admin.describe_topic(topic).values():
            counts.update(replicas)
    return counts


def test_grow_from_3_to_5_brokers_and_rebalance_under_load(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("grow", 6, replication_factor=2)
    load = AckedProducer(cluster, "grow", 6).start()
    reader = GroupReader(cluster, "grow")
    wait_for(lambda: len(load.acknowledged) >= 1000, 60, "1000 acknowledged records")
    cluster.add_broker(SETTINGS)
    cluster.add_broker(SETTINGS)
    planned = lumber_cluster(cluster, tmp_path, "rebalance", "--plan")
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.count(" -> ") >= 4
    done = lumber_cluster(cluster, tmp_path, "rebalance", "--execute", "--timeout", "150s")
    assert done.returncode == 0, done.stderr + done.stdout
    counts = replica_counts(cluster)
    assert set(counts) == {0, 1, 2, 3, 4}
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    acked_at_move = len(load.acknowledged)
    wait_for(lambda: len(load.acknowledged) >= acked_at_move + 500, 60, "500 records after the rebalance")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    wait_for(lambda: set(load.acknowledged) <= set(reader.values), 90, "the group to read every record")
    reader.stop()
    assert reader.errors == []
    twice = {v: n for v, n in reader.values.items() if n > 1}
    assert twice == {}, f"{len(twice)} records consumed more than once"
    check_every_acknowledged_record(read_partitions(cluster, "grow", 6), load, exactly_once=True)


def test_decommission_a_leader_under_load_then_stop_it(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("drain", 4, replication_factor=2)
    leaving = cluster.state_of("drain", 0).leader
    held = replica_counts(cluster)[leaving]
    load = AckedProducer(cluster, "drain", 4).start()
    wait_for(lambda: len(load.acknowledged) >= 1000, 60, "1000 acknowledged records")
    result = lumber_cluster(cluster, tmp_path, "decommission", str(leaving), "--timeout", "120s")
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout.splitlines()[-1] == (
        f"broker {leaving} holds no replicas and leads no partition: it may be stopped"
    )
    # each move adds one replica: it copies the leader's log, records acknowledged so far (never nothing)
    moves = [
        re.fullmatch(r"drain-\d: \[.*\] -> \[.*\]  copies ([\d,]+) bytes", line)
        for line in result.stdout.splitlines()
        if " -> " in line
    ]
    copies = [int(m[1].replace(",", "")) for m in moves if m is not None]
    assert len(copies) == len(moves) == held, result.stdout
    assert min(copies) > 0
    assert f"{len(copies)} moves copy {sum(copies):,} bytes in all" in result.stdout.splitlines()
    assert replica_counts(cluster)[leaving] == 0
    wait_for(
        lambda: not list(cluster.broker(leaving).log_dir.glob("drain-*")),
        30,
        f"broker {leaving} to delete its replicas",
    )
    cluster.broker(leaving).stop()
    acked_at_stop = len(load.acknowledged)
    wait_for(lambda: len(load.acknowledged) >= acked_at_stop + 500, 60, "500 records after the stop")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    check_every_acknowledged_record(read_partitions(cluster, "drain", 4), load, exactly_once=True)
