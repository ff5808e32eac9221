"""``lumber dev status`` against a real two-broker dev stack: a broker frozen by SIGSTOP is reported frozen at
once, then unregistered and out of the ISRs once its ZooKeeper session expires, and healthy again after
SIGCONT (lumber/dev/stack_health.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dev_ports import dev_port_env

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    env = {
        **os.environ,
        **dev_port_env(),
        "LUMBER_ZOOKEEPER__SESSION_TIMEOUT_MS": "4000",
    }
    env.pop("LUMBER_CONFIG", None)
    state_dir = tmp_path / "stack"
    up = dev(state_dir, env, "up", "--brokers", "2")
    assert up.returncode == 0, up.stderr
    try:
        yield state_dir, env
    finally:
        dev(state_dir, env, "down")


def dev(state_dir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "dev", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=state_dir.parent,
    )


def status(state_dir: Path, env: dict[str, str]) -> tuple[int, dict[str, dict[str, Any]], str]:
    """The exit code, the brokers' entries of ``--json`` by name, and the text's broker lines."""
    for _ in range(10):  # the two calls see one state (a broker may turn healthy between them)
        as_json = dev(state_dir, env, "status", "--json")
        text = dev(state_dir, env, "status")
        if as_json.returncode == text.returncode:
            break
    assert as_json.returncode == text.returncode
    brokers = {s["name"]: s for s in json.loads(as_json.stdout)["services"] if s["name"].startswith("broker")}
    lines = "\n".join(line for line in text.stdout.splitlines() if "broker-" in line)
    return as_json.returncode, brokers, lines


def wait_status(
    state_dir: Path, env: dict[str, str], broker: str, wanted: dict[str, Any], timeout_s: float = 60
) -> tuple[int, dict[str, dict[str, Any]], str]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = status(state_dir, env)
        entry = found[1][broker]
        if all(entry[key] == value for key, value in wanted.items()):
            return found
        assert time.monotonic() < deadline, f"{broker}: {entry} is not yet {wanted}"
        time.sleep(0.5)


def test_a_frozen_broker_is_reported_frozen_then_unregistered_and_out_of_the_isrs(
    stack: tuple[Path, dict[str, str]],
) -> None:
    state_dir, env = stack
    code, brokers, lines = status(state_dir, env)
    # the audit topic: 2 replicas of each of its partitions, one on each broker
    replicas = brokers["broker-0"]["replicas"]
    assert replicas > 0
    assert code == 0
    for name in ("broker-0", "broker-1"):
        assert brokers[name] | {"log": "", "pid": 0, "endpoint": ""} == {
            "name": name, "endpoint": "", "pid": 0, "running": True, "log": "", "process": "running",
            "registered": True, "replicas": replicas, "in_isr": replicas, "healthy": True,
            "status": f"running, registered, in {replicas} of {replicas} ISRs",
        }  # fmt: skip
        assert f"running, registered, in {replicas} of {replicas} ISRs" in lines

    frozen_pid = brokers["broker-1"]["pid"]
    os.kill(frozen_pid, signal.SIGSTOP)
    try:
        code, brokers, lines = status(state_dir, env)
        assert code == 1
        assert brokers["broker-1"]["process"] == "frozen"
        assert brokers["broker-1"]["running"] is True  # the process is there: that alone says nothing
        assert "FROZEN (stopped by a signal: SIGSTOP?)" in lines

        code, brokers, lines = wait_status(state_dir, env, "broker-1", {"registered": False, "in_isr": 0})
        assert code == 1
        assert brokers["broker-1"]["status"] == (
            f"FROZEN (stopped by a signal: SIGSTOP?), NOT registered in ZooKeeper, NOT in every ISR: "
            f"in 0 of {replicas}"
        )
        assert brokers["broker-0"]["healthy"] is True
    finally:
        os.kill(frozen_pid, signal.SIGCONT)
    code, brokers, _ = wait_status(state_dir, env, "broker-1", {"healthy": True})
    assert code == 0
