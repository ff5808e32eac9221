"""The console's warehouse reader on the embedded HDFS, through :mod:`pipeline.fs` (hdfs-native)."""

from __future__ import annotations

from lumber.console.warehouse_reader import HourFolder, list_jobs, read_runs, read_tree
from pipeline.fs import join, open_filesystem


def test_the_tree_and_the_jobs_are_read_from_hdfs(hdfs_url: str) -> None:
    fs = open_filesystem(hdfs_url)
    for rel, size in (
        ("page_view/dt=2026-11-22/hr=08/a.parquet", 10),
        ("page_view/dt=2026-11-22/hr=08/b.parquet", 5),
        ("page_view/dt=2026-11-22/hr=09/c.parquet", 7),
        ("page_view/dt=2026-11-22/hr=09/not-parquet.txt", 3),
        ("_errors/page_view/dt=2026-11-22/hr=10/d.parquet", 4),
        ("_lumber/hourly/runs/.keep", 0),
    ):
        fs.create(join(hdfs_url, rel), b"x" * size, overwrite=False)
    assert read_tree(fs) == [
        HourFolder("page_view", "data", "2026-11-22", "08", 2, 15),
        HourFolder("page_view", "data", "2026-11-22", "09", 1, 7),
        HourFolder("page_view", "errors", "2026-11-22", "10", 1, 4),
    ]
    assert list_jobs(fs) == ["hourly"]
    runs = read_runs(fs, "hourly")
    assert (runs.runs, runs.unreadable) == ((), ())
