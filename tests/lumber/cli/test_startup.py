"""The parser imports no heavy package: ``lumber --version`` and ``--help`` load no command module, and each
command's parser loads none of :data:`lumber.cli.HEAVY_MODULES` (the rules in :mod:`lumber.cli`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lumber.cli import COMMANDS, HEAVY_MODULES, build_parser


def loaded_after(code: str) -> list[str]:
    """The modules ``sys.modules`` holds after ``code`` ran in a fresh interpreter."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY_MODULES)]


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_import_no_command(argv: list[str]) -> None:
    # -X importtime names every module the real `lumber` process imports, in the order it does.
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lumber", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    imported = [line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line]
    assert "lumber.cli" in imported
    for command in COMMANDS:
        assert command.module not in imported
    libraries = ("broker", "pipeline", "schemas", "audit", "mirror", "kazoo", "pydantic", "numpy", "httpx")
    assert [name for name in imported if name.split(".")[0] in libraries] == []


def test_help_lists_every_command_with_its_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lumber", "--help"], capture_output=True, text=True, timeout=60
    )
    listed = " ".join(result.stdout.split())  # argparse wraps the help lines
    for command in COMMANDS:
        assert f"{command.name} {command.help}" in listed


@pytest.mark.parametrize("command", [command.name for command in COMMANDS])
def test_command_parser_imports_no_heavy_package(command: str) -> None:
    loaded = loaded_after(f"from lumber.cli import build_parser\nbuild_parser([{command!r}, '--help'])")
    assert heavy(loaded) == []


def test_full_parser_imports_no_heavy_package() -> None:
    assert heavy(loaded_after("from lumber.cli import build_parser\nbuild_parser()")) == []


def test_each_module_registers_the_command_of_its_line() -> None:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "==SUPPRESS==" and a.choices)
    lines = {action.dest: action.help for action in subparsers._choices_actions}  # type: ignore[attr-defined]
    assert lines == {command.name: command.help for command in COMMANDS}
