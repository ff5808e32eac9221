"""The load job's runs and the warehouse tree, read through :mod:`pipeline.fs` (``file:`` or ``hdfs://``).

This is the console's one coupling to the load job's files: the layout is :mod:`pipeline.commit`'s (its
docstring draws it), and each file is parsed by that module's own readers (:meth:`Manifest.loads`,
:meth:`RunRecord.from_json`), so the console never has a second idea of their format. The warehouse is
opened as the load job opens it (:func:`open_warehouse`: ``[load] warehouse_url`` and ``hdfs_client``; an
``hdfs://`` warehouse through hdfs-native, no JVM); a warehouse that does not answer (no NameNode) is a
:class:`~lumber.console.errors.SourceUnavailableError` (503) naming it and the filesystem's error.

* :func:`read_runs`: every ``runs/<run_id>.json`` of the job, newest first, each with its manifest's hour
  range and file count when it committed one; a file that does not parse is reported, not fatal.
* :func:`read_tree`: per topic, dataset (``data`` or ``errors``) and ``dt``/``hr`` folder, the number of
  Parquet files and their bytes.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lumber.console.errors import BadRequestError, SourceUnavailableError
from pipeline.fs import FileSystem, join, open_filesystem, relative_to
from pipeline.load_config import LoadConfig
from pipeline.load_errors import CommitError, FileSystemError
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


def open_warehouse(load: LoadConfig) -> FileSystem:
    """The warehouse of ``[load]`` through :mod:`pipeline.fs` (``file:``, or ``hdfs://`` with its
    ``hdfs_client``); a URL it cannot open is a 400 naming it."""
    try:
        return open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
    except FileSystemError as exc:
        raise BadRequestError(f"the warehouse cannot be opened: {exc}") from exc


@contextlib.contextmanager
def _reading(fs: FileSystem) -> Iterator[None]:
    """A filesystem error while reading (a NameNode that does not answer) as a 503 naming it."""
    try:
        yield
    except FileSystemError as exc:
        raise SourceUnavailableError(f"the warehouse {fs.root} cannot be read: {exc}") from exc


def list_jobs(fs: FileSystem) -> list[str]:
    with _reading(fs):
        return [info.name for info in fs.list_dir(join(fs.root, "_lumber")) if info.is_dir]


def read_runs(fs: FileSystem, job: str) -> JobRuns:
    """Every run record of ``job``, newest first (see the module docstring)."""
    if not _JOB.fullmatch(job):
        raise BadRequestError(f"job {job!r}: a job name is letters, digits, '_', '.' and '-'")
    meta = join(fs.root, "_lumber", job)
    unreadable: list[tuple[str, str]] = []
    manifests: dict[int, Manifest] = {}
    runs: list[RunView] = []
    with _reading(fs):
        for info in fs.list_dir(join(meta, "manifests")):
            if info.is_dir or not _MANIFEST.fullmatch(info.name):
                continue
            try:
                manifest = Manifest.loads(fs.read_text(info.url), info.url)
            except CommitError as exc:  # a manifest that does not parse is reported
                unreadable.append((info.url, str(exc)))
                continue
            manifests[manifest.sequence] = manifest
        for info in fs.list_dir(join(meta, "runs")):
            if info.is_dir or not info.name.endswith(".json"):
                continue
            try:
                record = RunRecord.from_json(json.loads(fs.read_text(info.url)))
            except (FileSystemError, ValueError, KeyError, TypeError) as exc:
                unreadable.append((info.url, f"not a run record: {type(exc).__name__}: {exc}"))
                continue
            runs.append(_run_view(record, manifests.get(record.sequence) if record.sequence else None))
    runs.sort(key=lambda r: (r.record.started_at_ms, r.record.run_id), reverse=True)
    return JobRuns(job, tuple(runs), tuple(unreadable))


def _run_view(record: RunRecord, manifest: Manifest | None) -> RunView:
    if manifest is None:
        return RunView(record)
    hours = sorted({f"{f.dt}T{f.hr}" for f in manifest.files if f.dataset == "data"})
    return RunView(record, hours[0] if hours else None, hours[-1] if hours else None, len(manifest.files))


def read_tree(fs: FileSystem) -> list[HourFolder]:
    """Every hour folder of every topic's data and quarantined errors, sorted by topic, dataset and hour:
    one listing of each topic's files."""
    found: list[HourFolder] = []
    roots = [(fs.root, "data"), (join(fs.root, "_errors"), "errors")]
    with _reading(fs):
        for root, dataset in roots:
            for topic_dir in fs.list_dir(root):
                if not topic_dir.is_dir or topic_dir.name.startswith("_"):
                    continue
                hours: dict[tuple[str, str], list[int]] = {}
                for info in fs.list_files(topic_dir.url):
                    parts = relative_to(info.url, topic_dir.url).split("/")
                    if len(parts) != 3 or not info.name.endswith(".parquet"):
                        continue
                    dt_match, hr_match = _DT.fullmatch(parts[0]), _HR.fullmatch(parts[1])
                    if dt_match and hr_match:
                        hours.setdefault((dt_match.group(1), hr_match.group(1)), []).append(info.length_bytes)
                for (dt, hr), sizes in sorted(hours.items()):
                    found.append(HourFolder(topic_dir.name, dataset, dt, hr, len(sizes), sum(sizes)))
    return found
