from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.dev.process import free_port, port_in_use
from tests.support.zookeeper import new_client

pytestmark = pytest.mark.zookeeper


def lumber(state_dir: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LUMBER_DEV__ZOOKEEPER_PORT": str(port)}
    env.pop("LUMBER_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "dev", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=state_dir.parent,
    )


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_up_connect_status_down(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    port = free_port()
    up = lumber(state_dir, port, "up", "--json")
    assert up.returncode == 0, up.stderr
    summary = json.loads(up.stdout)
    assert summary["zookeeper_connect"] == f"127.0.0.1:{port}"
    [service] = summary["services"]
    assert service["name"] == "zookeeper"
    assert service["running"] is True
    pid = service["pid"]
    try:
        client = new_client(summary["zookeeper_connect"])
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
        client.stop()
        client.close()

        status = lumber(state_dir, port, "status", "--json")
        assert status.returncode == 0
        assert json.loads(status.stdout)["services"][0]["pid"] == pid

        again = lumber(state_dir, port, "up")
        assert again.returncode == 1
        assert f"already up (zookeeper pid {pid})" in again.stderr

        # the config that points at the stack is valid and names its ZooKeeper
        cfg = (state_dir / "lumber.toml").read_text()
        assert f'connect = "127.0.0.1:{port}"' in cfg
    finally:
        down = lumber(state_dir, port, "down", "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout) == {"stopped": ["zookeeper"]}
    assert not pid_alive(pid)
    assert not port_in_use(port)
    assert not (state_dir / "stack.json").exists()

    status = lumber(state_dir, port, "status", "--json")
    assert status.returncode == 3
    assert json.loads(status.stdout)["services"] == []

    down_again = lumber(state_dir, port, "down")
    assert down_again.returncode == 0
    assert down_again.stdout.strip() == "nothing was running"


def test_up_refuses_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = lumber(tmp_path / "stack", port, "up")
    assert result.returncode == 1
    assert f"cannot start zookeeper: port 127.0.0.1:{port} is already in use" in result.stderr
    assert not (tmp_path / "stack" / "stack.json").exists()


def test_down_purge_removes_state_dir(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    port = free_port()
    assert lumber(state_dir, port, "up").returncode == 0
    down = lumber(state_dir, port, "down", "--purge")
    assert down.returncode == 0
    assert not state_dir.exists()
    assert not port_in_use(port)
