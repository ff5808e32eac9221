"""``jvm_scratch`` of ``tests/conftest.py``: the Spark JVMs the tests start write their temporary folders
(``blockmgr-*``, ``spark-*``) under pytest's own temporary folder, not in /tmp, where a run killed with
kill -9 left them for good."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def test_the_session_spark_writes_its_temporary_folders_into_the_scratch(
    spark: Any, jvm_scratch: Path, tmp_path_factory: Any
) -> None:
    assert jvm_scratch.is_relative_to(tmp_path_factory.getbasetemp())
    jvm = spark.sparkContext._jvm
    # the JVM spark-submit started (pyspark starts the session's through spark-submit, as Lumber's loads)
    assert jvm.java.lang.System.getProperty("java.io.tmpdir") == str(jvm_scratch)
    conf = spark.sparkContext._jsc.sc().getConf()
    assert list(jvm.org.apache.spark.util.Utils.getConfiguredLocalDirs(conf)) == [str(jvm_scratch)]
    # a shuffle writes blocks into the session's block manager folder. The scratch is the process's: Spark
    # JVMs that other tests of this worker started (loads killed with kill -9) leave theirs beside it, so the
    # folder is found by what this shuffle wrote into it
    before = {path: path.stat().st_mtime_ns for path in jvm_scratch.glob("blockmgr-*/*/shuffle_*")}
    assert spark.range(1000).repartition(2).groupBy().count().collect()[0][0] == 1000
    written = {
        path.parent.parent
        for path in jvm_scratch.glob("blockmgr-*/*/shuffle_*")
        if before.get(path) != path.stat().st_mtime_ns
    }
    assert len(written) == 1, written
    assert os.environ["SPARK_LOCAL_DIRS"] == str(jvm_scratch)
    assert f"-Djava.io.tmpdir={jvm_scratch}" in os.environ["SPARK_DAEMON_JAVA_OPTS"].split()
