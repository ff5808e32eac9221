"""ACLs in a real ZooKeeper (broker/cluster/acl_store.py, acl_watcher.py): Kafka's znodes, removal by
filter, concurrent writers keeping each other's ACLs, watchers following the change notifications, old
notifications purged, and what a node that does not decode does."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from broker.cluster import acl_store
from broker.cluster.acl_store import AclStore
from broker.cluster.acl_watcher import AclWatcher
from broker.security.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_cache import Match

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)


def entry(principal: str, operation: AclOperation = AclOperation.READ) -> AccessControlEntry:
    return AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW)


def test_add_and_remove_in_kafkas_layout(zk: Any) -> None:
    store = AclStore(zk)
    store.add(
        [AclBinding(ORDERS, entry("User:alice")), AclBinding(PREFIX, entry("User:bob", AclOperation.WRITE))]
    )
    store.add([AclBinding(ORDERS, entry("User:alice"))])  # again: nothing changes, no notification
    assert json.loads(zk.get("/kafka-acl/Topic/orders")[0]) == {
        "acls": [{"host": "*", "operation": "Read", "permissionType": "Allow", "principal": "User:alice"}],
        "version": 1,
    }
    assert zk.get_children("/kafka-acl-extended/prefixed/Topic") == ["ord"]
    assert [zk.get(f"/kafka-acl-changes/{n}")[0] for n in zk.get_children("/kafka-acl-changes")] == [
        b"Topic:orders"
    ]
    assert len(zk.get_children("/kafka-acl-extended-changes")) == 1
    assert store.read(ORDERS) == {entry("User:alice")}

    removed = store.remove(AclBindingFilter(principal="User:bob"))
    assert removed == [AclBinding(PREFIX, entry("User:bob", AclOperation.WRITE))]
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/ord") is None
    assert len(zk.get_children("/kafka-acl-extended-changes")) == 2
    assert store.remove(AclBindingFilter(principal="User:bob")) == []
    assert list(store.load().bindings()) == [AclBinding(ORDERS, entry("User:alice"))]


def test_concurrent_writers_keep_each_others_acls(zk: Any) -> None:
    stores = [AclStore(zk) for _ in range(4)]
    threads = [
        threading.Thread(
            target=lambda s=s, i=i: s.add([AclBinding(ORDERS, entry(f"User:u{i}-{k}")) for k in range(5)])
        )
        for i, s in enumerate(stores)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert {e.principal for e in AclStore(zk).read(ORDERS)} == {
        f"User:u{i}-{k}" for i in range(4) for k in range(5)
    }


def test_watchers_follow_the_notifications(zk: Any, zk_connect: str) -> None:
    store = AclStore(zk)
    store.add([AclBinding(ORDERS, entry("User:alice"))])  # before the watcher starts: loaded
    watcher = AclWatcher(zk)
    watcher.start()
    try:
        assert (
            watcher.cache.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "orders")
            is Match.ALLOW
        )
        store.add([AclBinding(PREFIX, entry("User:bob", AclOperation.WRITE))])
        assert watcher.wait_for(lambda c: len(c) == 2, 10)
        assert watcher.cache.authorize(
            "User:bob", "h", AclOperation.WRITE, ResourceType.TOPIC, "orders-eu"
        ) is (Match.ALLOW)
        store.remove(
            AclBindingFilter(
                resource_type=ResourceType.TOPIC, name="orders", pattern_type=PatternType.LITERAL
            )
        )
        assert watcher.wait_for(lambda c: len(c) == 1, 10)
        assert watcher.cache.patterns() == [PREFIX]
        # a change notification naming a node that does not decode: logged, skipped, the rest still followed
        zk.create("/kafka-acl/Topic/broken", b"{not json", makepath=True)
        zk.create(
            f"{acl_store.LITERAL_CHANGES_PATH}/{acl_store.CHANGE_PREFIX}", b"Topic:broken", sequence=True
        )
        store.add([AclBinding(ORDERS, entry("User:carol"))])
        assert watcher.wait_for(lambda c: len(c) == 2, 10)
        assert sorted(p.name for p in watcher.cache.patterns()) == ["ord", "orders"]
    finally:
        watcher.stop()


def test_old_notifications_are_purged(zk: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = AclStore(zk)
    store.add([AclBinding(ORDERS, entry("User:alice"))])
    [old] = zk.get_children(acl_store.LITERAL_CHANGES_PATH)
    watcher = AclWatcher(zk)
    monkeypatch.setattr(acl_store, "CHANGE_EXPIRATION_MS", 0)  # every notification is old: all purged
    try:
        watcher.start()
        time.sleep(0.01)
        store.add([AclBinding(ORDERS, entry("User:bob"))])
        assert watcher.wait_for(lambda c: len(c) == 2, 10)
        deadline = time.monotonic() + 10
        while old in zk.get_children(acl_store.LITERAL_CHANGES_PATH) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert old not in zk.get_children(acl_store.LITERAL_CHANGES_PATH)
    finally:
        watcher.stop()
