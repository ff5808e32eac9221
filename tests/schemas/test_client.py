from __future__ import annotations

import json
import pickle
from collections.abc import Callable

import pytest

from lumber.dev.process import free_port
from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.errors import (
    IncompatibleSchemaError,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SubjectNotFoundError,
)
from tests.schemas.conftest import RegistryProcess

Closing = Callable[[SchemaRegistryClient], SchemaRegistryClient]

V1 = json.dumps({"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "E",
        "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "int", "default": 0}],
    }
)


class FakeClock:
    """An injected clock (the client's TTL is measured on it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_operations(registry: RegistryProcess) -> None:
    with SchemaRegistryClient(registry.url) as client:
        assert client.register("s", V1) == 1
        assert client.register("s", AvroSchema.parse(V2)) == 2
        assert client.get_versions("s") == [1, 2]
        latest = client.get_latest("s")
        assert (latest.subject, latest.version, latest.schema_id) == ("s", 2, 2)
        assert latest.schema == AvroSchema.parse(V2).canonical
        assert client.lookup("s", V1).version == 1
        assert client.subjects() == ["s"]
        assert client.get_schema(1) == AvroSchema.parse(V1)
        assert client.get_compatibility() == "BACKWARD"
        assert client.get_compatibility("s", default_to_global=True) == "BACKWARD"
        assert client.set_compatibility("FULL", "s") == "FULL"
        assert client.get_compatibility("s") == "FULL"
        breaking = json.dumps({"type": "record", "name": "E", "fields": [{"name": "id", "type": "long"}]})
        result = client.check_compatibility("s", breaking)
        assert result.is_compatible is False
        assert len(result.messages) == 2  # FULL: both directions against version 2
        assert "writer type string cannot be promoted to reader type long" in result.messages[0]
        assert client.check_compatibility("s", V2, version=None).is_compatible is True
        with pytest.raises(IncompatibleSchemaError) as info:
            client.register("s", breaking)
        assert info.value.error_code == 409
        assert client.delete_version("s", 2) == 2
        assert client.get_versions("s") == [1]  # the client's own delete dropped its cached answer
        assert client.delete_subject("s") == [1]
        assert client.delete_subject("s", permanent=True) == [1, 2]
        with pytest.raises(SubjectNotFoundError) as missing:
            client.get_latest("s")
        assert (missing.value.error_code, missing.value.http_status) == (40401, 404)


def test_by_id_lookups_are_cached_for_good(registry: RegistryProcess, closing: Closing) -> None:
    client = closing(SchemaRegistryClient(registry.url))
    client.register("s", V1)
    assert client.get_schema(1).type_name == "E"
    client.delete_subject("s")
    client.delete_subject("s", permanent=True)  # id 1 is gone from the registry ...
    with pytest.raises(SchemaNotFoundError):
        closing(SchemaRegistryClient(registry.url)).get_schema(1)
    registry.stop()
    assert client.get_schema(1).type_name == "E"  # ... and the server too: the cache answers


def test_by_subject_lookups_expire_after_the_ttl(registry: RegistryProcess, closing: Closing) -> None:
    clock = FakeClock()
    client = closing(SchemaRegistryClient(registry.url, subject_cache_ttl_s=30, clock=clock))
    other = closing(SchemaRegistryClient(registry.url))
    client.register("s", V1)
    assert client.get_latest("s").version == 1
    other.register("s", V2)  # another writer: this client is not told
    clock.now += 29.9
    assert client.get_latest("s").version == 1  # cached
    assert client.get_versions("s") == [1, 2]  # a different question: asked now, cached from now
    clock.now += 0.2
    assert client.get_latest("s").version == 2  # expired: asked again
    other.delete_version("s", 2)
    assert client.get_versions("s") == [1, 2]
    client.register("s", V1)  # cached registration: no request, and no invalidation either
    clock.now += 31
    assert client.get_versions("s") == [1]


def test_unreachable_registry(closing: Closing) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = closing(SchemaRegistryClient(url, timeout_s=2))
    with pytest.raises(RegistryUnavailableError, match=f"cannot reach the schema registry at {url}"):
        client.get_schema(1)


def test_pickles_its_settings_only(registry: RegistryProcess, closing: Closing) -> None:
    client = closing(SchemaRegistryClient(registry.url, timeout_s=7, subject_cache_ttl_s=3))
    client.register("s", V1)
    client.get_schema(1)
    copy = closing(pickle.loads(pickle.dumps(client)))
    assert (copy.url, copy.timeout_s, copy.subject_cache_ttl_s) == (registry.url, 7, 3)
    assert copy._by_id == {}
    assert copy._http is None
    assert copy.get_schema(1) == client.get_schema(1)
