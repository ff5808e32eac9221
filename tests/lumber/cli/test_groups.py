"""``lumber groups list|describe|reset-offsets`` (lumber/cli/groups.py) as subprocesses, against a live
group of a real broker: a reset rewinds the members while they consume."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.broker.client.groups.group_helpers import member, produce, wait_settled
from tests.support.broker_cluster import servers


def lumber(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "groups", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def drain(m: Any, count: int, timeout_s: float = 20) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} records"
        got.extend((r.partition, r.offset) for r in m.poll(timeout_ms=100))
    return got


def test_list_describe_and_reset_a_live_group(broker_cluster: Any, tmp_path: Path) -> None:
    broker_cluster.create_topic("events", 2)
    produce(broker_cluster, "events", 2, 5)
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n\n'
        f"[consumer]\nbootstrap_servers = {json.dumps(servers(broker_cluster))}\nrequest_timeout_ms = 5000\n"
    )
    empty = lumber(config, "list")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "no consumer groups\n", "")
    assert lumber(config, "list", "--json").stdout == "[]\n"
    no_lag = lumber(config, "lag", "--all-groups")
    assert (no_lag.returncode, no_lag.stdout, no_lag.stderr) == (0, "no consumer groups\n", "")
    with member(broker_cluster, "audit", auto_commit_enable=False) as m:
        m.subscribe("events")
        wait_settled(broker_cluster, "audit", "events", 2, [m], 15)
        assert sorted(drain(m, 10)) == [(p, o) for p in range(2) for o in range(5)]
        m.commit()

        listed = lumber(config, "list")
        assert (listed.returncode, listed.stdout, listed.stderr) == (
            0,
            "audit\tzookeeper\tmembers 1\tgeneration 1\n",
            "",
        )

        described = lumber(config, "describe", "--group", "audit", "--json")
        assert described.returncode == 0, described.stderr
        info = json.loads(described.stdout)
        assert (info["group"], info["generation"], info["leader"]) == ("audit", 1, m.member_id)
        assert [(x["id"], x["subscription"]) for x in info["members"]] == [(m.member_id, {"events": 1})]
        assert info["partitions"] == [
            {"topic": "events", "partition": p, "owner": m.member_id, "committed": 5, "log_end": 5, "lag": 0}
            for p in range(2)
        ]
        text = lumber(config, "describe", "--group", "audit")
        assert text.stdout.startswith(
            f"group 'audit' (zookeeper): generation 1, leader {m.member_id}, strategy range\n"
        )

        # the paper's rewind, for the whole (live) group
        reset = lumber(config, "reset-offsets", "--group", "audit", "--topic", "events", "--to-earliest")
        assert reset.returncode == 0, reset.stderr
        assert reset.stdout == (
            "group 'audit' (zookeeper), topic 'events': offsets reset\n"
            "  partition 0: 5 -> 0\n  partition 1: 5 -> 0\n"
        )
        assert sorted(drain(m, 10)) == [(p, o) for p in range(2) for o in range(5)]

        clamped = lumber(
            config, "reset-offsets", "--group", "audit", "--topic", "events", "--to-offset", "99", "--json"
        )
        assert json.loads(clamped.stdout) == {
            "group": "audit",
            "kind": "zookeeper",
            "partitions": [{"topic": "events", "partition": p, "before": 0, "after": 5} for p in range(2)],
        }

    unknown = lumber(config, "describe", "--group", "nobody")
    assert (unknown.returncode, unknown.stderr.strip()) == (
        2,
        "lumber: error: consumer group 'nobody' does not exist",
    )
    bad_date = lumber(
        config, "reset-offsets", "--group", "audit", "--topic", "events", "--to-datetime", "yesterday"
    )
    assert bad_date.returncode == 2
    assert "'yesterday' is not an ISO 8601 date and time" in bad_date.stderr
