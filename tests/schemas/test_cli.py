"""``lumber schemas register|get|check|list`` (lumber/cli/schemas.py) against a real registry process.

``lumber schemas serve`` itself is what every registry process of these tests runs (see conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lumber.dev.process import free_port
from schemas.shipped import shipped_schema
from tests.schemas.conftest import RegistryProcess

AVRO_DIR = Path(__file__).resolve().parents[2] / "schemas" / "avro"


def lumber(registry: RegistryProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(registry.config_path), "schemas", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_register_get_list(registry: RegistryProcess) -> None:
    empty = lumber(registry, "list")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "no subjects\n", "")
    first = lumber(registry, "register", "page_view-value", str(AVRO_DIR / "page_view.avsc"))
    assert first.returncode == 0, first.stderr
    assert (
        first.stdout
        == f"{AVRO_DIR / 'page_view.avsc'} is version 1 of subject 'page_view-value', schema id 1\n"
    )
    second = lumber(registry, "register", "page_view-value", str(AVRO_DIR / "page_view_v2.avsc"), "--json")
    assert json.loads(second.stdout) == {"subject": "page_view-value", "version": 2, "id": 2}
    again = lumber(registry, "register", "page_view-value", str(AVRO_DIR / "page_view_v2.avsc"), "--json")
    assert json.loads(again.stdout) == {"subject": "page_view-value", "version": 2, "id": 2}

    got = lumber(registry, "get", "page_view-value", "--version", "1", "--json")
    assert json.loads(got.stdout) == {
        "subject": "page_view-value",
        "version": 1,
        "id": 1,
        "schema": shipped_schema("page_view").canonical,
    }
    latest = lumber(registry, "get", "page_view-value")
    assert latest.stdout.startswith("subject 'page_view-value' version 2, schema id 2:\n{\n")
    assert json.loads(latest.stdout.split("\n", 1)[1]) == shipped_schema("page_view_v2").to_json()

    lumber(registry, "register", "click-value", str(AVRO_DIR / "click.avsc"))
    listed = lumber(registry, "list")
    assert (listed.stdout, listed.stderr) == ("click-value\npage_view-value\n", "")
    assert json.loads(lumber(registry, "list", "--json").stdout) == ["click-value", "page_view-value"]


def test_check(registry: RegistryProcess, tmp_path: Path) -> None:
    lumber(registry, "register", "pv", str(AVRO_DIR / "page_view.avsc"))
    ok = lumber(registry, "check", "pv", str(AVRO_DIR / "page_view_v2.avsc"))
    assert (ok.returncode, ok.stdout) == (
        0,
        f"{AVRO_DIR / 'page_view_v2.avsc'} is compatible with subject 'pv' (BACKWARD)\n",
    )
    broken = json.loads((AVRO_DIR / "page_view.avsc").read_text())
    broken["fields"][1]["type"] = "string"  # timestamp_ms: long -> string
    path = tmp_path / "broken.avsc"
    path.write_text(json.dumps(broken))
    bad = lumber(registry, "check", "pv", str(path))
    assert bad.returncode == 1
    assert bad.stdout == (
        f"{path} is NOT compatible with subject 'pv' (BACKWARD):\n"
        "  - BACKWARD: the new schema cannot read data written with version 1: "
        "field 'PageView.timestamp_ms': writer type long cannot be promoted to reader type string\n"
    )
    as_json = json.loads(lumber(registry, "check", "pv", str(path), "--json").stdout)
    assert as_json["is_compatible"] is False
    assert as_json["level"] == "BACKWARD"
    assert lumber(registry, "get", "pv", "--json").returncode == 0  # check registered nothing
    assert json.loads(lumber(registry, "get", "pv", "--json").stdout)["version"] == 1


def test_errors(registry: RegistryProcess, tmp_path: Path) -> None:
    missing = lumber(registry, "get", "nope")
    assert (missing.returncode, missing.stderr.strip()) == (1, "lumber: error: Subject 'nope' not found.")
    no_file = lumber(registry, "register", "s", str(tmp_path / "absent.avsc"))
    assert no_file.returncode == 1
    assert (
        f"lumber: error: {tmp_path / 'absent.avsc'}: cannot read the schema file: No such file"
        in no_file.stderr
    )
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "record", "name": "R"}')
    invalid = lumber(registry, "register", "s", str(bad))
    assert invalid.returncode == 1
    assert "lumber: error: Invalid schema: at R: a record needs a 'fields' array, got None" in invalid.stderr
    dead = f"http://127.0.0.1:{free_port()}"
    down = lumber(registry, "list", "--url", dead)
    assert down.returncode == 1
    assert f"lumber: error: cannot reach the schema registry at {dead}" in down.stderr
