"""The load job's runs and the warehouse tree, read from a local warehouse with plain Python file access.

This is the console's one coupling to the load job's files: the layout is :mod:`pipeline.commit`'s (its
docstring draws it), and each file is parsed by that module's own readers (:meth:`Manifest.loads`,
:meth:`RunRecord.from_json`), so the console never has a second idea of their format. Only ``file:`` (or
plain path) warehouses are read: an ``hdfs://`` warehouse is a
:class:`~lumber.console.errors.BadRequestError` naming it (the console does not start a JVM).

* :func:`read_runs`: every ``runs/<run_id>.json`` of the job, newest first, each with its manifest's hour
  range and file count when it committed one; a file that does not parse is reported, not fatal.
* :func:`read_tree`: per topic, dataset (``data`` or ``errors``) and ``dt``/``hr`` folder, the number of
  Parquet files and their bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lumber.console.errors import BadRequestError
from pipeline.load_errors import CommitError
from pipeline.manifest import Manifest
from pipeline.run_record import RunRecord

_MANIFEST = re.compile(r"[0-9]{20}\.json")
_JOB = re.compile(r"[A-Za-z0-9_.-]+")
_DT = re.compile(r"dt=([0-9]{4}-[0-9]{2}-[0-9]{2})")
_HR = re.compile(r"hr=([0-9]{2})")


@dataclass(frozen=True)
class RunView:
    """A run as the loads page shows it (``first_hour``/``last_hour`` from its manifest's files)."""

    record: RunRecord
    first_hour: str | None = None
    last_hour: str | None = None
    files: int = 0

    @property
    def duration_ms(self) -> int | None:
        finished = self.record.finished_at_ms
        return None if finished is None else finished - self.record.started_at_ms

    def to_json(self) -> dict[str, Any]:
        return {
            **self.record.to_json(),
            "duration_ms": self.duration_ms,
            "first_hour": self.first_hour,
            "last_hour": self.last_hour,
            "files": self.files,
        }


@dataclass(frozen=True)
class HourFolder:
    """One ``<dataset root>/<topic>/dt=../hr=..`` folder."""

    topic: str
    dataset: str
    dt: str
    hr: str
    files: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "dataset": self.dataset,
            "dt": self.dt,
            "hr": self.hr,
            "files": self.files,
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class JobRuns:
    job: str
    runs: tuple[RunView, ...]
    #: files of the job's metadata that do not parse: (path, why)
    unreadable: tuple[tuple[str, str], ...] = ()


def warehouse_path(url: str) -> Path:
    """The local folder of ``url`` (a plain path or ``file:``); 400 for any other filesystem."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:
        return Path(parsed.path if parsed.scheme == "file" else url)
    raise BadRequestError(
        f"the warehouse {url} is not on the local filesystem: the console reads file: warehouses only"
    )


def list_jobs(warehouse: Path) -> list[str]:
    root = warehouse / "_lumber"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def read_runs(warehouse: Path, job: str) -> JobRuns:
    """Every run record of ``job``, newest first (see the module docstring)."""
    if not _JOB.fullmatch(job):
        raise BadRequestError(f"job {job!r}: a job name is letters, digits, '_', '.' and '-'")
    meta = warehouse / "_lumber" / job
    unreadable: list[tuple[str, str]] = []
    manifests: dict[int, Manifest] = {}
    manifest_dir = meta / "manifests"
    if manifest_dir.is_dir():
        for path in sorted(manifest_dir.iterdir()):
            if not _MANIFEST.fullmatch(path.name):
                continue
            try:
                manifest = Manifest.loads(path.read_text(encoding="utf-8"), str(path))
            except (CommitError, OSError) as exc:
                unreadable.append((str(path), str(exc)))
                continue
            manifests[manifest.sequence] = manifest
    runs: list[RunView] = []
    runs_dir = meta / "runs"
    if runs_dir.is_dir():
        for path in sorted(runs_dir.glob("*.json")):
            try:
                record = RunRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                unreadable.append((str(path), f"not a run record: {type(exc).__name__}: {exc}"))
                continue
            runs.append(_run_view(record, manifests.get(record.sequence) if record.sequence else None))
    runs.sort(key=lambda r: (r.record.started_at_ms, r.record.run_id), reverse=True)
    return JobRuns(job, tuple(runs), tuple(unreadable))


def _run_view(record: RunRecord, manifest: Manifest | None) -> RunView:
    if manifest is None:
        return RunView(record)
    hours = sorted({f"{f.dt}T{f.hr}" for f in manifest.files if f.dataset == "data"})
    return RunView(record, hours[0] if hours else None, hours[-1] if hours else None, len(manifest.files))


def read_tree(warehouse: Path) -> list[HourFolder]:
    """Every hour folder of every topic's data and quarantined errors, sorted by topic, dataset and hour."""
    found: list[HourFolder] = []
    roots = [(warehouse, "data"), (warehouse / "_errors", "errors")]
    for root, dataset in roots:
        if not root.is_dir():
            continue
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir() or topic_dir.name.startswith("_"):
                continue
            for dt_dir in sorted(topic_dir.iterdir()):
                dt_match = _DT.fullmatch(dt_dir.name)
                if not dt_match or not dt_dir.is_dir():
                    continue
                for hr_dir in sorted(dt_dir.iterdir()):
                    hr_match = _HR.fullmatch(hr_dir.name)
                    if not hr_match or not hr_dir.is_dir():
                        continue
                    files = [f for f in hr_dir.iterdir() if f.is_file() and f.suffix == ".parquet"]
                    found.append(
                        HourFolder(
                            topic_dir.name,
                            dataset,
                            dt_match.group(1),
                            hr_match.group(1),
                            len(files),
                            sum(f.stat().st_size for f in files),
                        )
                    )
    return found
