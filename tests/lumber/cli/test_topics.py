"""``lumber topics`` as a subprocess against the real ZooKeeper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.zk_paths import broker_path, encode_broker


@pytest.fixture
def config(tmp_path: Path, zk_connect: str) -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(f'[zookeeper]\nconnect = "{zk_connect}"\nconnect_timeout_ms = 10000\n', encoding="utf-8")
    return path


def topics(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "topics", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def add_brokers(zk: Any, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        zk.create(
            broker_path(broker_id),
            encode_broker("127.0.0.1", 9090 + broker_id, 1_700_000_000_000),
            ephemeral=True,
            makepath=True,
        )


def test_create_list_describe_delete(zk: Any, config: Path) -> None:
    empty = topics(config, "list")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "no topics\n", "")  # says so, quietly
    assert topics(config, "list", "--json").stdout == "[]\n"
    add_brokers(zk, 1, 2, 3)

    created = topics(config, "create", "explicit", "--assignment", "0:2, 1:3 ,2:1")
    assert (created.returncode, created.stderr) == (0, "")
    assert created.stdout == "created topic 'explicit' with 3 partitions: 0->2, 1->3, 2->1\n"
    assert zk.get("/brokers/topics/explicit")[0] == b'{"partitions":{"0":[2],"1":[3],"2":[1]},"version":1}'

    spread = topics(config, "create", "spread", "--partitions", "6", "--json")
    assert spread.returncode == 0, spread.stderr
    answer = json.loads(spread.stdout)
    assert answer["topic"] == "spread"
    assert sorted(answer["partitions"], key=int) == ["0", "1", "2", "3", "4", "5"]
    assert sorted(r[0] for r in answer["partitions"].values()) == [1, 1, 2, 2, 3, 3]

    listed = topics(config, "list", "--json")
    assert (listed.returncode, listed.stdout) == (0, '["explicit", "spread"]\n')
    listed = topics(config, "list")
    assert (listed.stdout, listed.stderr) == ("explicit\nspread\n", "")

    zk.delete(broker_path(3))  # broker 3 goes down: partition 1 of explicit has no live leader
    described = topics(config, "describe", "explicit")
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout == (
        "topic 'explicit': 3 partitions\n"
        "  partition  leader  replicas    leader live\n"
        "          0       2  2           yes (127.0.0.1:9092)\n"
        "          1       3  3           NO\n"
        "          2       1  1           yes (127.0.0.1:9091)\n"
    )
    as_json = topics(config, "describe", "explicit", "--json")
    assert json.loads(as_json.stdout) == {
        "topic": "explicit",
        "partitions": [
            {
                "partition": 0,
                "leader": 2,
                "replicas": [2],
                "leader_live": True,
                "leader_address": "127.0.0.1:9092",
            },
            {"partition": 1, "leader": 3, "replicas": [3], "leader_live": False, "leader_address": None},
            {
                "partition": 2,
                "leader": 1,
                "replicas": [1],
                "leader_live": True,
                "leader_address": "127.0.0.1:9091",
            },
        ],
    }

    deleted = topics(config, "delete", "explicit", "--json")
    assert (deleted.returncode, deleted.stdout) == (0, '{"deleted": "explicit"}\n')
    assert zk.exists("/brokers/topics/explicit") is None
    gone = topics(config, "describe", "explicit")
    assert (gone.returncode, gone.stdout, gone.stderr) == (
        2,
        "",
        "lumber: error: topic 'explicit' does not exist\n",
    )


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (("create", "taken", "--partitions", "2"), "lumber: error: topic 'taken' already exists\n"),
        (
            ("create", "a b", "--partitions", "1"),
            (
                "lumber: error: topic name 'a b' contains ' '; only ASCII letters, digits, '.', '_' and '-' "
                "are allowed\n"
            ),
        ),
        (
            ("create", "x", "--partitions", "0"),
            "lumber: error: topic 'x': 0 partitions is outside [1, 10000]\n",
        ),
        (("create", "x"), "lumber: error: topic 'x': give --partitions N or --assignment\n"),
        (
            ("create", "x", "--assignment", "0:1,1:9"),
            (
                "lumber: error: topic 'x': assignment places partition 1 on broker 9, which is not live "
                "(live brokers: [1])\n"
            ),
        ),
        (("delete", "nope"), "lumber: error: topic 'nope' does not exist\n"),
    ],
)
def test_bad_input_exits_2(zk: Any, config: Path, args: tuple[str, ...], stderr: str) -> None:
    add_brokers(zk, 1)
    zk.create("/brokers/topics/taken", b'{"partitions":{"0":[1]},"version":1}', makepath=True)
    result = topics(config, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", stderr)
    assert sorted(zk.get_children("/brokers/topics")) == ["taken"]


def test_bad_assignment_syntax_is_a_usage_error(config: Path) -> None:
    result = topics(config, "create", "x", "--assignment", "0:1,1")
    assert result.returncode == 2
    assert result.stderr.endswith(
        "lumber topics create: error: argument --assignment: '1' is not PARTITION:BROKER (expected e.g. "
        '"0:1,1:2,2:3")\n'
    )


def test_no_live_brokers_and_no_zookeeper_exit_1(config: Path, tmp_path: Path) -> None:
    result = topics(config, "create", "events", "--partitions", "3")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "lumber: error: cannot create topic 'events': no live brokers are registered in /brokers/ids\n"
    )
    unreachable = tmp_path / "unreachable.toml"
    unreachable.write_text(
        '[zookeeper]\nconnect = "127.0.0.1:1"\nconnect_timeout_ms = 300\n', encoding="utf-8"
    )
    down = topics(unreachable, "list")
    assert down.returncode == 1
    assert down.stderr.splitlines()[-1].startswith("lumber: error: zookeeper 127.0.0.1:1: cannot connect: ")
