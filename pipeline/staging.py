"""Spark's part of a load run: read every task's range into the run's staging folder, then count it.

Per topic (topics have different schemas, so each is one Spark write of its own):

1. a DataFrame of the topic's task descriptions, one per Spark partition, goes through ``mapInArrow`` with
   :func:`pipeline.source.arrow_reader` in ``data`` mode, and is written with
   ``partitionBy("_task", "dt", "hr")`` into ``staging/<run_id>/<topic>/data/``: each staged file's folder
   names its task (hence its offset range) and its event-time hour, which is what its final name is made of;
2. the staged rows are counted back from the files (per task, partition and audit window): the counts that
   go into the manifest are those of the files that will be published, not of what a task said it did;
3. a task that wrote fewer rows than its range has records quarantined some: only those tasks read their
   range again in ``errors`` mode, into ``staging/<run_id>/<topic>/errors/``, and are counted the same way.
   (Reading twice costs nothing when no record is bad, the common case, and a range's records do not
   change: a task is deterministic.)
4. every task must account for its whole range: rows + quarantined = ``until - from``, else
   :class:`~pipeline.load_errors.ReadError` and the run commits nothing.

A task's rows arrive in offset order, so their hours follow one another and each task writes only a few
``dt``/``hr`` partitions: :func:`side_by_side_writers` lets Spark write them side by side instead of
sorting every task's rows by partition first (about 15 % of a load's time on 2 cores).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline import avro_arrow
from pipeline.commit import JobLayout, RangeResult, WindowCount
from pipeline.load_errors import ReadError
from pipeline.load_plan import LoadPlan
from pipeline.source import Mode, ReadTask, SourceSettings, arrow_reader
from schemas.registry.avro_schema import AvroSchema


@dataclass
class TopicStaging:
    """What was staged for one topic: per task rows and quarantined records, per window counts."""

    topic: str
    rows: dict[int, int] = field(default_factory=dict)
    quarantined: dict[int, int] = field(default_factory=dict)
    #: (partition, window_start_ms) -> [rows, quarantined]
    windows: dict[tuple[int, int], list[int]] = field(default_factory=dict)


#: Spark's setting for the number of files a task may write at once without sorting (default 0: sort).
CONCURRENT_WRITERS_KEY = "spark.sql.maxConcurrentOutputFileWriters"
CONCURRENT_WRITERS = 32


@contextlib.contextmanager
def side_by_side_writers(spark: Any) -> Iterator[None]:
    """Within the block, ``spark`` writes a task's partitions side by side (up to
    :data:`CONCURRENT_WRITERS` files at once) unless the session already sets
    :data:`CONCURRENT_WRITERS_KEY` (e.g. through ``[load] spark_conf``); the setting is restored after."""
    current = spark.conf.get(CONCURRENT_WRITERS_KEY, "0")
    if current != "0":
        yield
        return
    spark.conf.set(CONCURRENT_WRITERS_KEY, str(CONCURRENT_WRITERS))
    try:
        yield
    finally:
        spark.conf.set(CONCURRENT_WRITERS_KEY, current)


def _spark_schema(arrow_schema: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415 - Spark only where Spark runs

    return from_arrow_schema(arrow_schema)


def _tasks_frame(spark: Any, tasks: Sequence[ReadTask]) -> Any:
    rows = [(task.task_id, json.dumps(task.to_json())) for task in tasks]
    rdd = spark.sparkContext.parallelize(rows, len(rows))  # one task description per Spark partition
    return spark.createDataFrame(rdd, "task_id int, task string")


def _write(
    spark: Any,
    tasks: Sequence[ReadTask],
    settings: SourceSettings,
    mode: Mode,
    arrow_schema: Any,
    url: str,
    compression: str,
) -> None:
    frame = _tasks_frame(spark, tasks).mapInArrow(arrow_reader(settings, mode), _spark_schema(arrow_schema))
    (
        frame.write.partitionBy("_task", "dt", "hr")
        .option("compression", "none" if compression == "none" else compression)
        .mode("errorifexists")
        .parquet(url)
    )


def _count(spark: Any, arrow_schema: Any, url: str, window_ms: int) -> list[tuple[int, int, int, int]]:
    """``(task, partition, window_start_ms, count)`` of the Parquet files below ``url``."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415

    frame = spark.read.schema(_spark_schema(arrow_schema)).option("basePath", url).parquet(url)
    window = F.col("_timestamp") - F.pmod(F.col("_timestamp"), F.lit(window_ms))
    grouped = frame.groupBy("_task", "_partition", window.alias("window_start_ms")).count().collect()
    return [
        (int(r["_task"]), int(r["_partition"]), int(r["window_start_ms"]), int(r["count"])) for r in grouped
    ]


def stage_topic(
    spark: Any,
    plan: LoadPlan,
    topic: str,
    layout: JobLayout,
    settings: SourceSettings,
    *,
    window_ms: int,
    compression: str,
    progress: Callable[[str], None] = lambda _: None,
) -> TopicStaging:
    """Stage and count one topic of ``plan`` (see the module docstring)."""
    tasks = plan.tasks_of(topic)
    staged = TopicStaging(topic)
    if not tasks:
        return staged
    payload = avro_arrow.payload_schema(AvroSchema.parse(plan.schemas[topic].schema))
    data_schema = avro_arrow.staging_schema(avro_arrow.data_schema(payload))
    error_schema = avro_arrow.staging_schema(avro_arrow.ERROR_SCHEMA)
    data_url = layout.staged_dataset(plan.run_id, topic, "data")
    errors_url = layout.staged_dataset(plan.run_id, topic, "errors")
    records = sum(task.range.record_count for task in tasks)
    progress(f"reading {topic}: {len(tasks)} tasks, {records} records")
    spark.sparkContext.setJobDescription(f"lumber load {plan.run_id}: {topic} data")
    _write(spark, tasks, settings, "data", data_schema, data_url, compression)
    for task_id, partition, window_start, count in _count(spark, data_schema, data_url, window_ms):
        staged.rows[task_id] = staged.rows.get(task_id, 0) + count
        staged.windows.setdefault((partition, window_start), [0, 0])[0] += count
    short = [task for task in tasks if staged.rows.get(task.task_id, 0) < task.range.record_count]
    if short:
        missing = sum(task.range.record_count - staged.rows.get(task.task_id, 0) for task in short)
        progress(f"quarantining {topic}: {missing} undecodable records in {len(short)} tasks")
        spark.sparkContext.setJobDescription(f"lumber load {plan.run_id}: {topic} errors")
        _write(spark, short, settings, "errors", error_schema, errors_url, compression)
        for task_id, partition, window_start, count in _count(spark, error_schema, errors_url, window_ms):
            staged.quarantined[task_id] = staged.quarantined.get(task_id, 0) + count
            staged.windows.setdefault((partition, window_start), [0, 0])[1] += count
    spark.sparkContext.setJobDescription(None)
    for task in tasks:
        rows = staged.rows.get(task.task_id, 0)
        quarantined = staged.quarantined.get(task.task_id, 0)
        if rows + quarantined != task.range.record_count:
            raise ReadError(
                f"task {task.task_id} {task.range}: staged {rows} rows + {quarantined} quarantined = "
                f"{rows + quarantined}, expected {task.range.record_count} records; nothing is committed"
            )
    return staged


def range_results(plan: LoadPlan, staged: Sequence[TopicStaging]) -> tuple[RangeResult, ...]:
    by_topic = {s.topic: s for s in staged}
    out = []
    for task in plan.tasks:
        found = by_topic[task.range.topic]
        out.append(
            RangeResult(
                task.task_id,
                task.range,
                found.rows.get(task.task_id, 0),
                found.quarantined.get(task.task_id, 0),
            )
        )
    return tuple(out)


def window_counts(staged: Sequence[TopicStaging]) -> tuple[WindowCount, ...]:
    return tuple(
        sorted(
            WindowCount(s.topic, partition, window_start, counts[0], counts[1])
            for s in staged
            for (partition, window_start), counts in s.windows.items()
        )
    )
