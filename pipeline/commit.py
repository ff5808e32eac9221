"""The load job's commit protocol: staging, one atomic manifest, idempotent moves, and recovery.

The files it reads and writes are laid out by :class:`~pipeline.job_layout.JobLayout` (the warehouse and the
job's ``_lumber/<job>/`` metadata folder, drawn in :mod:`pipeline.job_layout`); the manifest, the commit
point, is :class:`~pipeline.manifest.Manifest`; run records are :class:`~pipeline.run_record.RunRecord`.

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

Not thread-safe: one run at a time per job (the lock), one thread per run.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.record.topic_partition import TopicPartition
from pipeline.faults import Faults
from pipeline.fs import FileSystem, join
from pipeline.job_layout import JobLayout
from pipeline.load_errors import CommitError, FileSystemError, MalformedJsonError
from pipeline.manifest import Manifest, ManifestPointer, StagedFile
from pipeline.run_record import LastRun, RunRecord

_MANIFEST_NAME = re.compile(r"([0-9]{20})\.json")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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
            return ManifestPointer.loads(self.fs.read_text(self.layout.current), self.layout.current).sequence
        except (FileSystemError, MalformedJsonError):
            return None

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
            record.dumps(),
            overwrite=True,
        )

    def read_run(self, run_id: str) -> RunRecord | None:
        url = self.layout.run_record(run_id)
        if not self.fs.exists(url):
            return None
        return RunRecord.loads(self.fs.read_text(url), url)

    def start_run(self, record: RunRecord) -> None:
        """Record a run as started (its record, then LAST_RUN)."""
        self.write_run(record)
        pointer = LastRun(record.run_id).dumps(indent=None) + "\n"
        self.fs.write_text(self.layout.last_run, pointer, overwrite=True)

    def last_run(self) -> RunRecord | None:
        """The record of the run started last (``None`` before the first)."""
        if not self.fs.exists(self.layout.last_run):
            return None
        pointer = LastRun.loads(self.fs.read_text(self.layout.last_run), self.layout.last_run)
        return self.read_run(pointer.run_id)

    def persist_plan(self, run_id: str, plan: Mapping[str, Any]) -> None:
        """Write ``plans/<run_id>.json`` (create-exclusive) before the run reads anything.

        ``plan`` is :meth:`pipeline.load_plan.LoadPlan.to_json`; the protocol itself reads back only its
        ``base_sequence`` (recovery: was this run committed?), so a plan need hold no more than that.
        """
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
        self.fs.write_text(tmp, ManifestPointer(sequence).dumps(indent=None) + "\n", overwrite=True)
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
