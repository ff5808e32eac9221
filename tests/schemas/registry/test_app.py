"""The HTTP API, against a real ``lumber schemas serve`` process on real ZooKeeper."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.schemas.conftest import RegistryProcess
from tests.support.registry import nested_record

MEDIA = "application/vnd.schemaregistry.v1+json"
V1 = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "id", "type": "string"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "long", "default": 0}],
    }
)
CANONICAL_V1 = '{"fields":[{"name":"id","type":"string"}],"name":"Event","type":"record"}'


def call(
    registry: RegistryProcess,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = MEDIA,
    params: dict[str, str] | None = None,
) -> httpx.Response:
    content = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": content_type} if content is not None else {}
    response = httpx.request(
        method, f"{registry.url}{path}", content=content, headers=headers, params=params, timeout=30
    )
    assert response.headers["content-type"] == MEDIA, (path, response.headers["content-type"])
    return response


def expect_error(response: httpx.Response, status: int, code: int, message: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == code
    if message is not None:
        assert body["message"] == message
    return str(body["message"])


def test_register_read_and_look_up(shared_registry: RegistryProcess, subject: str) -> None:
    reg = shared_registry
    first = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V1})
    assert (first.status_code, first.json()) == (200, {"id": first.json()["id"]})
    schema_id = first.json()["id"]
    spaced = json.dumps(json.loads(V1), indent=2)
    assert call(reg, "POST", f"/subjects/{subject}/versions", {"schema": spaced}).json() == {"id": schema_id}
    assert call(reg, "GET", f"/subjects/{subject}/versions").json() == [1]
    expected = {"subject": subject, "version": 1, "id": schema_id, "schema": CANONICAL_V1}
    assert call(reg, "GET", f"/subjects/{subject}/versions/1").json() == expected
    assert call(reg, "GET", f"/subjects/{subject}/versions/latest").json() == expected
    assert call(reg, "GET", f"/subjects/{subject}/versions/1/schema").json() == json.loads(CANONICAL_V1)
    assert call(reg, "POST", f"/subjects/{subject}", {"schema": spaced}).json() == expected
    assert call(reg, "GET", f"/schemas/ids/{schema_id}").json() == {"schema": CANONICAL_V1}
    assert call(reg, "GET", f"/schemas/ids/{schema_id}/schema").json() == json.loads(CANONICAL_V1)
    assert call(reg, "GET", f"/schemas/ids/{schema_id}/versions").json() == [
        {"subject": subject, "version": 1}
    ]
    assert subject in call(reg, "GET", f"/schemas/ids/{schema_id}/subjects").json()
    assert subject in call(reg, "GET", "/subjects").json()
    assert call(reg, "GET", "/subjects", params={"subjectPrefix": subject}).json() == [subject]
    assert call(reg, "GET", "/schemas/types").json() == ["AVRO"]
    assert call(reg, "GET", "/").json() == {}


@pytest.mark.parametrize(
    "content_type",
    [MEDIA, "application/vnd.schemaregistry+json", "application/json", "application/json; charset=utf-8"],
)
def test_accepted_request_content_types(
    shared_registry: RegistryProcess, subject: str, content_type: str
) -> None:
    response = call(shared_registry, "POST", f"/subjects/{subject}/versions", {"schema": V1}, content_type)
    assert response.status_code == 200
    assert isinstance(response.json()["id"], int)


def test_other_content_types_are_refused(shared_registry: RegistryProcess, subject: str) -> None:
    response = call(shared_registry, "POST", f"/subjects/{subject}/versions", {"schema": V1}, "text/plain")
    message = expect_error(response, 415, 415)
    assert message.startswith("Unsupported content type 'text/plain': send one of application/json")


def test_not_found_errors(shared_registry: RegistryProcess, subject: str) -> None:
    reg = shared_registry
    expect_error(
        call(reg, "GET", f"/subjects/{subject}/versions"), 404, 40401, f"Subject '{subject}' not found."
    )
    expect_error(call(reg, "GET", f"/subjects/{subject}/versions/1"), 404, 40401)
    call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V1})
    expect_error(call(reg, "GET", f"/subjects/{subject}/versions/9"), 404, 40402, "Version 9 not found.")
    expect_error(call(reg, "POST", f"/subjects/{subject}", {"schema": V2}), 404, 40403, "Schema not found")
    expect_error(call(reg, "GET", "/schemas/ids/987654"), 404, 40403, "Schema 987654 not found")
    expect_error(call(reg, "GET", "/schemas/ids/0"), 404, 40403, "Schema 0 not found")
    expect_error(call(reg, "GET", "/no/such/route"), 404, 404, "HTTP 404 Not Found")
    expect_error(call(reg, "PATCH", "/subjects"), 405, 405, "HTTP 405 Method Not Allowed")


def test_invalid_input_errors(shared_registry: RegistryProcess, subject: str) -> None:
    reg = shared_registry
    invalid = {"schema": '{"type": "record", "name": "R", "fields": [{"name": "x"}]}'}
    expect_error(
        call(reg, "POST", f"/subjects/{subject}/versions", invalid),
        422,
        42201,
        "Invalid schema: at R.fields[0] 'x': a field needs a 'type'",
    )
    expect_error(call(reg, "POST", f"/subjects/{subject}/versions", {"schema": "{"}), 422, 42201)
    expect_error(
        call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V1, "schemaType": "PROTOBUF"}),
        422,
        42201,
    )
    expect_error(
        call(reg, "GET", f"/subjects/{subject}/versions/zero"),
        422,
        42202,
        "The specified version 'zero' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )
    missing = expect_error(call(reg, "POST", f"/subjects/{subject}/versions", {"scheme": V1}), 422, 422)
    assert missing == "Unprocessable request: body.schema: Field required"
    expect_error(call(reg, "POST", f"/subjects/{subject}/versions", {"schema": 5}), 422, 422)
    bad_json = httpx.post(
        f"{reg.url}/subjects/{subject}/versions",
        content=b"{nope",
        headers={"Content-Type": MEDIA},
        timeout=30,
    )
    assert expect_error(bad_json, 400, 400).startswith("The request body is not valid JSON")
    expect_error(call(reg, "GET", "/schemas/ids/abc"), 422, 422)
    expect_error(call(reg, "GET", "/subjects/a%01b/versions"), 422, 42208)
    expect_error(call(reg, "PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}), 422, 42203)


def test_incompatible_schema_is_409_naming_the_rule(shared_registry: RegistryProcess, subject: str) -> None:
    reg = shared_registry
    call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V1})
    breaking = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "id", "type": "int"}]})
    message = expect_error(call(reg, "POST", f"/subjects/{subject}/versions", {"schema": breaking}), 409, 409)
    assert message == (
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}" '
        "(compatibility level BACKWARD), details: BACKWARD: the new schema cannot read data written with "
        "version 1: field 'Event.id': writer type string cannot be promoted to reader type int"
    )
    path = f"/compatibility/subjects/{subject}/versions/latest"
    assert call(reg, "POST", path, {"schema": breaking}).json() == {"is_compatible": False}
    verbose = call(reg, "POST", path, {"schema": breaking}, params={"verbose": "true"}).json()
    assert verbose["is_compatible"] is False
    assert verbose["messages"] == [message.split("details: ", 1)[1]]
    assert call(reg, "POST", path, {"schema": V2}, params={"verbose": "true"}).json() == {
        "is_compatible": True,
        "messages": [],
    }
    every = f"/compatibility/subjects/{subject}/versions"
    assert call(reg, "POST", every, {"schema": breaking}).json() == {"is_compatible": False}
    assert call(reg, "GET", f"/subjects/{subject}/versions").json() == [1]  # the tests registered nothing


def test_soft_and_hard_deletes(shared_registry: RegistryProcess, subject: str) -> None:
    reg = shared_registry
    call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V1})
    call(reg, "POST", f"/subjects/{subject}/versions", {"schema": V2})
    base = f"/subjects/{subject}"
    expect_error(
        call(reg, "DELETE", f"{base}/versions/2", params={"permanent": "true"}),
        404,
        40407,
        f"Subject '{subject}' Version 2 was not deleted first before being permanently deleted",
    )
    assert call(reg, "DELETE", f"{base}/versions/2").json() == 2
    expect_error(call(reg, "DELETE", f"{base}/versions/2"), 404, 40406)
    assert call(reg, "GET", f"{base}/versions").json() == [1]
    assert call(reg, "GET", f"{base}/versions", params={"deleted": "true"}).json() == [1, 2]
    expect_error(call(reg, "GET", f"{base}/versions/2"), 404, 40402)
    assert call(reg, "GET", f"{base}/versions/2", params={"deleted": "true"}).json()["version"] == 2
    assert call(reg, "DELETE", f"{base}/versions/2", params={"permanent": "true"}).json() == 2
    expect_error(call(reg, "DELETE", base, params={"permanent": "true"}), 404, 40405)
    assert call(reg, "DELETE", base).json() == [1]
    expect_error(
        call(reg, "DELETE", base),
        404,
        40404,
        f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
    )
    assert subject not in call(reg, "GET", "/subjects").json()
    assert subject in call(reg, "GET", "/subjects", params={"deleted": "true"}).json()
    assert call(reg, "DELETE", base, params={"permanent": "true"}).json() == [1]
    expect_error(call(reg, "DELETE", base), 404, 40401)


def test_config_routes(registry: RegistryProcess) -> None:
    reg = registry
    assert call(reg, "GET", "/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert call(reg, "PUT", "/config", {"compatibility": "full"}).json() == {"compatibility": "FULL"}
    assert call(reg, "GET", "/config").json() == {"compatibilityLevel": "FULL"}
    expect_error(
        call(reg, "GET", "/config/s"),
        404,
        40408,
        "Subject 's' does not have subject-level compatibility configured",
    )
    assert call(reg, "GET", "/config/s", params={"defaultToGlobal": "true"}).json() == {
        "compatibilityLevel": "FULL"
    }
    assert call(reg, "PUT", "/config/s", {"compatibility": "NONE"}).json() == {"compatibility": "NONE"}
    assert call(reg, "GET", "/config/s").json() == {"compatibilityLevel": "NONE"}
    breaking = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "id", "type": "int"}]})
    call(reg, "POST", "/subjects/s/versions", {"schema": V1})
    assert call(reg, "POST", "/subjects/s/versions", {"schema": breaking}).status_code == 200
    assert call(reg, "DELETE", "/config/s").json() == {"compatibilityLevel": "NONE"}
    expect_error(call(reg, "DELETE", "/config/s"), 404, 40408)
    expect_error(call(reg, "PUT", "/config", {"compatibility": "LOOSE"}), 422, 42203)
    expect_error(call(reg, "PUT", "/config", {"level": "NONE"}), 422, 422)


def test_openapi_description(shared_registry: RegistryProcess) -> None:
    response = httpx.get(f"{shared_registry.url}/openapi.json", timeout=30)
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert set(paths) == {
        "/",
        "/schemas/types",
        "/schemas/ids/{id}",
        "/schemas/ids/{id}/schema",
        "/schemas/ids/{id}/subjects",
        "/schemas/ids/{id}/versions",
        "/subjects",
        "/subjects/{subject}/versions",
        "/subjects/{subject}/versions/{version}",
        "/subjects/{subject}/versions/{version}/schema",
        "/subjects/{subject}",
        "/compatibility/subjects/{subject}/versions/{version}",
        "/compatibility/subjects/{subject}/versions",
        "/config",
        "/config/{subject}",
    }
    assert set(paths["/subjects/{subject}"]) == {"post", "delete"}
    assert set(paths["/config/{subject}"]) == {"get", "put", "delete"}


@pytest.mark.parametrize("depth", [90, 150, 200])
def test_a_deeply_nested_schema_that_is_accepted_is_served(
    shared_registry: RegistryProcess, subject: str, depth: int
) -> None:
    reg = shared_registry
    text = nested_record(depth)
    registered = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": text})
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    by_id = call(reg, "GET", f"/schemas/ids/{schema_id}/schema")
    assert by_id.status_code == 200, by_id.text
    assert by_id.json() == json.loads(text)
    assert json.loads(call(reg, "GET", f"/schemas/ids/{schema_id}").json()["schema"]) == json.loads(text)
    version = call(reg, "GET", f"/subjects/{subject}/versions/1/schema")
    assert version.status_code == 200, version.text
    assert version.json() == json.loads(text)
    assert call(reg, "GET", f"/subjects/{subject}/versions/latest").json()["id"] == schema_id
    looked_up = call(reg, "POST", f"/subjects/{subject}", {"schema": text})
    assert (looked_up.status_code, looked_up.json()["id"]) == (200, schema_id)
    # a compatible change at the bottom is checked through every level, and registered
    evolved = nested_record(depth, extra_field=True)
    tested = call(reg, "POST", f"/compatibility/subjects/{subject}/versions/latest", {"schema": evolved})
    assert (tested.status_code, tested.json()) == (200, {"is_compatible": True}), tested.text
    second = call(reg, "POST", f"/subjects/{subject}/versions", {"schema": evolved})
    assert second.status_code == 200, second.text
    assert call(reg, "GET", f"/subjects/{subject}/versions/2/schema").json() == json.loads(evolved)


def test_a_schema_deeper_than_the_limit_is_refused_naming_it(
    shared_registry: RegistryProcess, subject: str
) -> None:
    response = call(shared_registry, "POST", f"/subjects/{subject}/versions", {"schema": nested_record(201)})
    message = expect_error(response, 422, 42201)
    assert "nested more than 200 levels deep" in message, message
