from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from lumber.dev.kafka_server import KafkaCluster, _cluster_id
from lumber.dev.peer_jars import JARS_DIR_ENV
from lumber.dev.process import port_in_use
from pipeline.errors import DevStackError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.admin import AdminClient


pytestmark = pytest.mark.interop


def test_one_node_answers_metadata_and_stops_by_pid(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path / "kafka")
    cluster.start()
    try:
        node = cluster.nodes[0]
        assert node.handle is not None
        assert node.handle.is_running()
        handle = node.handle
        props = (node.base_dir / "server.properties").read_text().splitlines()
        assert "process.roles=broker,controller" in props
        assert (
            f"listeners=PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
            in props
        )
        assert f"log.dirs={node.data_dir}" in props
        assert "-Xmx512m" in node.argv()
        found = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
        assert {b.id: f"{b.host}:{b.port}" for b in found.brokers.values()} == {1: node.address}
        assert found.controller_id == 1
        assert (node.data_dir / "meta.properties").read_text().count(cluster.cluster_id) == 1
    finally:
        cluster.stop()
    assert not handle.is_running()
    assert not port_in_use(node.port)


def test_three_nodes_form_one_quorum(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path / "kafka", size=3)
    cluster.start()
    try:
        found = AdminClient({"bootstrap.servers": cluster.nodes[2].address}).list_topics(timeout=10)
        assert sorted(found.brokers) == [1, 2, 3]
        voters = {n.voters for n in cluster.nodes}
        assert len(voters) == 1
        assert voters.pop().count("@127.0.0.1:") == 3
    finally:
        cluster.stop()
    assert not any(n.handle for n in cluster.nodes)


def test_without_jars_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "empty"))
    cluster = KafkaCluster(tmp_path / "kafka")
    with pytest.raises(DevStackError, match=r"no kafka jars in .*empty/kafka: run 'make jars'"):
        cluster.start()
    assert not (tmp_path / "kafka" / "node-1" / "data").exists()


def test_cluster_ids_never_start_with_a_dash() -> None:
    # 1 in 64 base64 ids does; the storage tool reads it as an option ("expected one argument")
    ids = [_cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)


def test_broker_only_nodes_after_the_controllers(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path / "kafka", size=3, controllers=1, heap_mb=256)
    combined, *brokers = (node.properties() for node in cluster.nodes)
    first = cluster.nodes[0]
    assert combined["process.roles"] == "broker,controller"
    assert combined["listeners"] == (
        f"PLAINTEXT://127.0.0.1:{first.port},CONTROLLER://127.0.0.1:{first.controller_port}"
    )
    for node, props in zip(cluster.nodes[1:], brokers, strict=True):
        assert props["process.roles"] == "broker"
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{node.port}"
        assert props["controller.listener.names"] == "CONTROLLER"
    assert {p["controller.quorum.voters"] for p in (combined, *brokers)} == {
        f"1@127.0.0.1:{first.controller_port}"
    }
    assert [n.heap_mb for n in cluster.nodes] == [256, 256, 256]
    with pytest.raises(DevStackError, match="cluster of 2 nodes needs 1 to 2 controllers, asked for 0"):
        KafkaCluster(tmp_path / "other", size=2, controllers=0)
