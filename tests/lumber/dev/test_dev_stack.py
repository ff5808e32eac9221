from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.cluster import zk_paths
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition
from lumber.config import load_config
from lumber.dev.process import free_port, port_in_use
from tests.support.broker_cluster import wait_for
from tests.support.dev_ports import dev_port_env
from tests.support.zookeeper import new_client

pytestmark = pytest.mark.zookeeper


DEV_PORTS = dev_port_env()
BROKER_PORT = int(DEV_PORTS["LUMBER_DEV__BROKER_PORT"])
CONSOLE_PORT = int(DEV_PORTS["LUMBER_DEV__CONSOLE_PORT"])
LAG_EXPORTER_PORT = int(DEV_PORTS["LUMBER_DEV__LAG_EXPORTER_PORT"])


#: the `lumber` a user runs (the commands it suggests start with it)
LUMBER = Path(sys.executable).parent / "lumber"


def stack_env(port: int, registry_port: int) -> dict[str, str]:
    env = {
        **os.environ,
        **DEV_PORTS,
        "LUMBER_DEV__ZOOKEEPER_PORT": str(port),
        "LUMBER_DEV__REGISTRY_PORT": str(registry_port),
        "LUMBER_DEV__LAG_EXPORTER_INTERVAL_MS": "200",
    }
    env.pop("LUMBER_CONFIG", None)
    return env


def lumber(state_dir: Path, port: int, registry_port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "dev", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        env=stack_env(port, registry_port),
        cwd=state_dir.parent,
    )


def as_typed(
    command: Sequence[str], cwd: Path, port: int, registry_port: int
) -> subprocess.CompletedProcess[str]:
    """``command`` run as a user types it, in ``cwd``."""
    return subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        timeout=180,
        env=stack_env(port, registry_port),
        cwd=cwd,
    )


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@contextmanager
def committed_in_a_zookeeper_group(
    summary: dict[str, Any], group: str, tp: TopicPartition, *, read: int, offset: int
) -> Iterator[None]:
    """A member of the paper's zookeeper group ``group`` reads ``read`` records of ``tp`` and commits
    ``offset``; it stays in the group until the block ends (then it leaves, committing what it read)."""
    member = GroupConsumer(
        group,
        zookeeper_connect=summary["zookeeper_connect"],
        config=GroupConfig(auto_commit_enable=False),
        consumer_config=ConsumerConfig(
            bootstrap_servers=summary["bootstrap_servers"],
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        ),
    )
    try:
        member.subscribe([tp.topic])
        seen: list[Any] = []

        def read_them() -> bool:
            seen.extend(member.poll(timeout_ms=200))
            return len(seen) >= read

        wait_for(read_them, 60, f"the group's member to read {read} records")
        assert [r.offset for r in seen] == list(range(read))
        member.commit({tp: offset})
        yield
    finally:
        member.close()


def test_up_connect_status_down(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    port, registry_port = free_port(), free_port()
    up = lumber(state_dir, port, registry_port, "up", "--json")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert list(summary)[:7] == [
        "state_dir", "config_path", "bootstrap_servers", "zookeeper_connect", "registry_url", "console_url",
        "lag_exporter_url",
    ]  # fmt: skip
    assert summary["bootstrap_servers"] == [f"127.0.0.1:{BROKER_PORT}"]
    assert summary["zookeeper_connect"] == f"127.0.0.1:{port}"
    assert summary["registry_url"] == f"http://127.0.0.1:{registry_port}"
    assert summary["console_url"] == f"http://127.0.0.1:{CONSOLE_PORT}/"
    exporter_url = f"http://127.0.0.1:{LAG_EXPORTER_PORT}"
    assert summary["lag_exporter_url"] == exporter_url
    zookeeper, broker, registry, exporter, console = summary["services"]
    assert (zookeeper["name"], broker["name"], registry["name"], exporter["name"], console["name"]) == (
        "zookeeper",
        "broker-0",
        "registry",
        "lag-exporter",
        "console",
    )
    assert (exporter["endpoint"], exporter["running"]) == (exporter_url, True)
    assert (console["endpoint"], console["running"]) == (f"http://127.0.0.1:{CONSOLE_PORT}/", True)
    assert broker["endpoint"] == f"127.0.0.1:{BROKER_PORT}"
    assert broker["running"] is True
    assert zookeeper["running"] is True
    assert registry["running"] is True
    assert registry["endpoint"] == f"http://127.0.0.1:{registry_port}"
    pid, broker_pid, registry_pid, exporter_pid, console_pid = (
        zookeeper["pid"],
        broker["pid"],
        registry["pid"],
        exporter["pid"],
        console["pid"],
    )
    try:
        client = new_client(summary["zookeeper_connect"])
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
        # the broker registered itself; the audit topic exists (brokers do not create topics on demand)
        assert json.loads(client.get("/brokers/ids/0")[0])["port"] == BROKER_PORT
        assert json.loads(client.get("/brokers/topics/_audit")[0])["partitions"] == {"0": [0]}
        client.stop()
        client.close()

        # the broker's metrics are on the stack's port, not on 9308 (another stack may hold that)
        metrics_port = int(DEV_PORTS["LUMBER_DEV__BROKER_METRICS_PORT"])
        scrape = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30)
        assert scrape.status_code == 200
        assert "kafka_server_" in scrape.text

        # the registry answers, and keeps its state in the stack's ZooKeeper
        registry_url = f"http://127.0.0.1:{registry_port}"
        assert httpx.get(f"{registry_url}/subjects", timeout=30).json() == []
        answer = httpx.post(f"{registry_url}/subjects/s/versions", json={"schema": '"string"'}, timeout=30)
        assert answer.json() == {"id": 1}
        client = new_client(summary["zookeeper_connect"])
        assert client.get("/schema_registry/ids/1")[0] == b'"string"'
        client.stop()
        client.close()

        # the console shows the stack: its broker, and the subject just registered
        page = httpx.get(f"{summary['console_url']}schemas", params={"format": "json"}, timeout=30)
        assert page.status_code == 200, page.text
        assert [s["subject"] for s in page.json()["subjects"]] == ["s"]

        # the lag exporter watches every group (every 200 ms here); the console reads a zookeeper group's
        # lag history from it: a member of the group reads the 3 records of a topic and commits offset 1
        client = new_client(summary["zookeeper_connect"])
        TopicAdmin(client).create_topic("events", 1, replication_factor=1)
        wait_for(
            lambda: client.exists(zk_paths.partition_state_path("events", 0)), 30, "a leader of events-0"
        )
        client.stop()
        client.close()
        with Producer(ProducerConfig(bootstrap_servers=summary["bootstrap_servers"], acks="all")) as producer:
            for value in (b"a", b"b", b"c"):
                producer.send("events", value, partition=0).result(30)
        with committed_in_a_zookeeper_group(
            summary, "watched", TopicPartition("events", 0), read=3, offset=1
        ):
            assert httpx.get(f"{exporter_url}/metrics", timeout=30).status_code == 200

            def observed() -> list[tuple[int, int, int]]:
                found = httpx.get(f"{exporter_url}/lag-history", params={"group": "watched"}, timeout=30)
                if found.status_code != 200:
                    return []
                return [
                    (s["committed_offset"], s["log_end_offset"], s["lag"])
                    for p in found.json()["groups"][0]["partitions"]
                    for s in p["samples"]
                    if not s["no_commit"]  # seen before the member's commit: measured from the reset position
                ]

            wait_for(lambda: len(observed()) >= 2, 60, "two observations of the group by the lag exporter")
            assert set(observed()) == {(1, 3, 2)}
            page = httpx.get(f"{summary['console_url']}groups/watched", params={"format": "json"}, timeout=30)
            assert page.status_code == 200, page.text
            group_page = page.json()
            assert group_page["lag_history"]["source"] == f"{exporter_url}/lag-history"
            [partition] = group_page["partitions"]
            history = [(h["committed"], h["log_end"], h["lag"]) for h in partition["history"]]
            assert len(history) >= 2
            assert set(history) == {(1, 3, 2)}
            metrics = {
                (sample.name, sample.labels.get("consumergroup")): sample.value
                for family in text_string_to_metric_families(
                    httpx.get(f"{exporter_url}/metrics", timeout=30).text
                )
                for sample in family.samples
            }
            assert metrics[("kafka_consumergroup_lag", "watched")] == 2

        status = lumber(state_dir, port, registry_port, "status", "--json")
        assert status.returncode == 0
        assert [s["pid"] for s in json.loads(status.stdout)["services"]] == [
            pid,
            broker_pid,
            registry_pid,
            exporter_pid,
            console_pid,
        ]

        # the config of the stack describes it: ZooKeeper, the registry, broker 0 and its log dir
        stack = load_config(state_dir / "lumber.toml", env={})
        assert stack.zookeeper.connect == f"127.0.0.1:{port}"
        assert stack.registry.url == f"http://127.0.0.1:{registry_port}"
        assert (stack.broker.broker_id, stack.broker.host, stack.broker.port) == (0, "127.0.0.1", BROKER_PORT)
        assert stack.log.log_dirs == [str(state_dir / "broker-0" / "logs")]
        assert stack.console.lag_exporter_url == exporter_url
        assert (state_dir / "broker-0" / "logs" / "_audit-0").is_dir()  # where the broker keeps its data

        # a second `up` refuses, naming the `dev down` that stops this stack; run as printed, it does
        again = as_typed([str(LUMBER), "dev", "up", "--state-dir", "stack"], tmp_path, port, registry_port)
        assert again.returncode == 1
        assert again.stderr == (
            f"lumber: error: the stack in {state_dir} is already up (zookeeper pid {pid}, broker-0 pid "
            f"{broker_pid}, registry pid {registry_pid}, lag-exporter pid {exporter_pid}, console pid "
            f"{console_pid}); stop it first with:  "
            f"{LUMBER} dev down --state-dir stack\n"
        )
        advice = again.stderr.rsplit("stop it first with:  ", 1)[1].strip()
        down = as_typed(shlex.split(advice), tmp_path, port, registry_port)
    finally:
        if (state_dir / "stack.json").exists():
            lumber(state_dir, port, registry_port, "down")
    assert down.returncode == 0, down.stderr
    assert down.stderr.splitlines() == [
        f"... stopped console (pid {console_pid})",
        f"... stopped lag-exporter (pid {exporter_pid})",
        f"... stopped registry (pid {registry_pid})",
        f"... stopped broker-0 (pid {broker_pid})",
        f"... stopped zookeeper (pid {pid})",
    ]
    assert not pid_alive(pid)
    assert not pid_alive(broker_pid)
    assert not port_in_use(BROKER_PORT)
    assert not pid_alive(registry_pid)
    assert not port_in_use(port)
    assert not port_in_use(registry_port)
    assert not pid_alive(console_pid)
    assert not port_in_use(CONSOLE_PORT)
    assert not pid_alive(exporter_pid)
    assert not port_in_use(LAG_EXPORTER_PORT)
    assert not (state_dir / "stack.json").exists()

    status = lumber(state_dir, port, registry_port, "status", "--json")
    assert status.returncode == 1
    assert json.loads(status.stdout)["services"] == []

    down_again = lumber(state_dir, port, registry_port, "down")
    assert down_again.returncode == 0
    assert down_again.stdout.strip() == "nothing was running"


@pytest.mark.parametrize("taken", ["zookeeper", "registry"])
def test_up_refuses_a_taken_port(tmp_path: Path, taken: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        port, registry_port = (held, free_port()) if taken == "zookeeper" else (free_port(), held)
        result = lumber(tmp_path / "stack", port, registry_port, "up")
    assert result.returncode == 1
    assert f"cannot start {taken}: port 127.0.0.1:{held} is already in use" in result.stderr
    assert not (tmp_path / "stack" / "stack.json").exists()


def test_down_purge_removes_state_dir(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    port, registry_port = free_port(), free_port()
    (tmp_path / "work").mkdir()
    up = as_typed(
        [str(LUMBER), "dev", "up", "--state-dir", "../stack"], tmp_path / "work", port, registry_port
    )
    assert up.returncode == 0, up.stderr
    stop_line = up.stdout.splitlines()[-1]
    assert stop_line == f"Stop it with:  {LUMBER} dev down --state-dir ../stack"
    down = as_typed(
        [*shlex.split(stop_line.split(":  ", 1)[1]), "--purge"], tmp_path / "work", port, registry_port
    )
    assert down.returncode == 0
    assert not state_dir.exists()
    assert not port_in_use(port)
    assert not port_in_use(registry_port)
