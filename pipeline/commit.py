"""The load job's commit protocol: staging, one atomic manifest, idempotent moves, and recovery.

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
                                                     (:mod:`pipeline.audit_publisher`)
        runs/<run_id>.json                           each run's record: outcome, times, counts, error
        LAST_RUN                                     {"run_id": ...}: the run started last

``<from>``/``<until>`` are the task's offset range and ``<n>`` numbers the files of one (task, hour), from 0
(or from the first free number, if an earlier run already holds that name: only after offsets were moved
back by hand). A name is chosen once, recorded in the manifest, and never changes, so repeating a move is
harmless.

A run (:mod:`pipeline.load_job`), holding the job's ZooKeeper lock:

1. **recovers** (:meth:`CommitProtocol.recover`): the latest manifest whose staging folder still exists is
   rolled forward (its remaining moves done, staging deleted, CURRENT updated); every other staging folder
   belongs to a run that never committed and is deleted, as are temporary manifests; a run left
   ``running`` in LAST_RUN is marked ``crashed``;
2. reads the committed offsets from the latest manifest: CURRENT names it, and manifests are probed forward
   from there (normally one ``exists``), so this is constant time and never looks at data files;
3. plans and **persists the plan** (``plans/<run_id>.json``), then the Spark tasks write into
   ``staging/<run_id>/``, each attempt of a task into a folder of its own, and each returns a summary of what
   it wrote (files with bytes, rows and CRC-32, counts per audit window);
4. keeps exactly one successful attempt per task (the one whose summary Spark returned; any other attempt's
   folder, from a retry or a speculative copy, is never named and goes with the staging folder), checks
   each named file's length against its summary (:meth:`CommitProtocol.name_files`) and builds the
   manifest: the cumulative offsets of every partition the job ever loaded, the ranges with their row and
   quarantine counts, the audit counts per (topic, partition, window), the losses (gaps skipped by
   ``on_out_of_range = earliest``) and the staged -> final name of every file;
5. **commits**: writes the manifest to ``manifests/_tmp/`` and renames it to
   ``manifests/<previous + 1>.json`` after checking that name is free and the lock is still held. That
   rename is the single atomic commit point: data files, offsets and audit counts are published together
   or not at all (a crash before it leaves only staging, which step 1 discards; after it, step 1 rolls
   forward);
6. moves each staged file to its final name, deletes the run's staging folder and points CURRENT at the
   manifest. Each move is idempotent: staged and no final -> rename; final and no staged -> done already;
   both of equal length -> a copy-fallback rename was interrupted, delete the staged one; anything else
   raises :class:`~pipeline.load_errors.CommitError` (a file named by a committed manifest is gone).

Manifest JSON (``format`` 1)::

    {"format": 1, "job": "hourly", "sequence": 7, "run_id": "20261122T100500Z-3f2a9c",
     "committed_at_ms": 1795341900000, "window_ms": 600000, "cutoff_ms": 1795341600000 or null,
     "offsets": {"page_view": {"0": 1200, "1": 980}},          # next offset to load, every partition ever
     "ranges": [{"task": 0, "topic": "page_view", "partition": 0, "from_offset": 1000,
                 "until_offset": 1200, "rows": 199, "quarantined": 1}],
     "counts": [{"topic": "page_view", "partition": 0, "window_start_ms": 1795341000000,
                 "rows": 120, "quarantined": 1}],                # by record timestamp, windows of window_ms
     "losses": [{"topic": "page_view", "partition": 1, "from_offset": 900, "until_offset": 950,
                 "reason": "out_of_range"}],
     "files": [{"dataset": "data", "task": 0, "topic": "page_view", "partition": 0, "from_offset": 1000,
                "until_offset": 1200, "dt": "2026-11-22", "hr": "09",
                "staged": "_lumber/hourly/staging/<run_id>/page_view/task=0/attempt=0.17/data/dt=2026-11-22/"
                          "hr=09/part-00000.parquet",
                "final": "page_view/dt=2026-11-22/hr=09/page_view+0+1000+1200+0.parquet",
                "bytes": 48211, "rows": 199, "crc32": 2834991234}],
     "staging": "_lumber/hourly/staging/<run_id>"}

Not thread-safe: one run at a time per job (the lock), one thread per run.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.record.topic_partition import TopicPartition
from pipeline.faults import Faults
from pipeline.fs import FileSystem, join
from pipeline.load_errors import CommitError, FileSystemError
from pipeline.ranges import LossRange, OffsetRange

MANIFEST_FORMAT = 1
DATASETS = ("data", "errors")
_MANIFEST_NAME = re.compile(r"([0-9]{20})\.json")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------------------------- layout


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


# ---------------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True, slots=True)
class StagedFile:
    """One file of a run: where its task wrote it and its final name (both relative to the warehouse),
    with what the task reported of it: bytes, rows and CRC-32 (``None`` in manifests older than that)."""

    dataset: str
    task: int
    range: OffsetRange
    dt: str
    hr: str
    staged: str
    final: str = ""
    bytes: int | None = None
    rows: int | None = None
    crc32: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "dataset": self.dataset,
            "task": self.task,
            **self.range.to_json(),
            "dt": self.dt,
            "hr": self.hr,
            "staged": self.staged,
            "final": self.final,
        }
        for key in ("bytes", "rows", "crc32"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StagedFile:
        def optional(key: str) -> int | None:
            found = value.get(key)
            return None if found is None else int(found)

        return cls(
            str(value["dataset"]),
            int(value["task"]),
            OffsetRange.from_json(value),
            str(value["dt"]),
            str(value["hr"]),
            str(value["staged"]),
            str(value["final"]),
            optional("bytes"),
            optional("rows"),
            optional("crc32"),
        )


@dataclass(frozen=True, slots=True)
class RangeResult:
    """A task's range and what it produced."""

    task: int
    range: OffsetRange
    rows: int
    quarantined: int

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, **self.range.to_json(), "rows": self.rows, "quarantined": self.quarantined}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RangeResult:
        return cls(
            int(value["task"]), OffsetRange.from_json(value), int(value["rows"]), int(value["quarantined"])
        )


@dataclass(frozen=True, slots=True, order=True)
class WindowCount:
    """Committed rows and quarantined records of one partition in one audit window (record timestamp)."""

    topic: str
    partition: int
    window_start_ms: int
    rows: int
    quarantined: int

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "window_start_ms": self.window_start_ms,
            "rows": self.rows,
            "quarantined": self.quarantined,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> WindowCount:
        return cls(
            str(value["topic"]),
            int(value["partition"]),
            int(value["window_start_ms"]),
            int(value["rows"]),
            int(value["quarantined"]),
        )


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, Any]]) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in value.items()
        for partition, offset in partitions.items()
    }


@dataclass(frozen=True)
class Manifest:
    """One committed run (see the module docstring for the JSON)."""

    job: str
    sequence: int
    run_id: str
    committed_at_ms: int
    window_ms: int
    offsets: Mapping[TopicPartition, int]
    ranges: tuple[RangeResult, ...] = ()
    counts: tuple[WindowCount, ...] = ()
    losses: tuple[LossRange, ...] = ()
    files: tuple[StagedFile, ...] = ()
    staging: str = ""
    cutoff_ms: int | None = None

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.ranges)

    @property
    def quarantined(self) -> int:
        return sum(r.quarantined for r in self.ranges)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "job": self.job,
            "sequence": self.sequence,
            "run_id": self.run_id,
            "committed_at_ms": self.committed_at_ms,
            "window_ms": self.window_ms,
            "cutoff_ms": self.cutoff_ms,
            "offsets": offsets_to_json(self.offsets),
            "ranges": [r.to_json() for r in self.ranges],
            "counts": [c.to_json() for c in self.counts],
            "losses": [loss.to_json() for loss in self.losses],
            "files": [f.to_json() for f in self.files],
            "staging": self.staging,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n"

    @classmethod
    def loads(cls, text: str, where: str) -> Manifest:
        try:
            value = json.loads(text)
            if value.get("format") != MANIFEST_FORMAT:
                raise CommitError(
                    f"{where}: manifest format {value.get('format')!r}, expected {MANIFEST_FORMAT}"
                )
            cutoff = value.get("cutoff_ms")
            return cls(
                job=str(value["job"]),
                sequence=int(value["sequence"]),
                run_id=str(value["run_id"]),
                committed_at_ms=int(value["committed_at_ms"]),
                window_ms=int(value["window_ms"]),
                offsets=offsets_from_json(value["offsets"]),
                ranges=tuple(RangeResult.from_json(r) for r in value["ranges"]),
                counts=tuple(WindowCount.from_json(c) for c in value["counts"]),
                losses=tuple(LossRange.from_json(loss) for loss in value["losses"]),
                files=tuple(StagedFile.from_json(f) for f in value["files"]),
                staging=str(value["staging"]),
                cutoff_ms=None if cutoff is None else int(cutoff),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CommitError(f"{where}: not a valid manifest: {type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunRecord:
    """What ``runs/<run_id>.json`` says about a run (``lumber etl status`` shows the last one)."""

    run_id: str
    job: str
    outcome: str  # running | committed | nothing_to_load | failed | crashed
    started_at_ms: int
    finished_at_ms: int | None = None
    sequence: int | None = None
    ranges: int = 0
    rows: int = 0
    quarantined: int = 0
    lost: int = 0
    error: str | None = None
    host: str = ""
    pid: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job": self.job,
            "outcome": self.outcome,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
            "sequence": self.sequence,
            "ranges": self.ranges,
            "rows": self.rows,
            "quarantined": self.quarantined,
            "lost": self.lost,
            "error": self.error,
            "host": self.host,
            "pid": self.pid,
            **({"extra": dict(self.extra)} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RunRecord:
        return cls(
            run_id=str(value["run_id"]),
            job=str(value["job"]),
            outcome=str(value["outcome"]),
            started_at_ms=int(value["started_at_ms"]),
            finished_at_ms=None if value.get("finished_at_ms") is None else int(value["finished_at_ms"]),
            sequence=None if value.get("sequence") is None else int(value["sequence"]),
            ranges=int(value.get("ranges", 0)),
            rows=int(value.get("rows", 0)),
            quarantined=int(value.get("quarantined", 0)),
            lost=int(value.get("lost", 0)),
            error=value.get("error"),
            host=str(value.get("host", "")),
            pid=int(value.get("pid", 0)),
            extra=dict(value.get("extra", {})),
        )


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`CommitProtocol.recover` did."""

    rolled_forward: tuple[int, ...] = ()
    moved_files: int = 0
    discarded_staging: tuple[str, ...] = ()
    discarded_tmp_manifests: int = 0
    crashed_run: str | None = None

    @property
    def did_anything(self) -> bool:
        return bool(
            self.rolled_forward or self.discarded_staging or self.discarded_tmp_manifests or self.crashed_run
        )


# ---------------------------------------------------------------------------------------------- protocol


class CommitProtocol:
    """Reads and writes one job's metadata on one filesystem (see the module docstring)."""

    def __init__(
        self,
        fs: FileSystem,
        job: str,
        *,
        faults: Faults | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.fs = fs
        self.layout = JobLayout(fs.root, job)
        self.faults = faults or Faults()
        self.clock_ms = clock_ms

    # ------------------------------------------------------------------------------ reading

    def read_manifest(self, sequence: int) -> Manifest:
        url = self.layout.manifest(sequence)
        manifest = Manifest.loads(self.fs.read_text(url), url)
        if manifest.sequence != sequence or manifest.job != self.layout.job:
            raise CommitError(
                f"{url}: names sequence {manifest.sequence} of job {manifest.job!r}, expected sequence "
                f"{sequence} of job {self.layout.job!r}"
            )
        return manifest

    def _pointer_sequence(self) -> int | None:
        """CURRENT's sequence; ``None`` when CURRENT is missing or unreadable (a crash while replacing it)."""
        try:
            if not self.fs.exists(self.layout.current):
                return None
            value = json.loads(self.fs.read_text(self.layout.current))
            sequence = int(value["sequence"])
        except (FileSystemError, ValueError, KeyError, TypeError):
            return None
        return sequence

    def _listed_latest_sequence(self) -> int:
        """The highest manifest by listing ``manifests/`` (only when CURRENT is unusable)."""
        best = 0
        for info in self.fs.list_dir(self.layout.manifests):
            found = _MANIFEST_NAME.fullmatch(info.name)
            if found and not info.is_dir:
                best = max(best, int(found.group(1)))
        return best

    def latest_sequence(self) -> int:
        """The latest committed manifest's sequence (0: none yet). Constant time: CURRENT, then probes."""
        sequence = self._pointer_sequence()
        if sequence is None or (sequence > 0 and not self.fs.exists(self.layout.manifest(sequence))):
            sequence = self._listed_latest_sequence()
        while self.fs.exists(self.layout.manifest(sequence + 1)):
            sequence += 1
        return sequence

    def latest_manifest(self) -> Manifest | None:
        sequence = self.latest_sequence()
        return self.read_manifest(sequence) if sequence > 0 else None

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The job's committed offsets (next offset to load, per partition) from the latest manifest."""
        manifest = self.latest_manifest()
        return dict(manifest.offsets) if manifest is not None else {}

    # ------------------------------------------------------------------------------ runs

    def write_run(self, record: RunRecord) -> None:
        self.fs.write_text(
            self.layout.run_record(record.run_id),
            json.dumps(record.to_json(), indent=1) + "\n",
            overwrite=True,
        )

    def read_run(self, run_id: str) -> RunRecord | None:
        url = self.layout.run_record(run_id)
        if not self.fs.exists(url):
            return None
        try:
            return RunRecord.from_json(json.loads(self.fs.read_text(url)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CommitError(f"{url}: not a valid run record: {exc}") from exc

    def start_run(self, record: RunRecord) -> None:
        """Record a run as started (its record, then LAST_RUN)."""
        self.write_run(record)
        self.fs.write_text(self.layout.last_run, json.dumps({"run_id": record.run_id}) + "\n", overwrite=True)

    def last_run(self) -> RunRecord | None:
        """The record of the run started last (``None`` before the first)."""
        if not self.fs.exists(self.layout.last_run):
            return None
        try:
            run_id = str(json.loads(self.fs.read_text(self.layout.last_run))["run_id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CommitError(f"{self.layout.last_run}: not a valid LAST_RUN pointer: {exc}") from exc
        return self.read_run(run_id)

    def persist_plan(self, run_id: str, plan: Mapping[str, Any]) -> None:
        """Write ``plans/<run_id>.json`` (create-exclusive) before the run reads anything."""
        self.fs.write_text(self.layout.plan(run_id), json.dumps(plan, indent=1) + "\n", overwrite=False)
        self.faults.after("plan")

    def read_plan(self, run_id: str) -> dict[str, Any] | None:
        url = self.layout.plan(run_id)
        if not self.fs.exists(url):
            return None
        try:
            plan: dict[str, Any] = json.loads(self.fs.read_text(url))
        except ValueError as exc:
            raise CommitError(f"{url}: not a valid plan: {exc}") from exc
        return plan

    # ------------------------------------------------------------------------------ staging -> manifest

    def name_files(self, run_id: str, staged: Sequence[StagedFile]) -> list[StagedFile]:
        """``staged`` (the files the tasks' chosen attempts wrote, as their summaries say) with their final
        names: per (dataset, task, hour), numbered from 0 in the order of their staged names, skipping names
        already taken in the warehouse.

        Raises :class:`CommitError` for a file outside the run's staging folder, or missing, or of another
        length than its task reported (nothing else is read: the counts are the tasks').
        """
        prefix = self.layout.staging_rel(run_id) + "/"
        files: list[StagedFile] = []
        taken: set[str] = set()
        for found in sorted(staged, key=lambda f: (f.dataset, f.task, f.dt, f.hr, f.staged)):
            if not found.staged.startswith(prefix) or ".." in found.staged.split("/"):
                raise CommitError(f"{found.staged}: a staged file outside the staging folder of run {run_id}")
            url = self.layout.url(found.staged)
            length = self.fs.stat(url)
            if length is None or length.is_dir:
                raise CommitError(f"{url}: staged by task {found.task} ({found.range}), and not there")
            if found.bytes is not None and length.length_bytes != found.bytes:
                raise CommitError(
                    f"{url}: task {found.task} ({found.range}) wrote {found.bytes} bytes, the file has "
                    f"{length.length_bytes}"
                )
            n = 0
            while True:
                final = JobLayout.final_rel(
                    found.dataset, found.range.topic, found.dt, found.hr, found.range, n
                )
                if final not in taken and not self.fs.exists(self.layout.url(final)):
                    break
                n += 1
            taken.add(final)
            files.append(dataclasses.replace(found, final=final))
        return files

    # ------------------------------------------------------------------------------ commit

    def commit(self, manifest: Manifest, *, check_still_allowed: Callable[[], None] = lambda: None) -> None:
        """Publish ``manifest`` (steps 5 and 6 of the module docstring).

        ``check_still_allowed`` runs right before the commit point (the job lock's "do I still hold it").
        """
        expected = self.latest_sequence() + 1
        if manifest.sequence != expected:
            raise CommitError(
                f"manifest of run {manifest.run_id} has sequence {manifest.sequence}, expected {expected} "
                f"(another run committed since this one planned?)"
            )
        tmp = self.layout.manifest_tmp(manifest.sequence, manifest.run_id)
        self.fs.write_text(tmp, manifest.dumps(), overwrite=True)
        self.faults.after("manifest_tmp")
        check_still_allowed()
        final = self.layout.manifest(manifest.sequence)
        try:
            self.fs.rename(tmp, final)
        except FileSystemError as exc:
            raise CommitError(
                f"cannot commit run {manifest.run_id} as manifest {manifest.sequence}: {exc}"
            ) from exc
        self.faults.after("manifest")
        self.roll_forward(manifest)

    def roll_forward(self, manifest: Manifest) -> int:
        """Do what is left of a committed manifest's moves, cleanup and pointer; returns files moved."""
        if manifest.staging != self.layout.staging_rel(manifest.run_id):
            raise CommitError(
                f"manifest {manifest.sequence}: staging folder {manifest.staging!r}, expected "
                f"{self.layout.staging_rel(manifest.run_id)!r}; refusing to delete it"
            )
        moved = 0
        for index, staged_file in enumerate(manifest.files, start=1):
            moved += self._move(manifest, staged_file)
            self.faults.after(f"move:{index}")
        self.fs.delete(self.layout.url(manifest.staging), recursive=True, missing_ok=True)
        self.faults.after("staging_cleanup")
        self._point_at(manifest.sequence)
        self.faults.after("pointer")
        return moved

    def _move(self, manifest: Manifest, staged_file: StagedFile) -> int:
        src = self.layout.url(staged_file.staged)
        dst = self.layout.url(staged_file.final)
        src_exists = self.fs.exists(src)
        dst_exists = self.fs.exists(dst)
        if src_exists and not dst_exists:
            self.fs.rename(src, dst)
            return 1
        if dst_exists and not src_exists:
            return 0
        if src_exists and dst_exists:
            src_bytes, dst_bytes = self.fs.length_bytes(src), self.fs.length_bytes(dst)
            if src_bytes == dst_bytes:
                self.fs.delete(src)
                return 0
            raise CommitError(
                f"manifest {manifest.sequence}: both {src} ({src_bytes} bytes) and {dst} ({dst_bytes} bytes) "
                "exist with different sizes; expected one of them"
            )
        raise CommitError(
            f"manifest {manifest.sequence} (run {manifest.run_id}) names {staged_file.staged} -> "
            f"{staged_file.final}, and neither file exists: the data of a committed run was deleted"
        )

    def _point_at(self, sequence: int) -> None:
        current = self.layout.current
        tmp = current + ".tmp"
        self.fs.write_text(tmp, json.dumps({"sequence": sequence}) + "\n", overwrite=True)
        self.fs.delete(current, missing_ok=True)
        self.fs.rename(tmp, current)

    # ------------------------------------------------------------------------------ recovery

    def recover(self) -> RecoveryReport:
        """Repair what a crashed run left (step 1 of the module docstring)."""
        rolled: list[int] = []
        moved = 0
        latest = self.latest_sequence()
        pointer = self._pointer_sequence()
        staging_dirs = {info.name: info.url for info in self.fs.list_dir(self.layout.staging_root)}
        # 1. roll forward: manifests after CURRENT (in order), and the latest if its staging is still there
        first = latest if pointer is None else min(pointer + 1, latest)
        for sequence in range(max(first, 1), latest + 1):
            manifest = self.read_manifest(sequence)
            staging_name = manifest.staging.rsplit("/", 1)[-1]
            if sequence > (pointer or 0) or staging_name in staging_dirs:
                moved += self.roll_forward(manifest)
                rolled.append(sequence)
                staging_dirs.pop(staging_name, None)
        # 2. staging no manifest covers: its run never reached the commit point; or the staging of an older
        #    committed run, re-created after its cleanup by a straggling task attempt (a speculative copy
        #    Spark was still killing): junk once every file of that manifest is at its final name
        discarded: list[str] = []
        for name, url in sorted(staging_dirs.items()):
            plan = self.read_plan(name)
            committed = None if plan is None else self._committed_as(name, plan)
            if committed is not None:
                missing = [
                    f.final
                    for f in self.read_manifest(committed).files
                    if not self.fs.exists(self.layout.url(f.final))
                ]
                if missing:
                    raise CommitError(
                        f"{url}: staging of run {name}, committed as manifest {committed} (not the latest), "
                        f"whose files {missing[:3]} are not at their final names; expected it rolled forward"
                    )
            self.fs.delete(url, recursive=True)
            discarded.append(name)
        # 3. temporary manifests of runs that died before their commit point
        tmp_dir = join(self.layout.manifests, "_tmp")
        tmp_files = self.fs.list_dir(tmp_dir)
        for info in tmp_files:
            self.fs.delete(info.url, recursive=info.is_dir)
        if self.fs.exists(self.layout.current + ".tmp") and self._pointer_sequence() is not None:
            self.fs.delete(self.layout.current + ".tmp")
        # 4. the last run's record: a run that never recorded its end crashed; a run that failed after its
        #    commit point is committed all the same (rolled forward above)
        crashed = None
        last = self.last_run()
        if last is not None and last.outcome in ("running", "failed"):
            committed = self._committed_run_sequence(last.run_id)
            if last.outcome == "running":
                crashed = last.run_id
                self.write_run(
                    dataclasses.replace(
                        last,
                        outcome="crashed" if committed is None else "committed",
                        finished_at_ms=self.clock_ms(),
                        sequence=committed,
                        error=(
                            f"the run died after committing manifest {committed}; the next run rolled it "
                            "forward"
                            if committed is not None
                            else "the run died before its commit point; its staging was discarded"
                        ),
                    )
                )
            elif committed is not None:
                self.write_run(
                    dataclasses.replace(
                        last,
                        outcome="committed",
                        sequence=committed,
                        error=(
                            f"{last.error}; it had passed its commit point (manifest {committed}): the "
                            "next run rolled it forward"
                        ),
                    )
                )
        return RecoveryReport(tuple(rolled), moved, tuple(discarded), len(tmp_files), crashed)

    def _committed_as(self, run_id: str, plan: Mapping[str, Any]) -> int | None:
        base = plan.get("base_sequence")
        if not isinstance(base, int):
            return None
        url = self.layout.manifest(base + 1)
        if not self.fs.exists(url):
            return None
        return base + 1 if self.read_manifest(base + 1).run_id == run_id else None

    def _committed_run_sequence(self, run_id: str) -> int | None:
        plan = self.read_plan(run_id)
        return None if plan is None else self._committed_as(run_id, plan)


def count_totals(counts: Iterable[WindowCount]) -> tuple[int, int]:
    """Total committed rows and quarantined records of ``counts``."""
    rows = quarantined = 0
    for count in counts:
        rows += count.rows
        quarantined += count.quarantined
    return rows, quarantined


def merge_offsets(
    previous: Mapping[TopicPartition, int], planned: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The cumulative offsets after a run: every partition ever loaded, updated by this run's plan."""
    merged = dict(previous)
    merged.update(planned)
    return merged


def sorted_counts(counts: Sequence[WindowCount]) -> tuple[WindowCount, ...]:
    return tuple(sorted(counts))
