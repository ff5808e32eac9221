from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from broker.log.topic_partition import TopicPartition
from pipeline.cli import main
from pipeline.commit import CommitProtocol, Manifest, RunRecord
from pipeline.fs import open_filesystem


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
    command = capsys.readouterr().out.split()
    assert command[1:3] == ["--master", "local[2]"]
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


def test_status_reads_the_manifests_without_a_jvm(tmp_path: Path) -> None:
    """``etl status`` of a job with a committed manifest and a last run, in a fresh interpreter: neither
    pyspark nor py4j is imported (so no JVM can start), and nothing of Spark's is logged."""
    config = write_config(tmp_path)
    protocol = CommitProtocol(open_filesystem(str(tmp_path / "warehouse")), "hourly")
    protocol.start_run(RunRecord("r1", "hourly", "running", 1_795_338_000_000))
    protocol.persist_plan("r1", {"run_id": "r1", "base_sequence": 0})
    offsets = {TopicPartition("page_view", 0): 42}
    staging = protocol.layout.staging_rel("r1")
    protocol.commit(Manifest("hourly", 1, "r1", 1_795_338_060_000, 600_000, offsets, staging=staging))
    protocol.write_run(
        RunRecord("r1", "hourly", "committed", 1_795_338_000_000, 1_795_338_061_000, 1, rows=42)
    )
    probe = (
        "import sys\n"
        "from pipeline.cli import main\n"
        f"code = main(['--config', {str(config)!r}, 'etl', 'status', '--json'])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr
    assert "spark" not in done.stderr.lower()
    status = json.loads(done.stdout)
    assert status["manifest"] == 1
    assert [(p["topic"], p["partition"], p["committed_offset"]) for p in status["partitions"]] == [
        ("page_view", 0, 42)
    ]
    assert (status["last_run"]["run_id"], status["last_run"]["outcome"], status["last_run"]["rows"]) == (
        "r1",
        "committed",
        42,
    )
