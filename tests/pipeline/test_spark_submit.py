from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from pipeline.load_config import LoadConfig
from pipeline.spark_submit import (
    build_code_zip,
    code_digest,
    is_local_master,
    spark_submit_command,
    submit_environment,
    submit_variables,
)


def test_the_code_zip_carries_the_packages_and_imports_from_the_zip(tmp_path: Path) -> None:
    path = build_code_zip(tmp_path / "code.zip")
    names = set(zipfile.ZipFile(path).namelist())
    for wanted in (
        "broker/record/record_batch.py",
        "broker/client/consumer/consumer.py",
        "schemas/avro/page_view_v2.avsc",
        "pipeline/source.py",
        "jobs/load.py",
    ):
        assert wanted in names
    assert not any("__pycache__" in name for name in names)
    # the same code gives the same bytes
    assert code_digest(build_code_zip(tmp_path / "again.zip")) == code_digest(path)
    probe = (
        "import pipeline.source, schemas.shipped;"
        "print(pipeline.source.__file__);"
        "print(len(schemas.shipped.shipped_schema_text('page_view_v2')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert out[0] == f"{path}/pipeline/source.py"
    assert int(out[1]) > 100


def test_the_spark_submit_command(tmp_path: Path) -> None:
    load = LoadConfig(
        spark_master="local[2]", spark_conf=["spark.executor.memory=2g"], python="/opt/py/bin/python"
    )
    argv = spark_submit_command(
        load,
        config_path=tmp_path / "l.toml",
        code_zip=tmp_path / "c.zip",
        extra_conf=["spark.task.maxFailures=4"],
        topics=["a", "b"],
        until_hour="2026-11-22T10",
    )
    assert argv[0].endswith("spark-submit")
    assert argv[1:5] == ["--master", "local[2]", "--name", "lumber-load-hourly"]
    confs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    assert confs == [
        "spark.pyspark.python=/opt/py/bin/python",
        "spark.pyspark.driver.python=/opt/py/bin/python",
        "spark.sql.session.timeZone=UTC",
        "spark.ui.enabled=false",
        "spark.executor.memory=2g",
        "spark.task.maxFailures=4",
    ]
    tail = argv[argv.index("--py-files") :]
    assert tail[1] == str(tmp_path / "c.zip")
    assert tail[2].endswith("jobs/load.py")
    assert tail[3:] == [
        "--config",
        str(tmp_path / "l.toml"),
        "--topics",
        "a,b",
        "--until-hour",
        "2026-11-22T10",
    ]
    env = submit_environment(load, {"SPARK_LOCAL_IP": "10.0.0.5"})
    assert (env["PYSPARK_PYTHON"], env["SPARK_LOCAL_IP"]) == ("/opt/py/bin/python", "10.0.0.5")
    assert submit_environment(load, {})["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_spark_is_bound_to_loopback_for_a_local_master_only_unless_the_user_says() -> None:
    load = LoadConfig(spark_master="local[2]", python="/opt/py/bin/python")
    assert all(is_local_master(m) for m in ("local", "local[*]", "local[2,4]", "local-cluster[2,1,1024]"))
    assert not any(is_local_master(m) for m in ("yarn", "spark://h:7077", "k8s://https://h", "localhost"))
    assert submit_variables(load, base={}) == {
        "PYSPARK_PYTHON": "/opt/py/bin/python",
        "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    assert submit_variables(load, base={"SPARK_LOCAL_IP": "10.0.0.5"})["SPARK_LOCAL_IP"] == "10.0.0.5"
    cluster = submit_environment(load, {"PATH": "/bin"}, master="spark://h:7077")
    assert cluster == {
        "PATH": "/bin",
        "PYSPARK_PYTHON": "/opt/py/bin/python",
        "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python",
    }
