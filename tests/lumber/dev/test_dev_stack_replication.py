"""``lumber dev up --brokers N``: the stack's ``default_replication_factor`` and its topics' replicas.

The config tests read what ``up`` would write, without starting anything. The ``up`` test starts three
brokers and needs :class:`~broker.cluster.topic_admin.TopicAdmin`'s replication API (part C of issue 19).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lumber.config import load_config
from lumber.dev.dev_stack import DevStack
from tests.support.dev_ports import dev_port_env
from tests.support.zookeeper import new_client


@pytest.mark.parametrize(("brokers", "expected"), [(0, 1), (1, 1), (2, 2), (3, 3), (5, 3)])
def test_the_replication_factor_is_min_of_brokers_and_3(tmp_path: Path, brokers: int, expected: int) -> None:
    defaults = load_config(None, env={})
    config = defaults.replace(dev=defaults.dev.replace(brokers=brokers))
    stack = DevStack(config, tmp_path / "stack")
    assert stack.replication_factor == expected
    assert stack.stack_config().broker.default_replication_factor == expected
    written = tmp_path / "lumber.toml"
    written.write_text(stack.config_text(), encoding="utf-8")
    assert load_config(written, env={}).broker.default_replication_factor == expected  # what the brokers read


def test_a_replication_factor_the_user_set_wins(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("[dev]\nbrokers = 3\n\n[broker]\ndefault_replication_factor = 2\n", encoding="utf-8")
    stack = DevStack(load_config(path, env={}), tmp_path / "stack")
    assert stack.replication_factor == 2
    assert "default_replication_factor = 2\n" in stack.config_text()


@pytest.mark.slow
@pytest.mark.zookeeper
def test_up_with_three_brokers_creates_the_audit_topic_with_three_replicas(tmp_path: Path) -> None:
    state_dir = tmp_path / "stack"
    ports = dev_port_env()
    port = int(ports["LUMBER_DEV__ZOOKEEPER_PORT"])
    env = {**os.environ, **ports}
    env.pop("LUMBER_CONFIG", None)

    def dev(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lumber", "dev", *args, "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
            cwd=tmp_path,
            check=False,
        )

    try:
        up = dev("up", "--brokers", "3")
        assert up.returncode == 0, up.stderr
        assert "... created the audit topic '_audit' with 3 replicas per partition\n" in up.stderr
        client = new_client(f"127.0.0.1:{port}")
        try:
            partitions = json.loads(client.get("/brokers/topics/_audit")[0])["partitions"]
            expected = load_config(None, env={}).producer.audit_topic_partitions
            assert sorted(partitions, key=int) == [str(p) for p in range(expected)]
            assert [sorted(r) for r in partitions.values()] == [[0, 1, 2]] * expected
            state = json.loads(client.get("/brokers/topics/_audit/partitions/0/state")[0])
            assert (state["leader"], state["isr"]) == (partitions["0"][0], partitions["0"])
        finally:
            client.stop()
            client.close()
        stack = load_config(state_dir / "lumber.toml", env={})
        assert stack.broker.default_replication_factor == 3
    finally:
        if (state_dir / "stack.json").exists():
            dev("down")
