"""``lumber topics`` with replication, as a subprocess against the real ZooKeeper: replication factor and
configs on create, leader / leader epoch / ISR in describe, ``list --under-replicated`` and
``elect-leaders``.

These use :class:`~broker.cluster.topic_admin.TopicAdmin`'s replication API (``create_topic(...,
replication_factor=, configs=)``, ``describe_states``, ``topic_config``, ``request_preferred_election``).
Partition states are written here in Kafka's JSON (``/brokers/topics/<t>/partitions/<p>/state``), so that the
expected output does not depend on a controller. In ``elect-leaders`` the test plays the controller's part in
ZooKeeper: it waits for the request node and writes the new leader into the state node.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.zk_paths import broker_path
from tests.lumber.cli.test_topics import add_brokers, config, topics

ELECTION_PATH = "/admin/preferred_replica_election"

__all__ = ["config"]  # the fixture, shared with test_topics.py


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def state_json(leader: int, leader_epoch: int, isr: list[int], controller_epoch: int = 1) -> bytes:
    return json.dumps(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": isr,
        }
    ).encode()


def write_topic(
    zk: Any, topic: str, assignment: dict[int, list[int]], states: dict[int, tuple[int, int, list[int]]]
) -> None:
    """The topic's znodes as a controller leaves them: assignment, then each partition's state."""
    zk.create(
        f"/brokers/topics/{topic}",
        json.dumps({"version": 1, "partitions": {str(p): r for p, r in assignment.items()}}).encode(),
        makepath=True,
    )
    for partition, (leader, epoch, isr) in states.items():
        zk.create(state_path(topic, partition), state_json(leader, epoch, isr), makepath=True)


def read_state(zk: Any, topic: str, partition: int) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(zk.get(state_path(topic, partition))[0])
    return value


# ------------------------------------------------------------------------------------------------- create


def test_create_with_a_replication_factor_writes_replicas_states_and_configs(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    spread = topics(config, "create", "spread", "--partitions", "6", "--replication-factor", "3", "--json")
    assert (spread.returncode, spread.stderr) == (0, "")
    answer = json.loads(spread.stdout)
    assert (answer["topic"], answer["replication_factor"], answer["configs"]) == ("spread", 3, {})
    placed = {int(p): r for p, r in answer["partitions"].items()}
    assert sorted(placed) == [0, 1, 2, 3, 4, 5]
    assert all(sorted(replicas) == [1, 2, 3] for replicas in placed.values())
    assert sorted(r[0] for r in placed.values()) == [1, 1, 2, 2, 3, 3]  # first replicas round-robin
    assert json.loads(zk.get("/brokers/topics/spread")[0])["partitions"] == answer["partitions"]
    for partition, replicas in placed.items():
        state = read_state(zk, "spread", partition)
        assert (state["leader"], state["leader_epoch"], state["isr"]) == (replicas[0], 0, replicas)

    explicit = topics(
        config,
        "create",
        "explicit",
        "--assignment",
        "0:1:2, 1:2:3 ,2:3:1",
        "--config",
        "min.insync.replicas=2",
        "--config",
        "unclean.leader.election.enable=TRUE",
    )
    assert (explicit.returncode, explicit.stderr) == (0, "")
    assert explicit.stdout == (
        "created topic 'explicit' with 3 partitions, replication factor 2, configs min.insync.replicas=2, "
        "unclean.leader.election.enable=true: 0->1,2, 1->2,3, 2->3,1\n"
    )
    assert json.loads(zk.get("/config/topics/explicit")[0]) == {
        "version": 1,
        "config": {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"},
    }
    assert [read_state(zk, "explicit", p)["isr"] for p in range(3)] == [[1, 2], [2, 3], [3, 1]]
    assert zk.exists("/config/topics/spread") is None  # no --config: no config node


def test_the_default_replication_factor_comes_from_the_broker_section(zk: Any, config: Path) -> None:
    config.write_text(config.read_text() + "\n[broker]\ndefault_replication_factor = 2\n", encoding="utf-8")
    add_brokers(zk, 1, 2, 3)
    created = topics(config, "create", "events", "--partitions", "3", "--json")
    assert (created.returncode, created.stderr) == (0, "")
    answer = json.loads(created.stdout)
    assert answer["replication_factor"] == 2
    assert [len(r) for r in answer["partitions"].values()] == [2, 2, 2]


def test_create_list_describe_delete(zk: Any, config: Path) -> None:
    empty = topics(config, "list")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "no topics\n", "")  # says so, quietly
    assert topics(config, "list", "--json").stdout == "[]\n"
    add_brokers(zk, 1, 2, 3)
    created = topics(config, "create", "explicit", "--assignment", "0:2, 1:3 ,2:1")
    assert (created.returncode, created.stderr) == (0, "")
    assert created.stdout == (
        "created topic 'explicit' with 3 partitions, replication factor 1: 0->2, 1->3, 2->1\n"
    )
    assert json.loads(zk.get("/brokers/topics/explicit")[0]) == {
        "version": 1,
        "partitions": {"0": [2], "1": [3], "2": [1]},
    }
    listed = topics(config, "list", "--json")
    assert (listed.returncode, listed.stdout) == (0, '["explicit"]\n')

    zk.delete(broker_path(3))  # broker 3 goes down: partition 1 has no live leader
    described = topics(config, "describe", "explicit")
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout == (
        "topic 'explicit': 3 partitions, replication factor 1\n"
        "  partition  leader  epoch  replicas  isr       status\n"
        "          0       2      0  2         2         ok\n"
        "          1       3      0  3         3         offline: no live leader\n"
        "          2       1      0  1         1         ok\n"
        "  config                          value       from\n"
        "  cleanup.policy                  delete      default\n"
        "  compression.gzip.level          -1          default\n"
        "  compression.lz4.level           9           default\n"
        "  compression.type                producer    default\n"
        "  compression.zstd.level          3           default\n"
        "  delete.retention.ms             86400000    default\n"
        "  max.message.bytes               1048588     default\n"
        "  message.timestamp.type          CreateTime  default\n"
        "  min.cleanable.dirty.ratio       0.5         default\n"
        "  min.compaction.lag.ms           0           default\n"
        "  min.insync.replicas             1           default\n"
        "  retention.bytes                 -1          default\n"
        "  retention.ms                    604800000   default\n"
        "  segment.bytes                   1073741824  default\n"
        "  segment.ms                      604800000   default\n"
        "  unclean.leader.election.enable  false       default\n"
    )

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


# ------------------------------------------------------------------------------ describe, under-replicated


def replicated_topic(zk: Any) -> None:
    """``events``: 4 partitions over brokers 1-3 (3 down): in sync, shrunk ISR, led by a non-preferred
    replica, and led by the dead broker 3."""
    add_brokers(zk, 1, 2)
    write_topic(
        zk,
        "events",
        {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 2, 3]},
        {0: (1, 0, [1, 2, 3]), 1: (2, 4, [2, 1]), 2: (3, 7, [3]), 3: (2, 1, [2, 3, 1])},
    )
    zk.create("/config/topics/events", b'{"version":1,"config":{"min.insync.replicas":"2"}}', makepath=True)


def test_describe_shows_leader_epoch_replicas_isr_and_marks_under_replicated(zk: Any, config: Path) -> None:
    replicated_topic(zk)
    described = topics(config, "describe", "events")
    assert (described.returncode, described.stderr) == (0, "")
    assert described.stdout == (
        "topic 'events': 4 partitions, replication factor 3, configs min.insync.replicas=2, "
        "2 under-replicated\n"
        "  partition  leader  epoch  replicas  isr       status\n"
        "          0       1      0  1,2,3     1,2,3     ok\n"
        "          1       2      4  2,3,1     2,1       under-replicated\n"
        "          2       3      7  3,1,2     3         offline: no live leader; under-replicated\n"
        "          3       2      1  1,2,3     2,3,1     not on its preferred leader 1\n"
        "  config                          value       from\n"
        "  cleanup.policy                  delete      default\n"
        "  compression.gzip.level          -1          default\n"
        "  compression.lz4.level           9           default\n"
        "  compression.type                producer    default\n"
        "  compression.zstd.level          3           default\n"
        "  delete.retention.ms             86400000    default\n"
        "  max.message.bytes               1048588     default\n"
        "  message.timestamp.type          CreateTime  default\n"
        "  min.cleanable.dirty.ratio       0.5         default\n"
        "  min.compaction.lag.ms           0           default\n"
        "  min.insync.replicas             2           topic override\n"
        "  retention.bytes                 -1          default\n"
        "  retention.ms                    604800000   default\n"
        "  segment.bytes                   1073741824  default\n"
        "  segment.ms                      604800000   default\n"
        "  unclean.leader.election.enable  false       default\n"
    )
    as_json = json.loads(topics(config, "describe", "events", "--json").stdout)
    assert (as_json["topic"], as_json["replication_factor"], as_json["configs"]) == (
        "events",
        3,
        {"min.insync.replicas": "2"},
    )
    assert as_json["partitions"][1] == {
        "partition": 1,
        "leader": 2,
        "leader_epoch": 4,
        "replicas": [2, 3, 1],
        "isr": [2, 1],
        "leader_live": True,
        "leader_address": "127.0.0.1:9092",
        "under_replicated": True,
        "preferred_leader": True,
        "adding_replicas": [],
        "removing_replicas": [],
        "throttled": False,
    }
    assert as_json["partitions"][2]["leader_live"] is False
    assert [p["under_replicated"] for p in as_json["partitions"]] == [False, True, True, False]


def test_list_under_replicated(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(zk, "healthy", {0: [1, 2]}, {0: (1, 0, [1, 2])})
    none = topics(config, "list", "--under-replicated")
    assert (none.returncode, none.stdout, none.stderr) == (0, "no under-replicated partitions\n", "")
    zk.delete(broker_path(3))
    write_topic(zk, "events", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, {1: (2, 4, [2, 1]), 2: (3, 7, [3])})
    listed = topics(config, "list", "--under-replicated")
    assert (listed.returncode, listed.stderr) == (0, "")
    assert listed.stdout == (
        "events-1: leader 2, replicas 2,3,1, isr 2,1\nevents-2: leader 3 (NOT live), replicas 3,1,2, isr 3\n"
    )
    as_json = json.loads(topics(config, "list", "--under-replicated", "--json").stdout)
    assert [(p["topic"], p["partition"], p["isr"]) for p in as_json] == [
        ("events", 1, [2, 1]),
        ("events", 2, [3]),
    ]


# ------------------------------------------------------------------------------------------ elect-leaders


def test_elect_leaders_with_nothing_to_move_writes_nothing(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2)
    write_topic(
        zk, "events", {0: [1, 2], 1: [2, 1], 2: [3, 1]}, {0: (1, 0, [1, 2]), 1: (2, 0, [2]), 2: (1, 3, [1])}
    )
    result = topics(config, "elect-leaders", "--topic", "events")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "events-2: skipped, its preferred replica 3 is not live (leader stays 1)\n"
        "events-0: already led by its preferred replica 1\n"
        "events-1: already led by its preferred replica 2\n"
        "nothing to move: every partition asked about is on its preferred leader or was skipped\n"
    )
    assert zk.exists(ELECTION_PATH) is None


def test_elect_leaders_without_a_controller_times_out_naming_what_did_not_move(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(
        zk,
        "events",
        {0: [1, 2], 1: [2, 3], 2: [3, 1]},
        {0: (2, 5, [2, 1]), 1: (3, 2, [3]), 2: (3, 0, [3, 1])},
    )
    started = time.monotonic()
    result = topics(config, "elect-leaders", "--topic", "events", "--timeout", "1s")
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert result.stdout == (
        "events-1: skipped, its preferred replica 2 is not in the ISR 3\n"
        "events-2: already led by its preferred replica 3\n"
    )
    assert result.stderr == (
        "lumber: error: the preferred leaders were not elected within 1 s: events-0 (leader 2, preferred 1); "
        "is a controller running? (the request waits in /admin/preferred_replica_election)\n"
    )
    assert json.loads(zk.get(ELECTION_PATH)[0]) == {
        "version": 1,
        "partitions": [{"topic": "events", "partition": 0}],
    }


def test_elect_leaders_prints_each_move_as_the_controller_makes_it(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2, 3)
    write_topic(zk, "events", {0: [1, 2], 1: [2, 3]}, {0: (2, 5, [2, 1]), 1: (3, 2, [3, 2])})
    write_topic(zk, "other", {0: [3, 1]}, {0: (1, 1, [1, 3])})
    done = threading.Event()

    def controller() -> None:
        """What the controller does with the request: moves each leader, bumps the epoch, deletes it."""
        deadline = time.monotonic() + 30
        while zk.exists(ELECTION_PATH) is None:
            if time.monotonic() > deadline or done.is_set():
                return
            time.sleep(0.02)
        request = json.loads(zk.get(ELECTION_PATH)[0])
        for item in request["partitions"]:
            topic, partition = item["topic"], item["partition"]
            state = read_state(zk, topic, partition)
            replicas = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"][str(partition)]
            zk.set(
                state_path(topic, partition),
                state_json(replicas[0], state["leader_epoch"] + 1, state["isr"], state["controller_epoch"]),
            )
            time.sleep(0.05)
        zk.delete(ELECTION_PATH)

    thread = threading.Thread(target=controller)
    thread.start()
    try:
        result = topics(config, "elect-leaders", "--timeout", "20s")
    finally:
        done.set()
        thread.join(35)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "events-0: leader 2 -> 1 (leader epoch 5 -> 6)\n"
        "events-1: leader 3 -> 2 (leader epoch 2 -> 3)\n"
        "other-0: leader 1 -> 3 (leader epoch 1 -> 2)\n"
    )
    assert [read_state(zk, t, p)["leader"] for t, p in (("events", 0), ("events", 1), ("other", 0))] == [
        1,
        2,
        3,
    ]


def test_elect_leaders_of_one_partition_json(zk: Any, config: Path) -> None:
    add_brokers(zk, 1, 2)
    write_topic(zk, "events", {0: [1, 2], 1: [1, 2]}, {0: (2, 5, [2, 1]), 1: (2, 1, [2, 1])})
    missing = topics(config, "elect-leaders", "--topic", "events", "--partition", "7")
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        2,
        "",
        "lumber: error: --partition 7: topic 'events' has partitions 0 to 1\n",
    )
    result = topics(
        config, "elect-leaders", "--topic", "events", "--partition", "1", "--timeout", "300ms", "--json"
    )
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "moved": [],
        "already_preferred": [],
        "skipped": [],
        "not_moved": [{"topic": "events", "partition": 1, "leader": 2}],
    }
    assert json.loads(zk.get(ELECTION_PATH)[0])["partitions"] == [{"topic": "events", "partition": 1}]
