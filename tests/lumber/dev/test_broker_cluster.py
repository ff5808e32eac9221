"""lumber.dev.broker_cluster: real broker processes on one ZooKeeper chroot, as the tests and bench/ start
them; and the chroot they get (lumber.dev.zookeeper_server.make_chroot)."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path
from typing import Any, cast

from lumber.dev.broker_cluster import BROKER_SESSION_TIMEOUT_MS, BrokerCluster, BrokerProcess
from lumber.dev.zookeeper_server import ZooKeeperServer, make_chroot, new_client

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient


def test_make_chroot_gives_a_fresh_path_per_call(zookeeper_server: ZooKeeperServer) -> None:
    first = make_chroot(zookeeper_server.connect, "same[name]")
    second = make_chroot(zookeeper_server.connect, "same[name]")
    assert first != second
    root = zookeeper_server.connect
    for connect in (first, second):
        path = connect.removeprefix(root)
        assert path.startswith("/t-same_name_-")
        client = new_client(root)
        try:
            assert client.exists(path) is not None
            assert client.get_children(path) == []
        finally:
            client.stop()
            client.close()


def test_a_broker_serves_a_topic_and_comes_back_after_a_kill(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    cluster = BrokerCluster(make_chroot(zookeeper_server.connect, "broker-cluster"), tmp_path)
    try:
        broker = cluster.add_broker({"flush_ms": 1000, "auto_create_topics": False})
        # ready means ready for an admin client: its first Metadata names the controller
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        assert admin.list_topics(timeout=10).controller_id == 0
        config = tomllib.loads(broker.config_path.read_text())
        assert config["zookeeper"]["session_timeout_ms"] == BROKER_SESSION_TIMEOUT_MS
        assert config["log"]["flush_ms"] == 1000  # a [log] key
        assert config["broker"]["auto_create_topics"] is False  # the rest go to [broker]
        assert config["broker"]["port"] == broker.port
        assert cluster.create_topic("t", 2) == {0: (0,), 1: (0,)}
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for _ in range(3):
            producer.produce("t", b"v", partition=1)
        assert producer.flush(30) == 0
        assert cluster.high_watermark("t", 1) == 3
        broker.kill()
        pids = [broker.handle]
        broker.restart()
        pids.append(broker.handle)
        assert pids[0] is None
        assert pids[1] is not None
        assert cluster.leader_of("t", 1) is broker
        assert cluster.high_watermark("t", 1) == 3
    finally:
        cluster.stop()
    assert cluster.brokers[0].handle is None


def test_session_timeout_ms_among_the_settings_goes_to_zookeeper(tmp_path: Path) -> None:
    """The kill -9 loops' shorter sessions: ``session_timeout_ms`` replaces the default in ``[zookeeper]``
    (once: a TOML key twice would not parse) and is not a ``[broker]`` key."""
    broker = BrokerProcess(
        0, 9092, tmp_path, "127.0.0.1:2181/t", cast(Any, None), {"session_timeout_ms": 2000, "flush_ms": 5}
    )
    broker.write_config()
    config = tomllib.loads(broker.config_path.read_text())
    assert config["zookeeper"] == {"connect": "127.0.0.1:2181/t", "session_timeout_ms": 2000}
    assert "session_timeout_ms" not in config["broker"]
    assert config["log"]["flush_ms"] == 5
