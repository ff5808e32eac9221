"""The parser imports no heavy package: ``lumber --version`` and ``--help`` load no command module, and each
command's parser loads none of :data:`lumber.cli.HEAVY_MODULES` (the rules in :mod:`lumber.cli`). Reading the
config and ``lumber topics list`` load none of :data:`CONFIG_PATH_EXCLUDED` either: the config's sections
live in the packages they configure, whose ``__init__`` imports nothing, so reading ``[consumer]`` does not
load the consumer (``bench/cli_startup.py`` times the commands; BENCHMARKS.md has the figures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zk_paths import broker_path, encode_broker
from lumber.cli import COMMANDS, HEAVY_MODULES, build_parser

#: What reading the config and listing the topics never need, beside :data:`HEAVY_MODULES`: the clients'
#: connections, producer, consumer and groups; the protocol's message declarations and codecs; the broker's
#: socket server; the web servers' TLS and Basic authentication; the record batch codec (crc32c); the numeric
#: and HTTP libraries. Together they cost about 0.2 s, which ``lumber topics list`` paid before each config
#: section was read without its package.
CONFIG_PATH_EXCLUDED = (
    *HEAVY_MODULES,
    "broker.client.network",
    "broker.client.metadata",
    "broker.client.producer.producer",
    "broker.client.consumer.consumer",
    "broker.client.consumer.fetcher",
    "broker.client.groups.group_consumer",
    "broker.protocol.apis",
    "broker.protocol.codec",
    "broker.protocol.messages",
    "broker.network.socket_server",
    "broker.network.sasl_client",
    "broker.web.web_security",
    "broker.record.record_batch",
    "crc32c",
    "numpy",
    "httpx",
)


def loaded_after(code: str) -> list[str]:
    """The modules ``sys.modules`` holds after ``code`` ran in a fresh interpreter."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def heavy(modules: list[str], excluded: tuple[str, ...] = HEAVY_MODULES) -> list[str]:
    return [name for name in modules if any(name == h or name.startswith(h + ".") for h in excluded)]


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
    libraries = ("broker", "pipeline", "schemas", "audit", "mirror", "kazoo", "pydantic", "numpy", "httpx")
    assert [name for name in imported if name.split(".")[0] in libraries] == []
    # importtime does not name the module importlib.import_module itself imports (a command's): sys.modules
    run = f"from lumber.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    loaded = loaded_after(run)
    assert "lumber.cli" in loaded
    assert [command.module for command in COMMANDS if command.module in loaded] == []


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


def test_reading_the_config_loads_no_client_machinery() -> None:
    # every section built, as every command does before its handler runs
    loaded = loaded_after("from lumber.config import config_from_mapping\nconfig_from_mapping({})")
    assert "broker.client.consumer.consumer_config" in loaded  # the walk sees the sections' modules
    assert heavy(loaded, CONFIG_PATH_EXCLUDED) == []


def test_topics_list_loads_no_client_machinery(tmp_path: Path, zk_connect: str, zk: Any) -> None:
    zk.create(
        broker_path(0), encode_broker("127.0.0.1", 9092, 1_700_000_000_000), ephemeral=True, makepath=True
    )
    TopicAdmin(zk).create_topic("page_view", 2)
    config = tmp_path / "lumber.toml"
    config.write_text(f'[zookeeper]\nconnect = "{zk_connect}"\n', encoding="utf-8")
    # -X importtime names every module the real `lumber` process imports, the handler's too
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lumber", "--config", str(config), "topics", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "page_view\n")
    imported = [line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line]
    # (importlib.import_module's own module is not named: lumber.cli.topics is seen by what it imports)
    handler = {"lumber.cli.zookeeper_session", "lumber.config", "broker.cluster.topic_admin", "kazoo.client"}
    assert handler <= set(imported)
    assert heavy(imported, CONFIG_PATH_EXCLUDED) == []
