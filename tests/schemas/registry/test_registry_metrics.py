"""``GET /metrics`` of a real registry process (schemas/registry/registry_metrics.py), scraped and parsed with
prometheus_client's parser after a known workload: every counter exact."""

from __future__ import annotations

import json

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.schemas.conftest import RegistryProcess

V1 = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "a", "type": "int"}]})
#: BACKWARD refuses it: a new reader field without a default cannot read v1 data
INCOMPATIBLE = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}],
    }
)
V2 = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
    }
)


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{url}/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    found = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def requests(method: str, endpoint: str, status: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = (("endpoint", endpoint), ("method", method), ("status", str(status)))
    return ("schema_registry_requests_total", labels)


def test_metrics_count_requests_registrations_and_refusals(registry: RegistryProcess) -> None:
    url = registry.url
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/subjects/ev-value/versions", json={"schema": V1}).json() == {"id": 1}
        assert client.post("/subjects/ev-value/versions", json={"schema": V1}).json() == {"id": 1}  # again
        assert client.post("/subjects/other-value/versions", json={"schema": V1}).json() == {"id": 1}
        assert client.post("/subjects/ev-value/versions", json={"schema": INCOMPATIBLE}).status_code == 409
        assert client.post("/subjects/ev-value/versions", json={"schema": V2}).json() == {"id": 2}
        assert client.get("/subjects").status_code == 200
        assert client.get("/subjects/nope/versions").status_code == 404
        assert client.get("/no/such/route").status_code == 404
    found = scrape(url)
    assert found[("schema_registry_registrations_total", ())] == 3  # ev v1, other v1, ev v2
    assert found[("schema_registry_compatibility_refusals_total", ())] == 1
    assert found[requests("POST", "/subjects/{subject}/versions", 200)] == 4
    assert found[requests("POST", "/subjects/{subject}/versions", 409)] == 1
    assert found[requests("GET", "/subjects", 200)] == 1
    assert found[requests("GET", "/subjects/{subject}/versions", 404)] == 1
    assert found[requests("GET", "other", 404)] == 1
    post = (("endpoint", "/subjects/{subject}/versions"), ("method", "POST"))
    assert found[("schema_registry_request_duration_seconds_count", post)] == 5
    # the launcher's readiness probes (GET /) are counted too, and nothing else
    counted = {key for key, value in found.items() if key[0] == "schema_registry_requests_total" and value}
    assert counted - {requests("GET", "/", 200)} == {
        requests("POST", "/subjects/{subject}/versions", 200),
        requests("POST", "/subjects/{subject}/versions", 409),
        requests("GET", "/subjects", 200),
        requests("GET", "/subjects/{subject}/versions", 404),
        requests("GET", "other", 404),
    }
    # /metrics itself is counted from the second scrape on, and stays out of the OpenAPI description
    assert scrape(url)[requests("GET", "/metrics", 200)] == 1
    assert "/metrics" not in httpx.get(f"{url}/openapi.json", timeout=10).json()["paths"]
