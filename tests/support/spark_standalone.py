"""A Spark standalone cluster of our own on 127.0.0.1 (a master and one worker, each a real JVM started with
pyspark's ``spark-class``), for the load job's tests and ``bench/load_job.py --standalone``.

The worker runs each application's executors in JVMs of their own (under ``work_dir/app-*/``), which start
their Python workers with ``PYSPARK_PYTHON`` (this interpreter). Both processes are stopped by pid when the
context exits; their logs are ``master.log`` and ``worker.log`` in ``base``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumber.dev.process import ProcessHandle, free_port, spawn, stop, wait_until

SPARK_CLASS = Path(sys.executable).parent / "spark-class"


@dataclass
class Standalone:
    master_url: str
    handles: list[tuple[ProcessHandle, Any]]
    #: The worker's pid: its process tree holds the executors' JVMs and their Python workers.
    worker_pid: int
    #: Where the worker puts each application's executors (``app-*/<executor id>/stderr``).
    work_dir: Path


@contextmanager
def spark_standalone(base: Path, *, cores: int = 2, memory: str = "2g") -> Iterator[Standalone]:
    """A running master and one worker of ``cores`` cores registered with it; stopped on exit."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    started: list[tuple[ProcessHandle, Any]] = []
    base.mkdir(parents=True, exist_ok=True)
    try:
        master = spawn(
            "spark-master",
            [
                str(SPARK_CLASS),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            base / "master.log",
            env=env,
        )
        started.append(master)
        wait_until(
            lambda: "I have been elected leader" in (base / "master.log").read_text(errors="replace"),
            60,
            "the Spark master",
        )
        worker = spawn(
            "spark-worker",
            [
                str(SPARK_CLASS),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(base / "work"),
                f"spark://127.0.0.1:{port}",
            ],
            base / "worker.log",
            env=env,
        )
        started.append(worker)
        wait_until(
            lambda: (
                "Successfully registered with master" in (base / "worker.log").read_text(errors="replace")
            ),
            60,
            "the Spark worker to register",
        )
        yield Standalone(f"spark://127.0.0.1:{port}", started, worker[1].pid, base / "work")
    finally:
        for handle, popen in reversed(started):
            stop(handle, popen=popen)
