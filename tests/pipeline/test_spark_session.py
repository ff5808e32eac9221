from __future__ import annotations

import sys
from typing import Any


def test_local_spark_session_is_real_and_quiet(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    rows = spark.range(0, 1000, numPartitions=4).selectExpr("sum(id) AS s", "count(*) AS n").collect()
    assert (rows[0]["s"], rows[0]["n"]) == (499500, 1000)


def test_python_workers_use_the_project_interpreter(spark: Any) -> None:
    executables = (
        spark.sparkContext.parallelize(range(4), 2).map(lambda _: sys.executable).distinct().collect()
    )
    assert executables == [sys.executable]
