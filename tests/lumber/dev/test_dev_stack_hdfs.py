"""``lumber dev up --hdfs``: the stack's HDFS (a NameNode and a DataNode), recorded, used by the stack's
config and stopped by ``dev down``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hdfs_native import Client

from lumber.dev.process import free_port, port_in_use
from tests.support.dev_ports import dev_port_env

pytestmark = [pytest.mark.zookeeper, pytest.mark.hdfs]


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_up_hdfs_records_both_daemons_points_the_warehouse_at_them_and_down_stops_them(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "stack"
    hdfs_ports = {
        "HDFS_NAMENODE_PORT": free_port(),
        "HDFS_NAMENODE_HTTP_PORT": free_port(),
        "HDFS_DATANODE_PORT": free_port(),
        "HDFS_DATANODE_HTTP_PORT": free_port(),
        "HDFS_DATANODE_IPC_PORT": free_port(),
    }
    env = {
        **os.environ,
        **dev_port_env(),
        **{f"LUMBER_DEV__{key}": str(port) for key, port in hdfs_ports.items()},
    }
    env.pop("LUMBER_CONFIG", None)

    def lumber(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lumber", *args],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
            cwd=tmp_path,
        )

    up = lumber("dev", "up", "--hdfs", "--brokers", "0", "--json", "--state-dir", str(state_dir))
    try:
        assert up.returncode == 0, up.stderr
        summary = json.loads(up.stdout)
        namenode_port = hdfs_ports["HDFS_NAMENODE_PORT"]
        warehouse = f"hdfs://127.0.0.1:{namenode_port}/warehouse"
        webhdfs = f"http://127.0.0.1:{hdfs_ports['HDFS_NAMENODE_HTTP_PORT']}"
        assert summary["warehouse_url"] == warehouse
        assert summary["webhdfs_url"] == webhdfs
        services = {s["name"]: s for s in summary["services"]}
        assert [s["name"] for s in summary["services"]] == [
            "zookeeper", "hdfs-namenode", "hdfs-datanode", "registry", "console",
        ]  # fmt: skip
        assert services["hdfs-namenode"]["endpoint"] == f"hdfs://127.0.0.1:{namenode_port}"
        pids = [services[name]["pid"] for name in ("hdfs-namenode", "hdfs-datanode")]
        assert all(_pid_alive(pid) for pid in pids)
        recorded = json.loads((state_dir / "stack.json").read_text())
        assert [s["process"]["pid"] for s in recorded["services"][1:3]] == pids
        config = tomllib.loads((state_dir / "lumber.toml").read_text())
        assert config["load"]["warehouse_url"] == warehouse
        assert config["load"]["webhdfs_url"] == webhdfs
        assert config["dev"]["hdfs"] is True
        assert (state_dir / "hdfs" / "name" / "current" / "VERSION").is_file()

        # the stack's clients use it: etl status reads the (empty) warehouse on HDFS
        status = lumber("--config", str(state_dir / "lumber.toml"), "etl", "status")
        assert status.returncode == 0, status.stderr
        assert status.stdout.splitlines()[0] == f"job 'hourly', warehouse {warehouse}, latest manifest none"
        client = Client(f"hdfs://127.0.0.1:{namenode_port}")
        with client.create("/warehouse-probe") as writer:
            writer.write(b"1")
        assert client.get_file_info("/warehouse-probe").length == 1
    finally:
        down = lumber("dev", "down", "--state-dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    assert "stopped hdfs-datanode" in down.stderr
    assert "stopped hdfs-namenode" in down.stderr
    assert not any(_pid_alive(pid) for pid in pids)
    assert not any(port_in_use(port) for port in hdfs_ports.values())
