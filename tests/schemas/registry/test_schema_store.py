from __future__ import annotations

import json
from typing import Any

import pytest

from schemas.avro_schema import AvroSchema
from schemas.errors import ConcurrentUpdateError, StoreError
from schemas.registry.schema_store import SchemaStore, escape_subject, unescape_subject
from tests.support.zookeeper import new_client

A = AvroSchema.parse('{"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}')
B = AvroSchema.parse('{"type": "record", "name": "B", "fields": [{"name": "y", "type": "string"}]}')


@pytest.fixture
def store(zk: Any) -> SchemaStore:
    store = SchemaStore(zk, "/schema_registry")
    store.ensure_layout()
    return store


def add(store: SchemaStore, subject: str, schema: AvroSchema) -> tuple[int, int]:
    return store.add_version(
        subject,
        store.subject_state(subject),
        store.id_for_fingerprint(schema.fingerprint),
        schema.canonical,
        schema.fingerprint,
    )


def test_escape_subject_round_trips_and_keeps_znode_names_plain() -> None:
    assert escape_subject("lumber.page_view-value") == "lumber%2Epage_view-value"
    assert escape_subject("a/b@c é") == "a%2Fb%40c%20%C3%A9"
    for subject in ("lumber.page_view-value", "a/b@c é", "..", "日本"):
        assert unescape_subject(escape_subject(subject)) == subject


def test_layout_is_exactly_as_documented(store: SchemaStore, zk: Any) -> None:
    assert add(store, "t.v", A) == (1, 1)
    root = "/schema_registry"
    assert zk.get(f"{root}/id_counter")[0] == b"1"
    assert zk.get(f"{root}/ids/1")[0] == A.canonical.encode()
    assert zk.get_children(f"{root}/ids/1") == ["t%2Ev@1"]
    assert zk.get(f"{root}/fingerprints/{A.fingerprint}")[0] == b"1"
    assert json.loads(zk.get(f"{root}/subjects/t%2Ev")[0]) == {"live": 1}
    assert json.loads(zk.get(f"{root}/subjects/t%2Ev/0000000001")[0]) == {"id": 1, "deleted": False}
    assert sorted(zk.get_children(root)) == [
        "fingerprints",
        "id_counter",
        "ids",
        "subject_configs",
        "subjects",
    ]


def test_ids_increase_and_identical_schemas_share_one(store: SchemaStore) -> None:
    assert add(store, "s1", A) == (1, 1)
    assert add(store, "s2", B) == (2, 1)
    assert add(store, "s3", A) == (1, 1)  # same schema, other subject: same id
    assert add(store, "s1", B) == (2, 2)
    assert store.max_id() == 2
    assert store.references(1) == [("s1", 1), ("s3", 1)]
    assert store.references(2) == [("s1", 2), ("s2", 1)]
    assert store.subject_live_counts() == {"s1": 2, "s2": 1, "s3": 1}


def test_a_stale_subject_read_loses_and_writes_nothing(store: SchemaStore, zk: Any) -> None:
    add(store, "s", A)
    stale = store.subject_state("s")
    add(store, "s", B)  # a concurrent registration wins
    with pytest.raises(ConcurrentUpdateError, match="lost a race"):
        store.add_version("s", stale, None, '{"type":"fixed","name":"F","size":1}', "f" * 64)
    assert store.max_id() == 2
    assert zk.exists("/schema_registry/ids/3") is None
    assert zk.exists(f"/schema_registry/fingerprints/{'f' * 64}") is None
    state = store.subject_state("s")
    assert state is not None
    assert [(e.version, e.schema_id) for e in state.versions] == [(1, 1), (2, 2)]


def test_an_id_allocation_with_a_stale_counter_loses(store: SchemaStore, zk_connect: str) -> None:
    other_client = new_client(zk_connect)
    try:
        other = SchemaStore(other_client, "/schema_registry")
        _, counter_stat = other_client.get(other.counter_path)  # the other registry reads counter 0 ...
        assert add(store, "x", A) == (1, 1)  # ... and this one takes id 1 first
        txn = other_client.transaction()
        txn.set_data(other.counter_path, b"1", version=counter_stat.version)
        txn.create(other.id_path(1), B.canonical.encode())
        with pytest.raises(ConcurrentUpdateError, match="BadVersionError"):
            other._commit(txn, "a stale id allocation")
        assert store.schema_text(1) == A.canonical
        assert other.add_version("y", None, None, B.canonical, B.fingerprint) == (2, 1)  # re-read: id 2
    finally:
        other_client.stop()
        other_client.close()


def test_hard_delete_keeps_an_id_another_version_references(store: SchemaStore, zk: Any) -> None:
    add(store, "s1", A)
    add(store, "s2", A)
    s1 = store.subject_state("s1")
    assert s1 is not None
    store.soft_delete(s1, [1])
    s1 = store.subject_state("s1")
    assert s1 is not None
    assert store.hard_delete(s1, [1]) == []
    assert store.subject_state("s1") is None  # its last version took the subject node along
    assert store.schema_text(1) == A.canonical
    assert store.references(1) == [("s2", 1)]
    s2 = store.subject_state("s2")
    assert s2 is not None
    store.soft_delete(s2, [1])
    s2 = store.subject_state("s2")
    assert s2 is not None
    assert store.hard_delete(s2, [1]) == [1]
    assert store.schema_text(1) is None
    assert store.id_for_fingerprint(A.fingerprint) is None
    assert zk.get_children("/schema_registry/ids") == []
    # ids are never reused
    assert add(store, "s3", A) == (2, 1)


def test_hard_delete_loses_to_a_concurrent_new_reference(store: SchemaStore) -> None:
    add(store, "s1", A)
    state = store.subject_state("s1")
    assert state is not None
    store.soft_delete(state, [1])
    state = store.subject_state("s1")
    assert state is not None
    # between reading the references and committing the delete, another subject starts using id 1
    add(store, "s2", A)
    # a hard delete planned on the old picture would delete ids/1 too: it must fail as a whole
    refs_before = store.references(1)
    assert refs_before == [("s1", 1), ("s2", 1)]
    txn = store.client.transaction()
    txn.delete(store.version_path("s1", 1))
    txn.delete(store.reference_path(1, "s1", 1))
    txn.delete(store.subject_path("s1"), version=state.znode_version)
    txn.delete(store.id_path(1))
    with pytest.raises(ConcurrentUpdateError, match="NotEmptyError"):
        store._commit(txn, "hard delete with a stale reference list")
    assert store.schema_text(1) == A.canonical
    assert store.subject_state("s1") == state
    # done properly, the id stays because s2 references it
    assert store.hard_delete(state, [1]) == []
    assert store.references(1) == [("s2", 1)]


def test_registration_loses_when_its_id_vanishes(store: SchemaStore) -> None:
    add(store, "s1", A)
    schema_id = store.id_for_fingerprint(A.fingerprint)
    state = store.subject_state("s1")
    assert state is not None
    store.soft_delete(state, [1])
    state = store.subject_state("s1")
    assert state is not None
    store.hard_delete(state, [1])
    with pytest.raises(ConcurrentUpdateError, match="NoNodeError"):
        store.add_version("s2", None, schema_id, A.canonical, A.fingerprint)
    assert store.subject_state("s2") is None


def test_config_levels(store: SchemaStore) -> None:
    assert store.global_level() is None
    store.set_global_level("FULL")
    store.set_global_level("NONE")
    assert store.global_level() == "NONE"
    assert store.subject_level("s") is None
    store.set_subject_level("s", "FORWARD")
    assert store.subject_level("s") == "FORWARD"
    assert store.delete_subject_level("s") == "FORWARD"
    assert store.delete_subject_level("s") is None


def test_zookeeper_failures_are_store_errors(zk_connect: str) -> None:
    client = new_client(zk_connect)
    store = SchemaStore(client, "/schema_registry", connection_wait_s=0.2)
    store.ensure_layout()
    client.stop()
    client.close()
    with pytest.raises(StoreError, match="ZooKeeper failed during schema_text: not connected") as info:
        store.schema_text(1)
    assert info.value.error_code == 50001
    assert info.value.http_status == 500
