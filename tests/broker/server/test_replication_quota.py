"""The replication throttle: the quota's budget on a fake clock, and a throttled move between real brokers
on a real ZooKeeper (``lumber topics alter --replication-factor 3 --throttle``), whose copy rate is measured
from the new replicas' files as they grow."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.server.replication_quota import BURST_S, ReplicationQuota
from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer as ConfluentProducer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_refills_at_the_rate_up_to_the_burst_and_goes_negative_by_one_copy() -> None:
    clock = FakeClock()
    rate: list[int | None] = [1000]
    quota = ReplicationQuota(lambda: rate[0], clock)
    assert not quota.exceeded()
    quota.record(600)  # the first copy may go (checked before, recorded after: Kafka's contract)
    assert quota.exceeded()
    assert quota.wait_s() == pytest.approx(0.6)
    clock.now += 0.61
    assert not quota.exceeded()
    clock.now += 60  # idle: the budget holds at most BURST_S of the rate
    quota.record(int(1000 * BURST_S))
    assert not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()
    rate[0] = None  # the throttle removed: never exceeded, bytes still counted
    assert not quota.exceeded()
    assert quota.recorded_bytes == 600 + 250 + 1


def log_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.log")) if folder.is_dir() else 0


@pytest.mark.zookeeper
@pytest.mark.interop
def test_a_throttled_move_copies_within_20_percent_of_the_rate(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    # fetches of 128 KiB: the rate is measured over many of them, not a few large ones
    cluster = start_cluster(3, replica_fetch_max_bytes=131072, replica_lag_time_max_ms=3000)
    cluster.create_topic("slow", 1, {0: [0]})
    producer = ConfluentProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20})
    for i in range(4096):
        producer.produce("slow", b"%06d" % i + b"x" * 1018, partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    source = cluster.broker(0).log_dir / "slow-0"
    size = log_bytes(source)
    assert size > 4 * 1024 * 1024
    rate = 1024 * 1024
    config = tmp_path / "lumber.toml"
    config.write_text(f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n')
    command = [sys.executable, "-m", "lumber", "--config", str(config), "topics", "alter", "slow"]
    mover = subprocess.Popen(
        [*command, "--replication-factor", "3", "--throttle", str(rate), "--timeout", "60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    targets = [cluster.broker(b).log_dir / "slow-0" for b in (1, 2)]
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        copied = sum(log_bytes(t) for t in targets)
        samples.append((time.monotonic(), copied))
        if copied >= 2 * size:
            break
        time.sleep(0.1)
    out, err = mover.communicate(timeout=60)
    assert mover.returncode == 0, err
    assert "topic 'slow' has replication factor 3 now" in out
    started = next(t for t, copied in samples if copied > 0)
    finished = next(t for t, copied in samples if copied >= 2 * size)
    measured = 2 * size / (finished - started)
    print(f"copied {2 * size} bytes in {finished - started:.2f} s: {measured:.0f} B/s, throttle {rate} B/s")
    assert 0.8 * rate <= measured <= 1.2 * rate, (
        f"copied {2 * size} bytes at {measured:.0f} B/s, throttle {rate}"
    )
    # removed once the move is done
    assert cluster.zk.get("/config/brokers/0")[0].count(b"throttled.rate") == 0
    wait_for(lambda: cluster.admin.describe_topic("slow") == {0: (0, 1, 2)}, 10, "slow on [0, 1, 2]")
