"""``lumber cluster reassign`` and ``lumber topics alter --partitions`` as subprocesses against the real
ZooKeeper: the plan's checks (each refusal names the file, the partition and the reason, and writes
nothing), the request node written exactly, ``--verify`` and ``--cancel`` reading the topic node's
``adding_replicas``/``removing_replicas``, and partitions added with Kafka's warning. The controller's side
is tested with real brokers in ``tests/broker/server/test_partition_reassigner.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.lumber.cli.test_topics import add_brokers, config

__all__ = ["config"]  # the fixture, shared with test_topics.py

REQUEST = "/admin/reassign_partitions"


def lumber(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_topic(zk: Any, topic: str, node: dict[str, Any]) -> None:
    zk.create(f"/brokers/topics/{topic}", json.dumps({"version": 1, **node}).encode(), makepath=True)


def write_plan(tmp_path: Path, entries: list[tuple[str, int, list[int]]]) -> Path:
    path = tmp_path / "plan.json"
    partitions = [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]
    path.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return path


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [("t", 0, [1, 9])],
            "t-0: broker 9 in replicas [1, 9] is not a live broker (live brokers: [1, 2, 3])",
        ),
        ([("t", 0, [2, 2])], "t-0: replicas [2, 2] name broker 2 twice"),
        ([("t", 5, [2])], "t-5: no such partition (topic 't' has partitions 0 to 1)"),
        ([("nope", 0, [2])], "nope-0: topic 'nope' does not exist"),
        (
            [("t", 0, [2]), ("t", 1, [3])],
            "t-1 is being reassigned already: wait for it (--verify), cancel it",
        ),
        ([("t", 0, [])], "t-0: an empty replica list"),
    ],
)
def test_a_bad_plan_is_refused_whole_and_writes_nothing(
    zk: Any, config: Path, tmp_path: Path, entries: list[tuple[str, int, list[int]]], message: str
) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(zk, "t", {"partitions": {"0": [1], "1": [3, 2]}, "adding_replicas": {"1": [3]}})
    plan = write_plan(tmp_path, entries)
    result = lumber(config, "cluster", "reassign", "--plan", str(plan), "--execute")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"lumber: error: {plan}: {message}"), result.stderr
    assert zk.exists(REQUEST) is None


def test_execute_writes_the_request_verify_and_cancel_read_the_moves(
    zk: Any, config: Path, tmp_path: Path
) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(zk, "t", {"partitions": {"0": [1], "1": [2]}})
    plan = write_plan(tmp_path, [("t", 0, [2, 3]), ("t", 1, [2])])
    result = lumber(config, "cluster", "reassign", "--plan", str(plan), "--execute")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Current partition replica assignment (save it: it is the plan to go back):",
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, '
            '{"topic": "t", "partition": 1, "replicas": [2]}]}'
        ),
        "Started the reassignment of 2 partitions: t-0, t-1",
    ]
    assert json.loads(zk.get(REQUEST)[0]) == {
        "version": 1,
        "partitions": [
            {"partition": 0, "replicas": [2, 3], "topic": "t"},
            {"partition": 1, "replicas": [2], "topic": "t"},
        ],
    }
    again = lumber(config, "cluster", "reassign", "--plan", str(plan), "--execute")
    assert again.returncode == 1
    assert "a reassignment is still in progress" in again.stderr
    # what the controller writes once t-0 moves (t-1 is where the plan puts it already)
    zk.delete(REQUEST)
    zk.set(
        "/brokers/topics/t",
        json.dumps(
            {
                "version": 1,
                "partitions": {"0": [2, 3, 1], "1": [2]},
                "adding_replicas": {"0": [2, 3]},
                "removing_replicas": {"0": [1]},
            }
        ).encode(),
    )
    verify = lumber(config, "cluster", "reassign", "--plan", str(plan), "--verify")
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.splitlines() == [
        "Reassignment of partition t-0: in progress (adding [2, 3], removing [1])",
        "Reassignment of partition t-1: complete",
    ]
    cancel = lumber(config, "cluster", "reassign", "--plan", str(plan), "--cancel")
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.splitlines() == ["t-0: cancelled, back to [1]"]
    assert json.loads(zk.get(REQUEST)[0])["partitions"] == [{"partition": 0, "replicas": [1], "topic": "t"}]


def test_topics_alter_partitions_warns_then_adds_them_with_their_states(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(zk, "t", {"partitions": {"0": [2, 3], "1": [3, 1]}})
    result = lumber(config, "topics", "alter", "t", "--partitions", "4")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        "WARNING: If partitions are increased for a topic that has a key, the partition logic or ordering "
        "of the messages will be affected\n"
    )
    # Kafka's rule with start index (and replica shift) 1, partition 0's first replica's place, from
    # partition 2 on: leaders (2 + 1) % 3 -> broker 1, then broker 2 with the shift of the new round
    assert result.stdout.splitlines() == [
        "t-2: created on [1, 3]",
        "t-3: created on [2, 3]",
        "topic 't' has 4 partitions now",
    ]
    node = json.loads(zk.get("/brokers/topics/t")[0])
    assert node["partitions"] == {"0": [2, 3], "1": [3, 1], "2": [1, 3], "3": [2, 3]}
    state = json.loads(zk.get("/brokers/topics/t/partitions/3/state")[0])
    assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 0, [2, 3])
    shrink = lumber(config, "topics", "alter", "t", "--partitions", "3")
    assert shrink.returncode == 2
    assert "topic 't' has 4 partitions; the count can only grow" in shrink.stderr


def test_topics_describe_shows_a_move_in_progress_and_its_throttle(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(
        zk,
        "t",
        {
            "partitions": {"0": [3, 2, 1], "1": [2]},
            "adding_replicas": {"0": [3]},
            "removing_replicas": {"0": [1]},
        },
    )
    for partition, (leader, isr) in {0: (1, [1, 2]), 1: (2, [2])}.items():
        state = {"controller_epoch": 1, "leader": leader, "leader_epoch": 1, "isr": isr, "version": 1}
        zk.create(
            f"/brokers/topics/t/partitions/{partition}/state", json.dumps(state).encode(), makepath=True
        )
    lists = {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    zk.create(
        "/config/throttled_replicas",
        json.dumps({"version": 1, "topics": {"t": lists}}).encode(),
        makepath=True,
    )
    result = lumber(config, "topics", "describe", "t")
    assert result.returncode == 0, result.stderr
    rows = result.stdout.splitlines()
    # the replica being added does not make the partition under-replicated (Kafka's KIP-455 count)
    assert rows[0] == "topic 't': 2 partitions, replication factor 3"
    assert rows[2].split() == [
        "0", "1", "1", "3,2,1", "1,2", "not", "on", "its", "preferred", "leader", "3;", "reassigning", "to",
        "3,2", "(adding", "3,", "removing", "1,", "throttled)",
    ]  # fmt: skip
    assert rows[3].split() == ["1", "2", "1", "2", "2", "ok"]
    as_json = json.loads(lumber(config, "topics", "describe", "t", "--json").stdout)
    moving = as_json["partitions"][0]
    assert (moving["adding_replicas"], moving["removing_replicas"], moving["throttled"]) == ([3], [1], True)
    assert moving["under_replicated"] is False
