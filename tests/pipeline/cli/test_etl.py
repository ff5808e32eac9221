from __future__ import annotations

import json
import os
import shlex
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.cli import main


def write_config(tmp_path: Path, zk_connect: str = "127.0.0.1:1") -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(
        f'[zookeeper]\nconnect = "{zk_connect}"\n\n[dev]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[load]\nwarehouse_url = "{tmp_path / "warehouse"}"\nspark_master = "local[2]"\n'
    )
    return path


def test_package_and_print_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    assert main(["--config", str(config), "etl", "package", "--output", str(tmp_path / "z.zip")]) == 0
    assert "pipeline/commit.py" in zipfile.ZipFile(tmp_path / "z.zip").namelist()
    capsys.readouterr()
    assert (
        main(["--config", str(config), "etl", "run", "--print-command", "--until-hour", "2026-11-22T10"]) == 0
    )
    command = shlex.split(capsys.readouterr().out)
    # the variables Lumber sets come first, as a shell would run them: Spark on loopback for a local master
    assert command[:3] == [
        f"PYSPARK_DRIVER_PYTHON={sys.executable}",
        f"PYSPARK_PYTHON={sys.executable}",
        f"SPARK_LOCAL_IP={os.environ.get('SPARK_LOCAL_IP') or '127.0.0.1'}",
    ]
    assert command[4:6] == ["--master", "local[2]"]
    assert command[-2:] == ["--until-hour", "2026-11-22T10"]
    effective = tmp_path / "state" / "etl" / "hourly.toml"
    assert command[command.index("--config") + 1] == str(effective)
    assert f'warehouse_url = "{tmp_path / "warehouse"}"' in effective.read_text()


def test_status_of_a_job_that_never_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    assert main(["--config", str(config), "etl", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["job"] == "hourly"
    assert status["manifest"] is None
    assert status["partitions"] == []
    assert status["last_run"] is None
    assert status["warehouse"] == f"file:{tmp_path / 'warehouse'}"
