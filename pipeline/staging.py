"""Spark's part of a load run: one Spark task per planned task, each writing its own files; the driver keeps
one attempt per task and turns the summaries into the manifest's ranges, counts and files.

1. :func:`stage` runs one Spark job over an RDD of the plan's task descriptions (one per Spark partition,
   the largest first so the last tasks to start are small). Each Spark task runs
   :func:`pipeline.task_output.write_task`: fetch, decode once, write data and quarantine Parquet with
   pyarrow into the folder of its own attempt, and return a :class:`~pipeline.task_output.TaskSummary`.
   Spark schedules, retries and speculates these tasks as any others (``local[*]``, standalone, YARN,
   Kubernetes); no record crosses into the JVM, and nothing is read back.
2. :func:`choose_attempts` keeps exactly one summary per task (Spark's ``collect`` returns one per
   partition: the attempt that finished first; a second summary for a task, which only a caller merging
   several collections could produce, is ignored, as Hadoop's output committer ignores a second attempt
   asking to commit), and checks every task accounts for its whole range: rows + quarantined =
   ``until - from``, and the rows of its files add up to the same; else
   :class:`~pipeline.load_errors.ReadError` and the run commits nothing.
3. :func:`range_results`, :func:`window_counts` and :func:`staged_files` are what goes into the manifest;
   :meth:`pipeline.commit.CommitProtocol.name_files` gives the files their final names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pipeline.job_layout import JobLayout
from pipeline.load_config import HdfsClient
from pipeline.load_errors import ReadError
from pipeline.load_plan import LoadPlan
from pipeline.manifest import RangeResult, StagedFile, WindowCount
from pipeline.source import SourceSettings
from pipeline.task_output import ParquetSettings, TaskSummary, spark_task

_TASK_ERROR = re.compile(r"^pipeline\.[a-z_.]+\.(\w*Error): (.+)$", re.MULTILINE)


def task_failure(spark_error: str) -> str | None:
    """The last of Lumber's errors (``pipeline.<module>.<Name>Error: message``) in the Python traceback that
    Spark's error about a failed task carries, as ``Name: message``; None when there is none."""
    found = list(_TASK_ERROR.finditer(spark_error))
    return f"{found[-1].group(1)}: {found[-1].group(2)}" if found else None


def stage(
    spark: Any,
    plan: LoadPlan,
    layout: JobLayout,
    settings: SourceSettings,
    *,
    warehouse_url: str,
    webhdfs_url: str,
    hdfs_client: HdfsClient,
    window_ms: int,
    parquet: ParquetSettings,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[int, TaskSummary]:
    """Run every task of ``plan`` in one Spark job; the chosen attempt's summary per task id."""
    if not plan.tasks:
        return {}
    for topic in plan.topics_with_tasks():
        tasks = plan.tasks_of(topic)
        progress(f"reading {topic}: {len(tasks)} tasks, {sum(t.range.record_count for t in tasks)} records")
    ordered = sorted(plan.tasks, key=lambda t: (-t.range.record_count, t.task_id))
    texts = [task.dumps(indent=None) for task in ordered]
    context = spark.sparkContext
    context.setJobDescription(f"lumber load {plan.run_id}: {len(texts)} tasks")
    try:
        run = spark_task(
            settings,
            warehouse_url,
            webhdfs_url,
            hdfs_client,
            layout.staging_rel(plan.run_id),
            window_ms,
            parquet,
        )
        try:
            collected = context.parallelize(texts, len(texts)).mapPartitions(run).collect()
        except Exception as exc:  # Py4JJavaError: Spark gave up on a task
            cause = task_failure(str(exc))
            if cause is None:
                raise
            raise ReadError(f"run {plan.run_id}: a Spark task failed: {cause}") from exc
    finally:
        context.setJobDescription(None)
    chosen = choose_attempts(plan, (TaskSummary.loads(text, "a task's summary") for text in collected))
    summaries = list(chosen.values())
    progress(
        f"tasks wrote {sum(len(s.files) for s in summaries)} files, "
        f"{sum(f.bytes for s in summaries for f in s.files)} bytes; task time "
        f"{min(s.seconds for s in summaries):.1f}-{max(s.seconds for s in summaries):.1f} s, "
        f"{sum(s.cpu_seconds for s in summaries):.1f} CPU s in all"
    )
    for topic in plan.topics_with_tasks():
        bad = [chosen[t.task_id] for t in plan.tasks_of(topic) if chosen[t.task_id].quarantined]
        if bad:
            progress(
                f"quarantining {topic}: {sum(s.quarantined for s in bad)} undecodable records of "
                f"{len(bad)} tasks into _errors/{topic}"
            )
    return chosen


def choose_attempts(plan: LoadPlan, summaries: Iterable[TaskSummary]) -> dict[int, TaskSummary]:
    """One summary per task of ``plan``, the first given; checks every task's counts (see the module
    docstring)."""
    ranges = plan.tasks_by_id()
    chosen: dict[int, TaskSummary] = {}
    for summary in summaries:
        if summary.task not in ranges:
            raise ReadError(f"a summary of task {summary.task}, which run {plan.run_id}'s plan does not have")
        chosen.setdefault(summary.task, summary)
    for task_id, task_range in sorted(ranges.items()):
        found = chosen.get(task_id)
        if found is None:
            raise ReadError(f"task {task_id} {task_range}: no attempt reported; nothing is committed")
        file_rows = sum(f.rows for f in found.files)
        if (
            found.rows + found.quarantined != task_range.record_count
            or file_rows != found.rows + found.quarantined
        ):
            raise ReadError(
                f"task {task_id} {task_range} (attempt {found.attempt}): {found.rows} rows + "
                f"{found.quarantined} quarantined = {found.rows + found.quarantined}, in files of "
                f"{file_rows} rows, expected {task_range.record_count} records; nothing is committed"
            )
    return chosen


def range_results(plan: LoadPlan, chosen: Mapping[int, TaskSummary]) -> tuple[RangeResult, ...]:
    return tuple(
        RangeResult(task.task_id, task.range, chosen[task.task_id].rows, chosen[task.task_id].quarantined)
        for task in plan.tasks
    )


def window_counts(plan: LoadPlan, chosen: Mapping[int, TaskSummary]) -> tuple[WindowCount, ...]:
    totals: dict[tuple[str, int, int], list[int]] = {}
    for task in plan.tasks:
        for start, rows, quarantined in chosen[task.task_id].windows:
            found = totals.setdefault((task.range.topic, task.range.partition, start), [0, 0])
            found[0] += rows
            found[1] += quarantined
    return tuple(sorted(WindowCount(t, p, w, c[0], c[1]) for (t, p, w), c in totals.items()))


def staged_files(plan: LoadPlan, chosen: Mapping[int, TaskSummary]) -> list[StagedFile]:
    """Every file of the chosen attempts, without its final name yet."""
    return [
        StagedFile(
            f.dataset, task.task_id, task.range, f.dt, f.hr, f.path, bytes=f.bytes, rows=f.rows, crc32=f.crc32
        )
        for task in plan.tasks
        for f in chosen[task.task_id].files
    ]
