from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from schemas.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSubjectError,
    InvalidVersionError,
    RegistryError,
    SchemaNotFoundError,
    SubjectConfigNotFoundError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from schemas.registry.compatibility_level import CompatibilityLevel
from schemas.registry.config import RegistryConfig
from schemas.registry.schema_registry import SchemaRegistry, parse_version
from schemas.registry.schema_store import SchemaStore
from tests.support.zookeeper import new_client


def record(*fields: tuple[str, Any] | tuple[str, Any, Any], name: str = "Event") -> str:
    out = []
    for spec in fields:
        field: dict[str, Any] = {"name": spec[0], "type": spec[1]}
        if len(spec) == 3:
            field["default"] = spec[2]
        out.append(field)
    return json.dumps({"type": "record", "name": name, "namespace": "t", "fields": out})


V1 = record(("id", "string"))
V2 = record(("id", "string"), ("n", "int", 0))
BREAKING = record(("id", "long"))


def make_registry(client: Any, **config: Any) -> SchemaRegistry:
    store = SchemaStore(client, "/schema_registry")
    store.ensure_layout()
    return SchemaRegistry(store, RegistryConfig(**config))


@pytest.fixture
def reg(zk: Any) -> SchemaRegistry:
    return make_registry(zk)


def code_of(exc_info: pytest.ExceptionInfo[RegistryError]) -> int:
    return exc_info.value.error_code


def test_register_is_idempotent_on_the_normalized_form(reg: SchemaRegistry) -> None:
    assert reg.register("s", V1) == 1
    spaced = json.dumps(json.loads(V1), indent=4, sort_keys=True)
    assert reg.register("s", spaced) == 1
    assert reg.register("s", spaced, schema_type="AVRO", references=[]) == 1
    assert reg.versions("s") == [1]
    assert reg.register("s", V2) == 2
    assert reg.versions("s") == [1, 2]
    assert reg.register("s", V1) == 1  # an earlier live version: still no new version
    assert reg.versions("s") == [1, 2]


def test_identical_schemas_share_one_id_across_subjects(reg: SchemaRegistry) -> None:
    assert reg.register("a", V1) == 1
    assert reg.register("b", V2) == 2
    assert reg.register("c", V1) == 1
    assert reg.get_version("c", "latest").to_json() == {
        "subject": "c",
        "version": 1,
        "id": 1,
        "schema": reg.schema_text(1),
    }
    assert reg.id_versions(1) == [("a", 1), ("c", 1)]
    assert reg.subjects() == ["a", "b", "c"]
    assert reg.subjects(prefix="b") == ["b"]


def test_lookup(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    reg.register("s", V2)
    found = reg.lookup("s", json.dumps(json.loads(V1)))
    assert (found.subject, found.version, found.schema_id) == ("s", 1, 1)
    with pytest.raises(SchemaNotFoundError) as info:
        reg.lookup("s", BREAKING)
    assert (code_of(info), str(info.value)) == (40403, "Schema not found")
    with pytest.raises(SubjectNotFoundError) as missing:
        reg.lookup("nope", V1)
    assert (code_of(missing), str(missing.value)) == (40401, "Subject 'nope' not found.")


def test_incompatible_schema_is_refused_with_the_rule_and_path(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    with pytest.raises(IncompatibleSchemaError) as info:
        reg.register("s", BREAKING)
    assert code_of(info) == 409
    assert info.value.http_status == 409
    assert str(info.value) == (
        'Schema being registered is incompatible with an earlier schema for subject "s" (compatibility level '
        "BACKWARD), details: BACKWARD: the new schema cannot read data written with version 1: field "
        "'Event.id': writer type string cannot be promoted to reader type long"
    )
    assert reg.versions("s") == [1]
    assert reg.store.max_id() == 1
    assert reg.test_compatibility("s", BREAKING, "latest") != []


def test_levels_global_and_per_subject(reg: SchemaRegistry) -> None:
    assert reg.global_level() is CompatibilityLevel.BACKWARD
    with pytest.raises(SubjectConfigNotFoundError) as info:
        reg.subject_level("s")
    assert code_of(info) == 40408
    assert reg.subject_level("s", default_to_global=True) is CompatibilityLevel.BACKWARD
    reg.register("s", V1)
    assert reg.set_subject_level("s", "none") is CompatibilityLevel.NONE
    assert reg.register("s", BREAKING) == 2
    assert reg.delete_subject_level("s") is CompatibilityLevel.NONE
    assert reg.set_global_level("FORWARD") is CompatibilityLevel.FORWARD
    # FORWARD: version 2 (id: long) must read the new data; V2 has "id" as a string
    with pytest.raises(IncompatibleSchemaError, match="FORWARD: version 2 cannot read"):
        reg.register("s", V2)
    assert reg.effective_level("other") is CompatibilityLevel.FORWARD


def test_configured_default_level(zk: Any) -> None:
    reg = make_registry(zk, default_compatibility="NONE")
    reg.register("s", V1)
    assert reg.register("s", BREAKING) == 2


def test_transitive_checks_every_live_version(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    reg.register("s", V2)
    # n loses its default: reads version 2's data, not version 1's
    strict = record(("id", "string"), ("n", "int"))
    assert reg.test_compatibility("s", strict, "latest") == []
    assert reg.test_compatibility("s", strict, "1") == [
        (
            "BACKWARD: the new schema cannot read data written with version 1: field 'Event.n': reader field "
            "'n' has no default and the writer has no field 'n'"
        )
    ]
    assert len(reg.test_compatibility("s", strict, None)) == 1  # every live version
    reg.set_subject_level("s", "BACKWARD_TRANSITIVE")
    with pytest.raises(IncompatibleSchemaError, match="version 1"):
        reg.register("s", strict)
    reg.set_subject_level("s", "BACKWARD")
    assert reg.register("s", strict) == 3


def test_compatibility_test_edge_cases(reg: SchemaRegistry) -> None:
    assert reg.test_compatibility("new", V1, "latest") == []  # nothing to break
    with pytest.raises(SubjectNotFoundError):
        reg.test_compatibility("new", V1, "1")
    reg.register("s", V1)
    with pytest.raises(VersionNotFoundError) as info:
        reg.test_compatibility("s", V1, "7")
    assert str(info.value) == "Version 7 not found."
    with pytest.raises(InvalidSchemaError):
        reg.test_compatibility("s", "{", "latest")


def test_soft_and_hard_delete_of_a_version(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    reg.register("s", V2)
    reg.register("t", V2)
    with pytest.raises(VersionNotSoftDeletedError) as info:
        reg.delete_version("s", "2", permanent=True)
    assert code_of(info) == 40407
    assert str(info.value) == "Subject 's' Version 2 was not deleted first before being permanently deleted"
    assert reg.delete_version("s", "latest") == 2
    assert reg.versions("s") == [1]
    assert reg.versions("s", deleted=True) == [1, 2]
    assert reg.get_version("s", "latest").version == 1
    with pytest.raises(VersionNotFoundError) as hidden:
        reg.get_version("s", "2")
    assert (code_of(hidden), str(hidden.value)) == (40402, "Version 2 not found.")
    assert reg.get_version("s", "2", deleted=True).schema_id == 2
    assert reg.schema_text(2) == reg.get_version("t", "1").schema  # ids still answer after a soft delete
    with pytest.raises(VersionSoftDeletedError) as again:
        reg.delete_version("s", "2")
    assert code_of(again) == 40406
    assert reg.delete_version("s", "2", permanent=True) == 2
    assert reg.versions("s", deleted=True) == [1]
    assert reg.schema_text(2) == reg.get_version("t", "1").schema  # t still references id 2
    with pytest.raises(VersionNotFoundError):
        reg.delete_version("s", "2", permanent=True)
    # the next version number continues after the highest one that remains
    assert reg.register("s", V2) == 2
    assert reg.versions("s") == [1, 2]


def test_soft_and_hard_delete_of_a_subject(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    reg.register("s", V2)
    reg.set_subject_level("s", "NONE")
    with pytest.raises(SubjectNotSoftDeletedError) as live:
        reg.delete_subject("s", permanent=True)
    assert (code_of(live), str(live.value)) == (
        40405,
        "Subject 's' was not deleted first before being permanently deleted",
    )
    assert reg.delete_subject("s") == [1, 2]
    assert reg.subjects() == []
    assert reg.subjects(deleted=True) == ["s"]
    with pytest.raises(SubjectNotFoundError):
        reg.versions("s")
    assert reg.versions("s", deleted=True) == [1, 2]
    with pytest.raises(SubjectSoftDeletedError) as again:
        reg.delete_subject("s")
    assert (code_of(again), str(again.value)) == (
        40404,
        "Subject 's' was soft deleted. Set permanent=true to delete permanently",
    )
    assert reg.schema_text(1) == reg.get_version("s", "1", deleted=True).schema
    assert reg.delete_subject("s", permanent=True) == [1, 2]
    assert reg.subjects(deleted=True) == []
    with pytest.raises(SchemaNotFoundError) as gone:
        reg.schema_text(1)
    assert (code_of(gone), str(gone.value)) == (40403, "Schema 1 not found")
    with pytest.raises(SubjectConfigNotFoundError):
        reg.subject_level("s")
    with pytest.raises(SubjectNotFoundError):
        reg.delete_subject("s")
    # a re-registered schema gets a new id: ids are never reused
    assert reg.register("s", V1) == 3


def test_re_registering_after_a_soft_delete_adds_a_version(reg: SchemaRegistry) -> None:
    reg.register("s", V1)
    reg.delete_subject("s")
    assert reg.register("s", V1) == 1
    assert reg.versions("s") == [2]
    assert reg.versions("s", deleted=True) == [1, 2]
    assert reg.lookup("s", V1).version == 2


@pytest.mark.parametrize("raw", ["0", "x", "1.5", "2147483648", "-2", " ", "٣"])
def test_invalid_versions(raw: str) -> None:
    with pytest.raises(InvalidVersionError) as info:
        parse_version(raw)
    assert info.value.error_code == 42202
    assert str(info.value) == (
        f"The specified version '{raw}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"'
    )


def test_valid_versions() -> None:
    assert [parse_version(v) for v in ("latest", "LATEST", "-1", "1", "2147483647")] == [
        None,
        None,
        None,
        1,
        2147483647,
    ]


@pytest.mark.parametrize(
    ("subject", "problem"), [("", "it is empty"), ("a\nb", "control"), ("x" * 256, "256")]
)
def test_invalid_subjects(reg: SchemaRegistry, subject: str, problem: str) -> None:
    with pytest.raises(InvalidSubjectError, match=problem) as info:
        reg.register(subject, V1)
    assert info.value.error_code == 42208


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schema_type": "JSON"}, "schemaType 'JSON' is not supported"),
        (
            {"references": [{"name": "x", "subject": "y", "version": 1}]},
            "schema references are not supported",
        ),
    ],
)
def test_only_plain_avro(reg: SchemaRegistry, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSchemaError, match=message):
        reg.register("s", V1, **kwargs)


def test_schema_size_limit(zk: Any) -> None:
    reg = make_registry(zk, max_schema_bytes=100)
    with pytest.raises(InvalidSchemaError, match=r"it has 1\d\d bytes, more than the limit of 100") as info:
        reg.register("s", record(("a_rather_long_field_name", "string"), ("another_long_one", "long")))
    assert info.value.error_code == 42201


def test_two_registries_registering_concurrently_never_share_an_id(zk: Any, zk_connect: str) -> None:
    """Two registries (own ZooKeeper sessions) race: distinct schemas get distinct ids, equal ones one id."""
    other_client = new_client(zk_connect)
    try:
        registries = [make_registry(zk), make_registry(other_client)]
        registries[0].set_global_level("NONE")
        schemas = [record(("f", "int"), name=f"Event{i}") for i in range(24)]
        results: list[list[tuple[str, int]]] = [[], []]
        errors: list[BaseException] = []
        barrier = threading.Barrier(2)

        def work(index: int) -> None:
            try:
                barrier.wait(timeout=10)
                for i, schema in enumerate(schemas):
                    # every schema twice: into a shared subject and into a subject of this registry's own
                    results[index].append((schema, registries[index].register("shared", schema)))
                    results[index].append(
                        (schema, registries[index].register(f"own-{index}-{i % 3}", schema))
                    )
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        ids_by_schema: dict[str, set[int]] = {}
        for schema, schema_id in results[0] + results[1]:
            ids_by_schema.setdefault(schema, set()).add(schema_id)
        assert all(len(ids) == 1 for ids in ids_by_schema.values())  # one schema, one id
        ids = [next(iter(v)) for v in ids_by_schema.values()]
        assert sorted(ids) == list(range(1, 25))  # one id per schema, no gaps, none shared
        for schema, (schema_id,) in ((s, tuple(v)) for s, v in ids_by_schema.items()):
            assert (
                registries[1].schema_text(schema_id) == registries[0].parse_request_schema(schema).canonical
            )
        assert len(registries[0].versions("shared")) == 24
    finally:
        other_client.stop()
        other_client.close()
