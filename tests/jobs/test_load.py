"""``jobs/load.py`` under spark-submit (and ``lumber etl run``) against real brokers, ZooKeeper and registry.

Every run here is a real ``.venv/bin/spark-submit`` with the code shipped as a ``--py-files`` zip (about 15 s
each), so there are few: a killed task attempt under ``lumber etl run``, the driver SIGKILLed at random
moments (slow), and a Spark standalone cluster whose executors write into the embedded HDFS (slow).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest

from lumber.dev.process import spawn
from pipeline.load_job import run_load
from pipeline.spark_submit import build_code_zip, spark_submit_command, submit_environment
from tests.support.hdfs_warehouse import fsspec_of, hdfs_files, hdfs_offsets, hdfs_rows
from tests.support.load_job import (
    BASE_MS,
    HOUR_MS,
    LoadStack,
    ViewProducer,
    load_stack,
)
from tests.support.registry import RegistryProcess
from tests.support.spark_standalone import Standalone, spark_standalone


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def produce_some(views: ViewProducer, index: int) -> None:
    views.views(0, 40, BASE_MS + index * HOUR_MS, 60_000, v2=index % 2 == 1)
    views.views(1, 25, BASE_MS + index * HOUR_MS + 30_000, 120_000, v2=True)


def test_etl_run_shows_progress_and_survives_a_killed_task_attempt(stack: LoadStack) -> None:
    produce_some(stack.views, 0)
    stack.views.malformed(1, BASE_MS + 5)
    # task 1 kills its own Python worker on attempt 0; local[2,4] lets Spark retry it
    config = stack.config(fault_injection=["task:1"], min_partitions=3)
    path = stack.config_file(config)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(path), "etl", "run", "--master", "local[2,4]"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "planned: 2 ranges, 69 records, 3 tasks" in out
    assert "spark: stage" in out
    assert "quarantining" in out
    assert "committed manifest 1: 65 rows, 4 quarantined" in out
    assert "lumber etl run: committed in" in out
    logs = list((stack.tmp / "state" / "etl" / "logs").glob("*.log"))
    assert len(logs) == 1
    log = logs[0].read_text(errors="replace")
    assert "Lost task" in log, log[-3000:]
    stack.assert_rows_and_offsets()


def _submit(
    stack: LoadStack, config_path: Path, log_path: Path, master: str, code_zip: Path
) -> tuple[Any, Any]:
    load = stack.config().load
    argv = spark_submit_command(load, config_path=config_path, code_zip=code_zip, master=master)
    return spawn("spark-submit", argv, log_path, env=submit_environment(load))


@pytest.mark.slow
def test_sigkill_of_the_driver_at_random_moments_loses_and_duplicates_nothing(stack: LoadStack) -> None:
    seed = int(time.time())
    rng = random.Random(seed)
    code_zip = build_code_zip(stack.tmp / "code.zip")
    # a killed run's lock goes with its ZooKeeper session (6 s): the next run waits for it
    config_path = stack.config_file(stack.config(lock_timeout_ms=30_000, min_partitions=4))
    markers = ["", "lock ", "planned:", "reading ", "spark: stage", "staged:"]
    kills = 0
    for index in range(5):
        produce_some(stack.views, index)
        log_path = stack.tmp / f"run-{index}.log"
        handle, popen = _submit(stack, config_path, log_path, "local[2]", code_zip)
        marker = rng.choice(markers)
        delay_s = rng.uniform(0.0, 1.5)
        deadline = time.monotonic() + 90
        while popen.poll() is None and time.monotonic() < deadline:
            if marker in log_path.read_text(errors="replace"):
                break
            time.sleep(0.05)
        time.sleep(delay_s)
        if popen.poll() is None:
            os.killpg(handle.pid, signal.SIGKILL)  # the driver JVM and its Python: the whole process group
            kills += 1
        popen.wait(timeout=30)
        print(f"seed {seed} run {index}: marker {marker!r} + {delay_s:.2f} s, exit {popen.returncode}")
    assert kills >= 3, f"seed {seed}: only {kills} of 5 runs were still running when killed"
    final_log = stack.tmp / "final.log"
    _handle, popen = _submit(stack, config_path, final_log, "local[2]", code_zip)
    assert popen.wait(timeout=240) == 0, final_log.read_text(errors="replace")[-4000:]
    stack.assert_rows_and_offsets()
    staging = stack.warehouse / "_lumber" / stack.job / "staging"
    assert not staging.exists() or not any(staging.iterdir())


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    with spark_standalone(tmp_path) as cluster:
        yield cluster


@pytest.mark.slow
@pytest.mark.hdfs
def test_a_standalone_cluster_loads_into_hdfs_what_local_mode_loads_into_file(
    stack: LoadStack, standalone: Standalone, spark: Any, hdfs_url: str
) -> None:
    produce_some(stack.views, 0)
    produce_some(stack.views, 1)
    stack.views.malformed(0, BASE_MS + 7)
    local = stack.tmp / "local-warehouse"
    run_load(spark, stack.config(warehouse=local), progress=lambda _: None)
    code_zip = build_code_zip(stack.tmp / "code.zip")
    warehouse = f"{hdfs_url}/warehouse"  # the executors write their Parquet to HDFS (hdfs-native)
    config_path = stack.config_file(
        stack.config(warehouse=warehouse, spark_conf=["spark.executor.memory=1g"])
    )
    log_path = stack.tmp / "cluster-run.log"
    _handle, popen = _submit(stack, config_path, log_path, standalone.master_url, code_zip)
    assert popen.wait(timeout=300) == 0, log_path.read_text(errors="replace")[-4000:]
    log = log_path.read_text(errors="replace")
    assert "committed manifest 1" in log
    # the executors ran in their own JVMs, started by the worker
    assert list((stack.tmp / "work").glob("app-*/0/stderr")), "no executor of the standalone worker ran"
    produced = stack.views.produced
    assert hdfs_rows(warehouse, stack.topic) == produced.row_tuples()
    assert hdfs_offsets(warehouse, stack.job) == produced.end_offsets([(stack.topic, p) for p in range(2)])
    stack.assert_rows_and_offsets(warehouse=local)

    def files(root: Path) -> dict[str, int]:
        return {
            p.relative_to(root).as_posix(): len(loaded_rows_of(p))
            for p in root.rglob("*.parquet")
            if not p.relative_to(root).as_posix().startswith("_lumber/")
        }

    hdfs = fsspec_of(warehouse)
    on_hdfs = {
        rel: pq.ParquetFile(hdfs.open(f"{urlparse(warehouse).path}/{rel}")).metadata.num_rows
        for rel in hdfs_files(warehouse)
        if rel.endswith(".parquet") and not rel.startswith("_lumber/")
    }
    assert on_hdfs == files(local)


def loaded_rows_of(path: Path) -> list[Any]:
    import pyarrow.parquet as pq  # noqa: PLC0415

    rows: list[Any] = pq.read_table(path).to_pylist()
    return rows
