"""Where one load job's files live in the warehouse: :class:`JobLayout`, the one place that names them.

Layout of the warehouse (``[load] warehouse_url``; every path below is relative to it)::

    <topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<from>+<until>+<n>.parquet    the data (event-time hour)
    _errors/<topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<from>+<until>+<n>.parquet   quarantined records
    _lumber/<job>/                                   the job's metadata; nothing else writes here
        plans/<run_id>.json                          each run's plan, written before any record is read
        staging/<run_id>/<topic>/task=<id>/attempt=<a>/{data,errors}/dt=../hr=../part-NNNNN.parquet
                                                     one attempt of a task (pipeline/task_output.py)
        manifests/<sequence:020d>.json               one per committed run: THE commit point
        manifests/_tmp/<sequence>-<run_id>.json      a manifest being written (never read)
        CURRENT                                      {"sequence": N}: the latest manifest whose moves are done
        AUDIT_PUBLISHED                              the latest manifest whose audit counts are in _audit
                                                     (:mod:`pipeline.load_audit_publisher`)
        runs/<run_id>.json                           each run's record: outcome, times, counts, error
        LAST_RUN                                     {"run_id": ...}: the run started last

``<from>``/``<until>`` are the task's offset range and ``<n>`` numbers the files of one (task, hour), from 0
(or from the first free number, if an earlier run already holds that name: only after offsets were moved
back by hand). A name is chosen once, recorded in the manifest, and never changes, so repeating a move is
harmless.

The files' formats: manifests :mod:`pipeline.manifest`, run records and LAST_RUN :mod:`pipeline.run_record`,
plans :mod:`pipeline.load_plan`, staging :mod:`pipeline.task_output`; what writes them, and in which order,
is the commit protocol (:mod:`pipeline.commit`). A value object: immutable, thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.fs import join
from pipeline.ranges import OffsetRange


@dataclass(frozen=True)
class JobLayout:
    """Where a job's files live (see the module docstring). ``warehouse`` is a qualified URL."""

    warehouse: str
    job: str

    @property
    def meta(self) -> str:
        return join(self.warehouse, self.meta_rel)

    @property
    def meta_rel(self) -> str:
        return f"_lumber/{self.job}"

    def url(self, rel: str) -> str:
        return join(self.warehouse, rel)

    def plan(self, run_id: str) -> str:
        return join(self.meta, "plans", f"{run_id}.json")

    def staging(self, run_id: str) -> str:
        return join(self.meta, "staging", run_id)

    def staging_rel(self, run_id: str) -> str:
        return f"{self.meta_rel}/staging/{run_id}"

    def attempt_rel(self, run_id: str, topic: str, task: int, attempt: str) -> str:
        """The folder of one attempt of a task (relative to the warehouse)."""
        return f"{self.staging_rel(run_id)}/{topic}/task={task}/attempt={attempt}"

    @property
    def staging_root(self) -> str:
        return join(self.meta, "staging")

    @property
    def manifests(self) -> str:
        return join(self.meta, "manifests")

    def manifest(self, sequence: int) -> str:
        return join(self.manifests, f"{sequence:020d}.json")

    def manifest_tmp(self, sequence: int, run_id: str) -> str:
        return join(self.manifests, "_tmp", f"{sequence:020d}-{run_id}.json")

    @property
    def current(self) -> str:
        return join(self.meta, "CURRENT")

    @property
    def last_run(self) -> str:
        return join(self.meta, "LAST_RUN")

    def run_record(self, run_id: str) -> str:
        return join(self.meta, "runs", f"{run_id}.json")

    @staticmethod
    def final_rel(dataset: str, topic: str, dt: str, hr: str, task_range: OffsetRange, n: int) -> str:
        """The final name of a file of ``task_range`` in hour ``dt``/``hr`` (``n``: its number)."""
        name = (
            f"{topic}+{task_range.partition}+{task_range.from_offset}+{task_range.until_offset}+{n}.parquet"
        )
        prefix = topic if dataset == "data" else f"_errors/{topic}"
        return f"{prefix}/dt={dt}/hr={hr}/{name}"
