"""Real services for the tests: a session-scoped ZooKeeper server and a session-scoped local Spark session.

Fixtures:

* ``zookeeper_server``: one real ZooKeeper (Java, from pyspark's jars) on a free 127.0.0.1 port.
* ``zk_connect``: a connect string with a chroot unique to the test.
* ``zk``: a started kazoo client on that chroot, closed after the test.
* ``spark``: one ``local[2]`` SparkSession for the whole run, UI disabled, on 127.0.0.1.
* ``hdfs_server``: one real HDFS (a NameNode and a DataNode from Hadoop's jars, :mod:`lumber.dev.hdfs_server`)
  on free 127.0.0.1 ports, for the whole run (of one xdist worker); it starts ``spark`` first (see there).
* ``hdfs_url``: ``hdfs://127.0.0.1:<port>/tests/<test name>-<hex>``, a folder unique to the test (not
  created).
* ``broker_cluster`` / ``start_cluster``: real broker processes (:mod:`tests.support.broker_cluster`).

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
from tests.support.zookeeper import make_chroot, new_client

__all__ = ["broker_cluster", "start_cluster"]

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


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only Spark tests pay for the import

    local_dir: Path = tmp_path_factory.mktemp("spark-local")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("lumber-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.local.dir", str(local_dir))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(local_dir / "warehouse"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
