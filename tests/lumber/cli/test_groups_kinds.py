"""``lumber groups list|describe|reset-offsets|delete`` (lumber/cli/groups.py) as subprocesses on a kafka
group and a zookeeper group side by side, against real broker processes and a real ZooKeeper: each line
says which kind a group is; a kafka group is reset and deleted only without members, as
``kafka-consumer-groups`` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from tests.broker.client.groups.group_helpers import member, produce, wait_settled
from tests.lumber.cli.test_groups import drain, lumber
from tests.support.broker_cluster import servers, wait_for

GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}
HEADER = f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  "


def test_a_kafka_group_and_a_zookeeper_group_side_by_side(
    start_cluster: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic("events", 2)
    produce(cluster, "events", 2, 5)
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n\n'
        f"[consumer]\nbootstrap_servers = {json.dumps(servers(cluster))}\nrequest_timeout_ms = 5000\n"
    )
    zookeeper_member = member(cluster, "audit", auto_commit_enable=False)
    kafka_member = member(
        cluster,
        "kg",
        protocol="kafka",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        auto_commit_enable=False,
        consumer_settings={"client_id": "kg-client"},
    )
    zookeeper_member.subscribe("events")
    kafka_member.subscribe("events")
    wait_settled(cluster, "audit", "events", 2, [zookeeper_member], 15)
    for m in (zookeeper_member, kafka_member):
        assert sorted(drain(m, 10)) == [(p, o) for p in range(2) for o in range(5)]
        m.commit()
    mid = kafka_member.member_id

    listed = lumber(config, "list")
    assert (listed.returncode, listed.stdout, listed.stderr) == (
        0,
        "audit\tzookeeper\tmembers 1\tgeneration 1\nkg\tkafka\tmembers 1\tstate Stable\n",
        "",
    )

    described = lumber(config, "describe", "--group", "kg")
    assert described.returncode == 0, described.stderr
    assert described.stdout == (
        "group 'kg' (kafka): state Stable, protocol range, coordinator 0\n"
        "members (1):\n"
        f"  {mid}  client kg-client  host 127.0.0.1  assignment events-0,events-1\n"
        f"{HEADER}member  host  client\n"
        f"  {'events':<20} {0:>9}  {5:>10}  {5:>10}  {0:>8}  {mid}  127.0.0.1  kg-client\n"
        f"  {'events':<20} {1:>9}  {5:>10}  {5:>10}  {0:>8}  {mid}  127.0.0.1  kg-client\n"
    )
    info = json.loads(lumber(config, "describe", "--group", "kg", "--json").stdout)
    assert (info["kind"], info["state"], info["protocol"]) == ("kafka", "Stable", "range")
    assert info["members"] == [
        {
            "id": mid,
            "instance_id": None,
            "client_id": "kg-client",
            "host": "127.0.0.1",
            "assignment": ["events-0", "events-1"],
        }
    ]

    # a kafka group with members is neither reset nor deleted
    refused = lumber(config, "reset-offsets", "--group", "kg", "--topic", "events", "--to-earliest")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        2,
        "",
        (
            "lumber: error: group 'kg' is Stable: offsets are reset only while a kafka group has no members "
            "(stop its consumers first)\n"
        ),
    )
    kept = lumber(config, "delete", "--group", "kg")
    assert (kept.returncode, kept.stderr) == (
        2,
        "lumber: error: group 'kg': DeleteGroups: NON_EMPTY_GROUP (error code 68)\n",
    )
    kept = lumber(config, "delete", "--group", "audit")
    assert (kept.returncode, kept.stderr) == (
        2,
        (
            "lumber: error: consumer group 'audit' (zookeeper) has 1 members "
            f"({zookeeper_member.member_id}): stop them before deleting it\n"
        ),
    )

    kafka_member.close()
    admin = KafkaGroupAdmin(servers(cluster))
    request.addfinalizer(admin.close)
    wait_for(lambda: admin.state("kg") == "Empty", 30, "the kafka group to be empty")
    empty = lumber(config, "describe", "--group", "kg")
    assert empty.stdout == (
        "group 'kg' (kafka): state Empty, protocol -, coordinator 0\n"
        "members (0):\n"
        f"{HEADER}member  host  client\n"
        f"  {'events':<20} {0:>9}  {5:>10}  {5:>10}  {0:>8}  -  -  -\n"
        f"  {'events':<20} {1:>9}  {5:>10}  {5:>10}  {0:>8}  -  -  -\n"
    )
    reset = lumber(config, "reset-offsets", "--group", "kg", "--topic", "events", "--to-offset", "2")
    assert (reset.returncode, reset.stdout, reset.stderr) == (
        0,
        "group 'kg' (kafka), topic 'events': offsets reset\n  partition 0: 5 -> 2\n  partition 1: 5 -> 2\n",
        "",
    )
    # a new member of the group starts where the reset put it
    with member(cluster, "kg", protocol="kafka", session_timeout_ms=6000, heartbeat_interval_ms=200) as again:
        again.subscribe("events")
        assert sorted(drain(again, 6)) == [(p, o) for p in range(2) for o in range(2, 5)]
    wait_for(lambda: admin.state("kg") == "Empty", 30, "the kafka group to be empty again")

    deleted = lumber(config, "delete", "--group", "kg")
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "group 'kg' (kafka): deleted\n", "")
    zookeeper_member.close()
    deleted = lumber(config, "delete", "--group", "audit", "--kind", "zookeeper")
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (
        0,
        "group 'audit' (zookeeper): deleted\n",
        "",
    )
    after = lumber(config, "list")
    assert (after.returncode, after.stdout, after.stderr) == (0, "no consumer groups\n", "")
    assert admin.state("kg") == "Dead"
