from __future__ import annotations

from pipeline.job_layout import JobLayout
from pipeline.ranges import OffsetRange


def test_layout_names() -> None:
    layout = JobLayout("hdfs://nn/w", "hourly")
    assert layout.manifest(12) == "hdfs://nn/w/_lumber/hourly/manifests/00000000000000000012.json"
    assert (
        layout.manifest_tmp(12, "r1")
        == "hdfs://nn/w/_lumber/hourly/manifests/_tmp/00000000000000000012-r1.json"
    )
    assert layout.plan("r1") == "hdfs://nn/w/_lumber/hourly/plans/r1.json"
    assert layout.run_record("r1") == "hdfs://nn/w/_lumber/hourly/runs/r1.json"
    assert (layout.current, layout.last_run) == (
        "hdfs://nn/w/_lumber/hourly/CURRENT",
        "hdfs://nn/w/_lumber/hourly/LAST_RUN",
    )
    assert layout.staging("r1") == "hdfs://nn/w/_lumber/hourly/staging/r1"
    assert layout.attempt_rel("r1", "t", 3, "0.7") == "_lumber/hourly/staging/r1/t/task=3/attempt=0.7"
    assert JobLayout.final_rel("errors", "t", "2026-01-02", "03", OffsetRange("t", 4, 5, 6), 1) == (
        "_errors/t/dt=2026-01-02/hr=03/t+4+5+6+1.parquet"
    )
    assert JobLayout.final_rel("data", "t", "2026-01-02", "03", OffsetRange("t", 4, 5, 6), 0) == (
        "t/dt=2026-01-02/hr=03/t+4+5+6+0.parquet"
    )
