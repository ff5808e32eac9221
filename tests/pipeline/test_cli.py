from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline import __version__


def run_lumber(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], capture_output=True, text=True, timeout=120
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
