"""The bytes ``lumber cluster rebalance --plan`` says each move copies (lumber/cli/partition_sizes.py),
against real brokers and a real ZooKeeper: a 3-broker cluster holding records of known sizes grows a
fourth broker; each move's ``bytes`` is the leader's log of the partition, counted from the segment files
in its log directory, times the replicas the move adds, and ``total_bytes`` their sum. On SASL listeners
with the ACL authorizer: a super user sees the sizes, a principal without DESCRIBE on the cluster gets the
plan without them and one warning line saying why."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.broker.server.acl_cluster import PASSWORDS, AclCluster, acl_cluster
from tests.support.acked_producer import REPLICATION
from tests.support.broker_cluster import BrokerCluster
from tests.support.secure_broker import PASSWORD, USER, SecureBroker

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer

__all__ = ["acl_cluster"]  # the fixture: two SASL brokers with the authorizer

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def plan(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "cluster", "rebalance", "--plan", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def log_bytes(cluster: BrokerCluster, broker: int, topic: str, partition: int) -> int:
    """The bytes of the partition's segment files (``*.log``) in the broker's log directory."""
    directory = cluster.broker(broker).log_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_rebalance_plan_gives_the_bytes_each_move_copies(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(3, **REPLICATION, flush_on_ack=True)
    cluster.create_topic("sized", 6, replication_factor=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    for p in range(6):
        for i in range(10 * (p + 1)):  # partition p: 10(p+1) records of 100(p+1) bytes
            producer.produce("sized", b"x" * (100 * (p + 1)) + b"%04d" % i, partition=p)
        producer.flush(30)
    assert len(producer) == 0
    cluster.add_broker({**REPLICATION, "flush_on_ack": True})
    before = {p: cluster.admin.describe_topic("sized")[p] for p in range(6)}
    leaders = {p: cluster.state_of("sized", p).leader for p in range(6)}
    sizes = {p: log_bytes(cluster, leaders[p], "sized", p) for p in range(6)}
    assert all(sizes[p] > 1000 * (p + 1) for p in range(6)), sizes
    assert len(set(sizes.values())) == 6  # each partition its own size: a move cannot take another's

    config = tmp_path / "cli.toml"
    config.write_text(f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n')
    done = plan(config)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    answer = json.loads(done.stdout)
    moves = answer["moves"]
    assert {m["topic"] for m in moves} == {"sized"}
    expected = {}
    for move in moves:
        p = move["partition"]
        assert move["current"] == list(before[p])
        added = len(set(move["replicas"]) - set(before[p]))
        expected[p] = sizes[p] * added
    assert {m["partition"]: m["bytes"] for m in moves} == expected
    # 12 replicas on 4 brokers: 3 each, so 3 replicas land on broker 3, each a copy
    assert sum(3 in m["replicas"] for m in moves) == 3
    assert sorted(b for b in expected.values() if b) == sorted(
        sizes[m["partition"]] for m in moves if 3 in m["replicas"]
    )
    assert answer["total_bytes"] == sum(expected.values()) > 0

    text = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "cluster", "rebalance", "--plan"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    for move in moves:
        moved = f"sized-{move['partition']}: {move['current']} -> {move['replicas']}"
        assert f"{moved}  copies {move['bytes']:,} bytes" in text
    assert text[-1] == f"{len(moves)} moves copy {answer['total_bytes']:,} bytes in all"

    # [consumer] asks for a protocol no broker listens on: the plan without sizes, and why
    ssl = tmp_path / "ssl.toml"
    ssl.write_text(f'{config.read_text()}[consumer]\nsecurity_protocol = "SSL"\n')
    unsized = plan(ssl)
    assert unsized.returncode == 0, unsized.stderr
    first = min(leaders[m["partition"]] for m in moves if m["bytes"])
    why = f"broker {first} has no SSL listener ([consumer] security_protocol)"
    assert unsized.stderr.splitlines() == [
        f"lumber: warning: the bytes each move copies are not shown: {why}"
    ]
    assert json.loads(unsized.stdout) == {
        "moves": [{**m, "bytes": None} for m in moves],
        "total_bytes": None,
    }


def sasl_config(tmp_path: Path, acl_cluster: AclCluster, user: str) -> Path:
    password = tmp_path / f"{user}.password"
    password.write_text(PASSWORDS[user] + "\n")
    config = tmp_path / f"{user}.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{acl_cluster.cluster.zk_connect}"\n'
        '[consumer]\nsecurity_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "SCRAM-SHA-512"\n'
        f'sasl_username = "{user}"\nsasl_password_file = "{password}"\n'
    )
    return config


def test_sizes_over_sasl_and_a_warning_without_describe_on_the_cluster(
    acl_cluster: AclCluster, tmp_path: Path
) -> None:
    cluster = acl_cluster.cluster
    cluster.create_topic("sz-sasl", 2, {0: [0], 1: [0]})
    producer = Producer({**acl_cluster.confluent("admin"), "acks": "all"})
    for i in range(50):
        producer.produce("sz-sasl", b"y" * 200 + b"%03d" % i, partition=i % 2)
    producer.flush(30)
    assert len(producer) == 0

    admin = plan(sasl_config(tmp_path, acl_cluster, "admin"))  # a super user: may describe the cluster
    assert admin.returncode == 0, admin.stderr
    assert admin.stderr == ""
    answer = json.loads(admin.stdout)
    moves = [m for m in answer["moves"] if m["topic"] == "sz-sasl"]
    assert len(moves) >= 1
    for move in moves:
        p = move["partition"]
        added = len(set(move["replicas"]) - set(move["current"]))
        assert move["bytes"] == log_bytes(cluster, 0, "sz-sasl", p) * added > 0

    alice = plan(sasl_config(tmp_path, acl_cluster, "alice"))  # no ACL: DescribeLogDirs refused
    assert alice.returncode == 0, alice.stderr
    assert alice.stderr.splitlines() == [
        (
            "lumber: warning: the bytes each move copies are not shown: broker 0 answers DescribeLogDirs "
            "with CLUSTER_AUTHORIZATION_FAILED (it needs DESCRIBE on the cluster)"
        )
    ]
    refused = json.loads(alice.stdout)
    assert [(m["partition"], m["replicas"]) for m in refused["moves"]] == [
        (m["partition"], m["replicas"]) for m in answer["moves"]
    ]
    assert all(m["bytes"] is None for m in refused["moves"])
    assert refused["total_bytes"] is None


def test_sizes_over_sasl_ssl_from_the_leaders_listener_of_that_protocol(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(0)
    secure = SecureBroker(cluster, tmp_path / "broker")  # broker 0: PLAINTEXT first, then SSL, SASL, SASL_SSL
    cluster.add_broker()  # broker 1: PLAINTEXT only, leads nothing that moves
    cluster.create_topic("sz-tls", 2, {0: [0], 1: [0]})
    producer = Producer({"bootstrap.servers": secure.broker.address, "acks": "all"})
    for i in range(40):
        producer.produce("sz-tls", b"z" * 300 + b"%03d" % i, partition=i % 2)
    producer.flush(30)
    assert len(producer) == 0
    config = tmp_path / "tls.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n[consumer]\nsecurity_protocol = "SASL_SSL"\n'
        f'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "{USER}"\nsasl_password = "{PASSWORD}"\n'
        f'ssl_cafile = "{secure.ca.cafile}"\n'
    )
    done = plan(config)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    answer = json.loads(done.stdout)
    moves = [m for m in answer["moves"] if m["topic"] == "sz-tls"]
    assert [m["replicas"] for m in moves] == [[1]]
    assert moves[0]["bytes"] == log_bytes(cluster, 0, "sz-tls", moves[0]["partition"]) > 20 * 300
    assert answer["total_bytes"] == sum(m["bytes"] for m in answer["moves"])
