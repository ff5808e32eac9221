"""``broker.protocol``'s API (:data:`broker.protocol.__all__`): each name is its module's object, imported on
first use, so that importing one light module of the package declares no message."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import broker.protocol as protocol


def test_every_name_is_the_object_of_its_module() -> None:
    assert sorted(protocol._MODULE_OF) == sorted(protocol.__all__)
    for name in protocol.__all__:
        module = importlib.import_module(f"broker.protocol.{protocol._MODULE_OF[name]}")
        assert getattr(protocol, name) is getattr(module, name), name


def test_a_submodule_is_imported_by_name() -> None:
    from broker.protocol import compiler, primitives  # noqa: PLC0415

    assert compiler.__name__ == "broker.protocol.compiler"
    assert primitives.__name__ == "broker.protocol.primitives"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError) as raised:
        _ = protocol.Produce  # type: ignore[attr-defined]
    assert str(raised.value) == "module 'broker.protocol' has no attribute 'Produce'"


def test_the_error_codes_alone_declare_no_message() -> None:
    script = "import json, sys\nimport broker.protocol.error_code\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(result.stdout)
    assert "broker.protocol.error_code" in loaded
    assert [name for name in loaded if name.startswith("broker.protocol.")] == ["broker.protocol.error_code"]
