from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from lumber.config import load_config
from lumber.dev.process import free_port, port_in_use
from tests.support.zookeeper import new_client

pytestmark = pytest.mark.zookeeper


BROKER_PORT = free_port()
CONSOLE_PORT = free_port()


#: the `lumber` a user runs (the commands it suggests start with it)
LUMBER = Path(sys.executable).parent / "lumber"


def stack_env(port: int, registry_port: int) -> dict[str, str]:
    env = {
        **os.environ,
        "LUMBER_DEV__ZOOKEEPER_PORT": str(port),
        "LUMBER_DEV__REGISTRY_PORT": str(registry_port),
        "LUMBER_DEV__BROKER_PORT": str(BROKER_PORT),
        "LUMBER_DEV__CONSOLE_PORT": str(CONSOLE_PORT),
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


def test_up_connect_status_down(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    port, registry_port = free_port(), free_port()
    up = lumber(state_dir, port, registry_port, "up", "--json")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert list(summary)[:6] == [
        "state_dir", "config_path", "bootstrap_servers", "zookeeper_connect", "registry_url", "console_url",
    ]  # fmt: skip
    assert summary["bootstrap_servers"] == [f"127.0.0.1:{BROKER_PORT}"]
    assert summary["zookeeper_connect"] == f"127.0.0.1:{port}"
    assert summary["registry_url"] == f"http://127.0.0.1:{registry_port}"
    assert summary["console_url"] == f"http://127.0.0.1:{CONSOLE_PORT}/"
    zookeeper, broker, registry, console = summary["services"]
    assert (zookeeper["name"], broker["name"], registry["name"], console["name"]) == (
        "zookeeper",
        "broker-0",
        "registry",
        "console",
    )
    assert (console["endpoint"], console["running"]) == (f"http://127.0.0.1:{CONSOLE_PORT}/", True)
    assert broker["endpoint"] == f"127.0.0.1:{BROKER_PORT}"
    assert broker["running"] is True
    assert zookeeper["running"] is True
    assert registry["running"] is True
    assert registry["endpoint"] == f"http://127.0.0.1:{registry_port}"
    pid, broker_pid, registry_pid, console_pid = (
        zookeeper["pid"],
        broker["pid"],
        registry["pid"],
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

        status = lumber(state_dir, port, registry_port, "status", "--json")
        assert status.returncode == 0
        assert [s["pid"] for s in json.loads(status.stdout)["services"]] == [
            pid,
            broker_pid,
            registry_pid,
            console_pid,
        ]

        # the config of the stack describes it: ZooKeeper, the registry, broker 0 and its log dir
        stack = load_config(state_dir / "lumber.toml", env={})
        assert stack.zookeeper.connect == f"127.0.0.1:{port}"
        assert stack.registry.url == f"http://127.0.0.1:{registry_port}"
        assert (stack.broker.broker_id, stack.broker.host, stack.broker.port) == (0, "127.0.0.1", BROKER_PORT)
        assert stack.log.log_dirs == [str(state_dir / "broker-0" / "logs")]
        assert (state_dir / "broker-0" / "logs" / "_audit-0").is_dir()  # where the broker keeps its data

        # a second `up` refuses, naming the `dev down` that stops this stack; run as printed, it does
        again = as_typed([str(LUMBER), "dev", "up", "--state-dir", "stack"], tmp_path, port, registry_port)
        assert again.returncode == 1
        assert again.stderr == (
            f"lumber: error: the stack in {state_dir} is already up (zookeeper pid {pid}, broker-0 pid "
            f"{broker_pid}, registry pid {registry_pid}, console pid {console_pid}); stop it first with:  "
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
    assert not (state_dir / "stack.json").exists()

    status = lumber(state_dir, port, registry_port, "status", "--json")
    assert status.returncode == 3
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
