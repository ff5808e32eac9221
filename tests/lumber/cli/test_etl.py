from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from broker.record.topic_partition import TopicPartition
from lumber.cli import main
from pipeline.commit import CommitProtocol
from pipeline.fs import open_filesystem
from pipeline.manifest import Manifest
from pipeline.run_record import RunRecord
from tests.support.broker_cluster import servers


def write_config(tmp_path: Path, zk_connect: str = "127.0.0.1:1") -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(
        f'[zookeeper]\nconnect = "{zk_connect}"\n\n[dev]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[load]\nwarehouse_url = "{tmp_path / "warehouse"}"\n\n[spark]\nmaster = "local[2]"\n'
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


def launch_detector(tmp_path: Path) -> tuple[Path, Path]:
    """A ``[spark] submit`` that records that it was launched (and exits 1): (the script, its mark)."""
    mark = tmp_path / "spark-submit-was-launched"
    script = tmp_path / "spark-submit"
    script.write_text(f'#!/bin/sh\necho "$@" > {shlex.quote(str(mark))}\nexit 1\n')
    script.chmod(0o755)
    return script, mark


def etl_run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "etl", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_bad_arguments_fail_before_spark_submit_is_launched(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    script, mark = launch_detector(tmp_path)
    with config.open("a") as toml:
        toml.write(f'submit = "{script}"\n')
    cases = {
        (
            "--until-hour",
            "garbage",
        ): "lumber etl run: --until-hour 'garbage': expected an hour as YYYY-MM-DDTHH "
        "(UTC), e.g. 2026-11-22T10; nothing was started\n",
        (
            "--master",
            "lokal[2]",
        ): "lumber etl run: --master 'lokal[2]' is not a Spark master: expected local, "
        "local[N], local[N,F], local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://URL or mesos://URL; "
        "nothing was started\n",
        ("--conf", "spark.executor.memory"): "lumber etl run: --conf 'spark.executor.memory': expected "
        "KEY=VALUE, e.g. spark.executor.memory=2g; nothing was started\n",
        ("--topics", " , "): "lumber etl run: --topics ' , ' names no topic; nothing was started\n",
    }
    for args, message in cases.items():
        done = etl_run(config, *args)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", message)
        assert not mark.exists(), args
    # the detector works: good arguments launch it (and its exit 1 is the run's)
    done = etl_run(config, "--until-hour", "2026-11-22T10", "--conf", "spark.executor.memory=2g")
    assert done.returncode == 1, done.stdout + done.stderr
    assert mark.read_text().split()[-2:] == ["--until-hour", "2026-11-22T10"]


def test_unknown_or_excluded_topics_fail_before_spark_submit_is_launched(
    tmp_path: Path, broker_cluster: Any
) -> None:
    topic = f"etl_topics_{uuid.uuid4().hex[:8]}"
    broker_cluster.create_topic(topic, 1)
    script, mark = launch_detector(tmp_path)
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n\n'
        f'[dev]\nstate_dir = "{tmp_path / "state"}"\n\n'
        f'[load]\nwarehouse_url = "{tmp_path / "warehouse"}"\n'
        f"bootstrap_servers = {json.dumps(servers(broker_cluster))}\n"
        f'topics_allow = ["etl_topics_.*"]\ntopics_deny = []\n\n'
        f'[spark]\nmaster = "local[2]"\nsubmit = "{script}"\n'
    )
    done = etl_run(config, "--topics", f"{topic},nosuch_topic")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "lumber etl run: --topics names nosuch_topic, which the cluster does not have; nothing was started\n"
    )
    assert not mark.exists()
    broker_cluster.create_topic("etl_other_topic_x", 1)
    done = etl_run(config, "--topics", "etl_other_topic_x")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "lumber etl run: --topics names etl_other_topic_x, which [load] topics_allow / topics_deny exclude; "
        "nothing was started\n"
    )
    assert not mark.exists()
    done = etl_run(config, "--topics", topic)
    assert done.returncode == 1, done.stdout + done.stderr
    assert mark.read_text().split()[-2:] == ["--topics", topic]


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
        "from lumber.cli import main\n"
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
