"""The mirror tier of the audit across ``kill -9`` (issue 24), with real ZooKeeper, two real broker clusters
and a real registry: a ``lumber mirror`` process with ``[audit] state_dir`` killed twice mid-stream and
restarted counts every source record exactly once per window, while the target holds the records it copied
again after each kill twice (at-least-once)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import read_audit_events
from audit.audit_report import dedupe
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from lumber.dev.zookeeper_server import ZooKeeperServer
from schemas.client import SchemaRegistryClient
from tests.broker.client.helpers import consumer, producer
from tests.support.broker_cluster import BrokerCluster, servers, wait_for
from tests.support.registry import RegistryProcess, launch_registry
from tests.support.zookeeper import make_chroot

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "clicks"
PARTITIONS = 3
GROUP = "mirror-audit-kill"
WINDOW_MS = 60_000
BASE_MS = 1_700_000_000_000 - 1_700_000_000_000 % WINDOW_MS


@pytest.fixture
def registry(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> Iterator[RegistryProcess]:
    process = launch_registry(
        make_chroot(zookeeper_server.connect, "mirror_audit_registry"), tmp_path / "reg"
    )
    yield process
    process.stop()


def ends(cluster: BrokerCluster) -> list[int]:
    with consumer(cluster) as reader:
        found = reader.end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    return [found[TopicPartition(TOPIC, p)] for p in range(PARTITIONS)]


def total(cluster: BrokerCluster) -> int:
    return sum(ends(cluster))


def committed(source: BrokerCluster, partition: int) -> int:
    path = zk_paths.group_offset_path(GROUP, TOPIC, partition)
    return int(json.loads(source.zk.get(path)[0])["offset"]) if source.zk.exists(path) else 0


@pytest.mark.slow
def test_a_mirror_killed_twice_counts_every_source_record_once_per_window(
    start_cluster: Callable[..., BrokerCluster], registry: RegistryProcess, tmp_path: Path
) -> None:
    source = start_cluster(1)
    target = start_cluster(1)
    source.create_topic(TOPIC, PARTITIONS)
    config = tmp_path / "mirror.toml"
    config.write_text(
        f'[mirror]\ntopics = "{TOPIC}"\ngroup = "{GROUP}"\nstreams = 2\naudit_interval_ms = 300\n\n'
        f'[audit]\nstate_dir = "{tmp_path / "audit-state"}"\nwindow_ms = {WINDOW_MS}\n\n'
        f'[registry]\nurl = "{registry.url}"\n\n'
        "[group]\nsession_timeout_ms = 3000\nauto_commit_interval_ms = 500\n\n"
        "[consumer]\nfetch_max_wait_ms = 100\n\n[producer]\nlinger_ms = 5\n"
    )
    produced: Counter[int] = Counter()  # window start -> records
    stop_producing = threading.Event()

    def produce() -> None:
        n = 0
        with producer(source, acks="all") as p:
            while not stop_producing.is_set():
                for _ in range(20):
                    timestamp_ms = BASE_MS + (n * 7919) % (3 * WINDOW_MS)
                    p.send(TOPIC, b"%d" % n, partition=n % PARTITIONS, timestamp_ms=timestamp_ms)
                    produced[timestamp_ms - timestamp_ms % WINDOW_MS] += 1
                    n += 1
                p.flush()
                time.sleep(0.01)

    log = (tmp_path / "mirror.log").open("ab")

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable, "-m", "lumber", "--config", str(config), "mirror",
                "--source-zookeeper", source.zk_connect, "--target-zookeeper", target.zk_connect,
            ],
            cwd=ROOT,
            stderr=log,
        )  # fmt: skip

    rng = random.Random(24)
    feeder = threading.Thread(target=produce, daemon=True)
    process = start()
    try:
        feeder.start()
        for kill in range(2):
            at_start = [committed(source, p) for p in range(PARTITIONS)]
            wait_for(  # it copied, published counts and committed: a kill now leaves something behind
                lambda s=at_start: all(committed(source, p) > s[p] + 100 for p in range(PARTITIONS)),  # type: ignore[misc]
                60,
                f"mirror {kill} to copy and commit",
            )
            time.sleep(rng.uniform(0.1, 1.0))  # anywhere between commits (every 500 ms)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            process = start()
        time.sleep(1.0)
        stop_producing.set()
        feeder.join(20)
        source_ends = dict(enumerate(ends(source)))
        wait_for(
            lambda: all(committed(source, p) == end for p, end in source_ends.items()),
            60,
            "the last mirror to copy and commit the rest",
        )  # a clean stop then publishes its last counts
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        stop_producing.set()
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()

    codec = AuditEventCodec(SchemaRegistryClient(registry.url))
    try:
        read = read_audit_events(ConsumerConfig(bootstrap_servers=servers(target)), codec, topic="_audit")
    finally:
        codec.close()
    unique = dedupe(read.events)
    assert unique.conflicts == ()
    mirrored: Counter[int] = Counter()
    for event in unique.events:
        assert (event.tier, event.topic) == ("mirror", TOPIC)
        mirrored[event.window_start_ms] += event.count
    assert sorted(produced) == [BASE_MS, BASE_MS + WINDOW_MS, BASE_MS + 2 * WINDOW_MS]
    assert mirrored == produced  # every source record once, across both kills
    assert len({e.counter for e in unique.events}) == 1  # one journal, one counter id
    assert total(target) > sum(produced.values())  # the target holds what was copied again after a kill
