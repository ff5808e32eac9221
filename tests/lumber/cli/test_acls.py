"""``lumber acls add|remove|list`` against a real ZooKeeper (lumber/cli/acls.py): the real CLI process,
Kafka's znodes and change notifications checked byte for byte, bad input refused with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from broker.cluster.acl_store import AclStore


def lumber(zk_connect: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "acls", *args, "--zookeeper", zk_connect],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_add_list_and_remove(zk_connect: str, zk: Any) -> None:
    added = lumber(
        zk_connect, "add", "--allow-principal", "User:alice", "--operation", "Write",
        "--operation", "describe", "--topic", "orders",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout == (
        "Topic:Literal:orders\tUser:alice\t*\tAllow\tWrite\t(added)\n"
        "Topic:Literal:orders\tUser:alice\t*\tAllow\tDescribe\t(added)\n"
    )
    added = lumber(
        zk_connect, "add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9", "--topic", "ord",
        "--resource-pattern-type", "prefixed", "--json",
    )  # fmt: skip
    assert json.loads(added.stdout) == [
        {
            "resource_type": "Topic",
            "name": "ord",
            "pattern_type": "Prefixed",
            "principal": "User:*",
            "host": "10.0.0.9",
            "operation": "All",
            "permission_type": "Deny",
        }
    ]
    assert (
        lumber(
            zk_connect, "add", "--allow-principal", "User:ops", "--operation", "Alter", "--cluster"
        ).returncode
        == 0
    )

    # Kafka's znodes, and one change notification per resource written
    literal, _ = zk.get("/kafka-acl/Topic/orders")
    assert json.loads(literal) == {
        "acls": [
            {"host": "*", "operation": "Write", "permissionType": "Allow", "principal": "User:alice"},
            {"host": "*", "operation": "Describe", "permissionType": "Allow", "principal": "User:alice"},
        ],
        "version": 1,
    }
    prefixed, _ = zk.get("/kafka-acl-extended/prefixed/Topic/ord")
    assert json.loads(prefixed)["acls"] == [
        {"host": "10.0.0.9", "operation": "All", "permissionType": "Deny", "principal": "User:*"}
    ]
    assert zk.exists("/kafka-acl/Cluster/kafka-cluster")
    literal_changes = [
        zk.get(f"/kafka-acl-changes/{n}")[0] for n in sorted(zk.get_children("/kafka-acl-changes"))
    ]
    assert literal_changes == [b"Topic:orders", b"Cluster:kafka-cluster"]
    [extended] = zk.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "name": "ord",
        "patternType": "Prefixed",
        "resourceType": "Topic",
        "version": 1,
    }

    # list: all, by resource with MATCH (the literal and the prefix that applies), by principal
    listed = json.loads(lumber(zk_connect, "list", "--json").stdout)
    assert len(listed) == 4
    matched = lumber(zk_connect, "list", "--topic", "orders", "--resource-pattern-type", "match")
    assert matched.stdout.splitlines() == [  # by resource type, name, pattern type, then entry
        "Topic:Prefixed:ord\tUser:*\t10.0.0.9\tDeny\tAll",
        "Topic:Literal:orders\tUser:alice\t*\tAllow\tWrite",
        "Topic:Literal:orders\tUser:alice\t*\tAllow\tDescribe",
    ]
    assert lumber(zk_connect, "list", "--principal", "User:ops").stdout == (
        "Cluster:Literal:kafka-cluster\tUser:ops\t*\tAllow\tAlter\n"
    )

    # remove: every operation of alice's on the topic; the node goes with its last ACL
    removed = lumber(zk_connect, "remove", "--allow-principal", "User:alice", "--topic", "orders", "--json")
    assert [b["operation"] for b in json.loads(removed.stdout)] == ["Write", "Describe"]
    assert not zk.exists("/kafka-acl/Topic/orders")
    assert len(AclStore(zk).load()) == 2
    assert lumber(zk_connect, "remove", "--topic", "orders").stdout == "no ACLs removed\n"


def test_bad_input_is_refused(zk_connect: str) -> None:
    for args, message in [
        (["add", "--operation", "Read", "--topic", "t"], "name a principal"),
        (["add", "--allow-principal", "User:a", "--operation", "Read"], "name a resource"),
        (["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "AclOperation 'Fly'"),
        (["add", "--allow-principal", "alice", "--topic", "t"], "principal 'alice' is not type:name"),
        (["add", "--allow-principal", "User:a", "--group", "a/b"], "cannot hold '/'"),
    ]:
        done = lumber(zk_connect, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
