from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lumber import __version__
from lumber.cli import build_parser, verbosity


def run_lumber(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", *args], capture_output=True, text=True, timeout=120
    )


def test_version() -> None:
    result = run_lumber("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"lumber {__version__}"


def test_help_lists_groups() -> None:
    result = run_lumber("--help")
    assert result.returncode == 0
    for group in ("dev", "config"):
        assert f"\n    {group} " in result.stdout


def test_config_error_exit_code_and_message(tmp_path: Path) -> None:
    bad = tmp_path / "lumber.toml"
    bad.write_text("[dev]\nzookeeper_port = -1\n")
    result = run_lumber("--config", str(bad), "config", "show")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"lumber: config error: {bad}: key 'dev.zookeeper_port' must be at least 1, got -1"
    )


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        (["topics", "list"], logging.WARNING),  # a command: warnings and errors only
        (["-v", "topics", "list"], logging.INFO),
        (["topics", "list", "-v"], logging.INFO),  # after the command too
        (["topics", "list", "-vv"], logging.DEBUG),
        (["--log-level", "error", "topics", "list"], logging.ERROR),
        (["-v", "topics", "list", "--log-level", "CRITICAL"], logging.CRITICAL),
        (["topics", "list", "--debug"], logging.DEBUG),
        (["broker", "start"], logging.INFO),  # servers keep INFO
        (["schemas", "serve"], logging.INFO),
        (["mirror", "--source-zookeeper", "a", "--target-zookeeper", "b", "--topics", "t"], logging.INFO),
        (["broker", "start", "--log-level", "WARNING"], logging.WARNING),
    ],
)
def test_commands_are_quiet_and_servers_log_info(argv: list[str], level: int) -> None:
    assert verbosity.level_of(build_parser().parse_args(argv)) == level


def test_a_bad_log_level_is_a_usage_error() -> None:
    result = run_lumber("topics", "list", "--log-level", "loud")
    assert result.returncode == 2
    assert "argument --log-level: invalid choice: 'LOUD'" in result.stderr


def test_make_help_lists_every_target_the_readme_names() -> None:
    root = Path(__file__).resolve().parents[3]
    named = set(re.findall(r"`make ([a-z]+)", (root / "README.md").read_text()))
    assert {"venv", "pytest", "bench", "lint", "typecheck", "demo", "test", "clean"} <= named
    shown = subprocess.run(["make", "-s", "help"], cwd=root, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    listed = {line.split()[1] for line in shown.stdout.splitlines() if line.startswith("make ")}
    assert named - {"help"} <= listed, named - listed


def closed_reader(*args: str) -> subprocess.CompletedProcess[str]:
    """``lumber ARGS | head -0``: the reader of stdout is gone before the command writes its first line."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "lumber", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.zookeeper
def test_a_closed_pipe_ends_consume_and_describe_quietly(broker_cluster: Any) -> None:
    broker_cluster.create_topic("page_view", 3)
    server = broker_cluster.bootstrap_servers
    produced = run_lumber_with_input(
        "\n".join(str(n) for n in range(2000)), "produce", "page_view", "--bootstrap-server", server
    )
    assert produced.returncode == 0, produced.stderr
    consumed = closed_reader("consume", "page_view", "--from-beginning", "--bootstrap-server", server)
    assert (consumed.returncode, consumed.stderr) == (0, "")
    described = closed_reader("topics", "describe", "page_view", "--zookeeper", broker_cluster.zk_connect)
    assert (described.returncode, described.stderr) == (0, "")


def run_lumber_with_input(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["topcis", "list"], "argument COMMAND: invalid choice: 'topcis' (did you mean 'topics'?)"),
        (["topics", "lsit"], "argument ACTION: invalid choice: 'lsit' (did you mean 'list'?)"),
        (
            ["consume", "page_view", "--form-beginning"],
            "unrecognized arguments: --form-beginning (did you mean --from-beginning?)",
        ),
        (
            ["groups", "lag", "--al-groups", "--kind", "kafak"],
            "argument --kind: invalid choice: 'kafak' (did you mean 'kafka'?)",
        ),
    ],
)
def test_a_mistyped_command_or_flag_is_a_usage_error_with_a_suggestion(argv: list[str], hint: str) -> None:
    result = run_lumber(*argv)
    assert result.returncode == 2
    assert result.stdout == ""
    assert hint in result.stderr.splitlines()[-1]
