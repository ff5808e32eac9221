"""The registry's OpenAPI document is true (schemas/registry/openapi_document.py, issue 40): schemathesis,
with every check it has (``--checks all``: server errors, undocumented status codes, response schemas,
schema-valid requests accepted, schema-invalid ones refused, ``Allow`` on 405, ...), finds no difference
between what the document says and what a real registry process answers. Bounded: a fixed number of
examples per operation and a fixed seed; what the document cannot express is listed, with why, in
``schemathesis.toml`` beside this file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from schemas.registry.openapi_document import SUBJECT_PATTERN, VERSION_PATTERN
from tests.schemas.conftest import RegistryProcess

CONFIG = Path(__file__).with_name("schemathesis.toml")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_schemathesis_finds_no_difference(shared_registry: RegistryProcess, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "run",
            f"{shared_registry.url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "15",
            "--seed",
            "40",
            "--generation-database",
            "none",
            "--workers",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert "Tested: 21" in run.stdout


def test_the_document_states_the_servers_rules(shared_registry: RegistryProcess) -> None:
    document = httpx.get(f"{shared_registry.url}/openapi.json", timeout=30).json()
    parameters = {
        (path, p["name"]): p["schema"]
        for path, operations in document["paths"].items()
        for operation in operations.values()
        for p in operation.get("parameters", ())
        if p["in"] == "path"
    }
    assert parameters[("/subjects/{subject}/versions/{version}", "version")]["pattern"] == VERSION_PATTERN
    assert parameters[("/config/{subject}", "subject")]["pattern"] == SUBJECT_PATTERN
    assert sorted(document["components"]["schemas"]["ErrorBody"]["properties"]) == ["error_code", "message"]
    # a 405 names every method of the path, as the document lists them
    answer = httpx.request("OPTIONS", f"{shared_registry.url}/config/page_view-value", timeout=30)
    assert (answer.status_code, answer.headers["allow"]) == (405, "DELETE, GET, PUT")
    # the server refuses what the patterns exclude, with Confluent's codes
    bad_version = httpx.get(f"{shared_registry.url}/subjects/x/versions/2147483648", timeout=30)
    assert (bad_version.status_code, bad_version.json()["error_code"]) == (422, 42202)
    bad_level = httpx.put(f"{shared_registry.url}/config", json={"compatibility": "SOMETIMES"}, timeout=30)
    assert (bad_level.status_code, bad_level.json()["error_code"]) == (422, 42203)
