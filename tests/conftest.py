"""Real services for the tests: a session-scoped ZooKeeper server and a session-scoped local Spark session.

Fixtures:

* ``zookeeper_server``: one real ZooKeeper (Java, from pyspark's jars) on a free 127.0.0.1 port.
* ``zk_connect``: a connect string with a chroot unique to the test.
* ``zk``: a started kazoo client on that chroot, closed after the test.
* ``spark``: one ``local[2]`` SparkSession for the whole run, UI disabled, on 127.0.0.1.
* ``jvm_scratch`` (autouse, once per process): a folder under pytest's own temporary folder for everything
  Spark writes outside its output (``blockmgr-*``, ``spark-*``, extracted native libraries): every Spark JVM
  the tests start, the session's, ``spark-submit``'s and a standalone cluster's, gets it through the
  environment (``SPARK_LOCAL_DIRS``; ``java.io.tmpdir`` in ``SPARK_SUBMIT_OPTS`` and
  ``SPARK_DAEMON_JAVA_OPTS``), so a run killed with ``kill -9`` leaves them where pytest's rotation of its
  temporary folders (the last three runs kept) removes them, not in /tmp.
* ``hdfs_server``: one real HDFS (a NameNode and a DataNode from Hadoop's jars, :mod:`lumber.dev.hdfs_server`)
  on free 127.0.0.1 ports, for the whole run (of one xdist worker); it starts ``spark`` first (see there).
* ``hdfs_url``: ``hdfs://127.0.0.1:<port>/tests/<test name>-<hex>``, a folder unique to the test (not
  created).
* ``broker_cluster`` / ``start_cluster``: real broker processes (:mod:`tests.support.broker_cluster`).
* ``load_registry``: the schema registry of the load job's tests (:mod:`tests.support.load_job`), declared
  here once (imported by the conftests of ``tests/jobs``, ``tests/lumber`` and ``tests/pipeline`` each, it
  was three fixtures of one name, and a worker that ran files of all three started three registries).

With ``LUMBER_TEST_FD_LOG=<file>`` in the environment, every test appends a line to that file when it leaves
its pytest process holding more open file descriptors than before it ran (``<pid> <growth> <count>
<test id>``), to find a test that leaks sockets, clients or files: a worker past 1,023 descriptors makes
``select()`` fail in later tests.

Tests that use these fixtures get the ``zookeeper`` / ``spark`` / ``hdfs`` markers automatically, so
``pytest -m "not spark"`` skips Spark without a word in each test.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import broker_cluster, start_cluster
from tests.support.load_job import load_registry
from tests.support.zookeeper import make_chroot, new_client

__all__ = ["broker_cluster", "load_registry", "start_cluster"]

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

_FIXTURE_MARKERS = {
    "zookeeper_server": "zookeeper",
    "zk_connect": "zookeeper",
    "zk": "zookeeper",
    "spark": "spark",
    "broker_cluster": "zookeeper",
    "start_cluster": "zookeeper",
    "hdfs_server": "hdfs",
    "hdfs_url": "hdfs",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in names and marker not in {m.name for m in item.iter_markers()}:
                item.add_marker(getattr(pytest.mark, marker))


_FD_LOG = os.environ.get("LUMBER_TEST_FD_LOG")


def _open_fds() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


@pytest.fixture(autouse=bool(_FD_LOG))
def _fd_growth(request: pytest.FixtureRequest) -> Iterator[None]:
    """Report a test after which this process holds more descriptors (see the module docstring)."""
    before = _open_fds()
    yield
    after = _open_fds()
    if _FD_LOG and after > before:
        with Path(_FD_LOG).open("a") as log:
            log.write(f"{os.getpid()} {after - before} {after} {request.node.nodeid}\n")


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def hdfs_server(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[HdfsServer]:
    # Spark first: pyspark launches its JVM with Popen(preexec_fn=...), a fork that hung (600 s, in
    # subprocess's wait for the exec) when this process had already used the embedded HDFS through
    # hdfs-native (its runtime's threads: a fork copies their locks held); with Spark started before
    # any HDFS test of the worker, whatever order its files come in, the order cannot occur.
    del spark
    server = HdfsServer(tmp_path_factory.mktemp("hdfs"), HdfsPorts.free())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def hdfs_url(hdfs_server: HdfsServer, request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:80]
    return f"{hdfs_server.url}/tests/{name}-{secrets.token_hex(3)}"


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    return make_chroot(zookeeper_server.connect, re.sub(r"[^A-Za-z0-9_]", "_", request.node.name))


@pytest.fixture
def zk(zk_connect: str) -> Iterator[Any]:
    client = new_client(zk_connect)
    yield client
    client.stop()
    client.close()


#: the environment through which every Spark JVM of the run finds ``jvm_scratch`` (see the module docstring)
_SCRATCH_VARIABLES = ("SPARK_LOCAL_DIRS", "SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS")


@pytest.fixture(scope="session", autouse=True)
def jvm_scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    scratch = tmp_path_factory.mktemp("jvm-scratch")
    saved = {name: os.environ.get(name) for name in _SCRATCH_VARIABLES}
    tmpdir = f"-Djava.io.tmpdir={scratch}"
    os.environ["SPARK_LOCAL_DIRS"] = str(scratch)
    for name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        os.environ[name] = f"{saved[name]} {tmpdir}" if saved[name] else tmpdir
    yield scratch
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, jvm_scratch: Path) -> Iterator[Any]:
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only Spark tests pay for the import

    local_dir: Path = tmp_path_factory.mktemp("spark-local")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lumber-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.local.dir", str(jvm_scratch))  # SPARK_LOCAL_DIRS says the same
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(local_dir / "warehouse"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
