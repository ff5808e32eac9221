"""The completeness marker of one (topic, event-time hour): ``_SUCCESS`` in the hour's folder, or
``_INCOMPLETE`` once a marked hour stopped being complete.

Layout, beside the hour's Parquet files (:class:`~pipeline.job_layout.JobLayout`)::

    <topic>/dt=YYYY-MM-DD/hr=HH/_SUCCESS          the hour is complete (Hadoop's convention: a reader that
                                                  only checks existence, Oozie or an Airflow sensor, works)
    <topic>/dt=YYYY-MM-DD/hr=HH/_INCOMPLETE       the hour was marked, then changed (late data, a quarantine):
                                                  the _SUCCESS it replaces is gone
    <topic>/dt=YYYY-MM-DD/hr=HH/._SUCCESS.lumber-tmp, ._INCOMPLETE.lumber-tmp    a marker being written

Hive, Spark and Hadoop's input formats skip files whose names start with ``_`` or ``.``.

Marker JSON (``format`` 1; the same document is the value of the hour's event on ``[completeness] topic``)::

    {"format": 1, "kind": "lumber-completeness", "job": "hourly", "topic": "page_view",
     "hour": "2026-11-22T09", "hour_start_ms": 1795338000000, "state": "COMPLETE", "revision": 1,
     "require": "audit", "expected": 1200, "loaded": 1198, "quarantined": 2, "missing": 0, "duplicate": 0,
     "hosts_missing": {}, "manifest_sequence": 7, "manifest_run_id": "20261122T100500Z-3f2a9c",
     "decided_at_ms": 1795341900000, "reason": "loaded + quarantined = produced (1200)"}

``expected`` is ``null`` under ``require = "watermark"``. ``revision`` counts the hour's markers (1 for the
first ``_SUCCESS``, +1 at each replacement), so a consumer of the events keeps the highest per key.

Writes (:class:`MarkerStore`), each under the load job's lock (one writer):

1. the marker is written to its ``.lumber-tmp`` file (:meth:`~pipeline.fs.FileSystem.create`: fsync-ed,
   a stale temporary file of a crashed run is replaced) and renamed to its name
   (:meth:`~pipeline.fs.FileSystem.rename`: create-exclusive, the folder fsync-ed), so a reader never sees
   half a marker. On HDFS the same calls give: hdfs-native ``hsync``-s the temporary file before closing
   it and renames it with the NameNode's ``rename2`` without ``OVERWRITE`` (exclusive at the NameNode);
   WebHDFS creates it with ``SYNC_BLOCK`` (the DataNode fsyncs the block on close; the REST API has no
   ``hsync``) and renames it with WebHDFS's RENAME, which refuses an existing file
   (:mod:`pipeline.webhdfs_file_system`);
2. marking complete: an older ``_SUCCESS`` of Lumber's is deleted first (1 then follows), then any
   ``_INCOMPLETE``; marking incomplete: ``_INCOMPLETE`` first, then ``_SUCCESS`` is deleted. A crash between
   the steps leaves no ``_SUCCESS``, or both files, which the next decision completes: a ``_SUCCESS`` never
   stands for counts it does not hold.

A marker file that is not Lumber's (Spark's empty ``_SUCCESS``, another job's, a torn or edited file) is
never overwritten or deleted: reading it raises :class:`ForeignMarkerError` naming the file and what is
wrong, and that hour is left undecided.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pipeline.fs import FileSystem, join
from pipeline.json_value import JsonValue
from pipeline.load_errors import LoadError, MalformedJsonError

MARKER_FORMAT = 1
MARKER_KIND = "lumber-completeness"
SUCCESS = "_SUCCESS"
INCOMPLETE = "_INCOMPLETE"
HOUR_MS = 3_600_000

MarkerState = Literal["COMPLETE", "INCOMPLETE"]


class ForeignMarkerError(LoadError):
    """A ``_SUCCESS`` or ``_INCOMPLETE`` that is not a marker of this job: left as it is."""


def hour_text(hour_start_ms: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of the hour starting at ``hour_start_ms``."""
    return dt.datetime.fromtimestamp(hour_start_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H")


def parse_hour(text: str) -> int:
    """``YYYY-MM-DDTHH`` (also ``YYYY-MM-DD HH``) as the hour's start in ms; raises :class:`ValueError`."""
    for layout in ("%Y-%m-%dT%H", "%Y-%m-%d %H", "%Y-%m-%dT%H:00"):
        try:
            moment = dt.datetime.strptime(text.strip(), layout).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        return int(moment.timestamp()) * 1000
    raise ValueError(f"{text!r}: expected an hour as YYYY-MM-DDTHH (UTC), e.g. 2026-11-22T09")


def hour_rel(topic: str, hour_start_ms: int) -> str:
    """The hour's folder relative to the warehouse: ``<topic>/dt=YYYY-MM-DD/hr=HH``."""
    moment = dt.datetime.fromtimestamp(hour_start_ms / 1000, tz=dt.UTC)
    return f"{topic}/dt={moment.strftime('%Y-%m-%d')}/hr={moment.strftime('%H')}"


@dataclass(frozen=True)
class CompletenessMarker(JsonValue):
    """One marker (see the module docstring for the JSON)."""

    JSON_WHAT: ClassVar[str] = "completeness marker"
    JSON_FORMAT: ClassVar[int | None] = MARKER_FORMAT

    kind: Literal["lumber-completeness"]
    job: str
    topic: str
    hour: str
    hour_start_ms: int
    state: MarkerState
    revision: int
    require: Literal["audit", "watermark"]
    expected: int | None
    loaded: int
    quarantined: int
    missing: int
    duplicate: int
    manifest_sequence: int
    manifest_run_id: str
    decided_at_ms: int
    reason: str = ""
    hosts_missing: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The event's key: ``topic/YYYY-MM-DDTHH``."""
        return f"{self.topic}/{self.hour}"

    def same_counts(self, other: CompletenessMarker) -> bool:
        return (self.state, self.expected, self.loaded, self.quarantined, self.manifest_sequence) == (
            other.state,
            other.expected,
            other.loaded,
            other.quarantined,
            other.manifest_sequence,
        )


@dataclass(frozen=True)
class HourMarkers:
    """The markers found in one hour's folder."""

    success: CompletenessMarker | None = None
    incomplete: CompletenessMarker | None = None

    @property
    def revision(self) -> int:
        """The highest revision found (0: never marked)."""
        return max((m.revision for m in (self.success, self.incomplete) if m is not None), default=0)

    @property
    def latest(self) -> CompletenessMarker | None:
        found = [m for m in (self.success, self.incomplete) if m is not None]
        return max(found, key=lambda m: m.revision) if found else None


class MarkerStore:
    """Reads and writes one job's markers in its warehouse (see the module docstring). One writer: the
    job's run, under its lock; readers (``lumber etl completeness``, the console) anywhere."""

    def __init__(self, fs: FileSystem, warehouse: str, job: str) -> None:
        self.fs = fs
        self.warehouse = warehouse
        self.job = job

    def folder(self, topic: str, hour_start_ms: int) -> str:
        return join(self.warehouse, hour_rel(topic, hour_start_ms))

    def url(self, topic: str, hour_start_ms: int, name: str) -> str:
        return join(self.folder(topic, hour_start_ms), name)

    def read(self, topic: str, hour_start_ms: int) -> HourMarkers:
        """The hour's markers; raises :class:`ForeignMarkerError` for a file that is not this job's."""
        return HourMarkers(
            self._read_one(topic, hour_start_ms, SUCCESS), self._read_one(topic, hour_start_ms, INCOMPLETE)
        )

    def _read_one(self, topic: str, hour_start_ms: int, name: str) -> CompletenessMarker | None:
        url = self.url(topic, hour_start_ms, name)
        info = self.fs.stat(url)
        if info is None:
            return None
        if info.is_dir:
            raise ForeignMarkerError(f"{url}: a directory where a completeness marker belongs; left as it is")
        if info.length_bytes == 0:
            raise ForeignMarkerError(
                f"{url}: an empty {name} (Spark's or Hadoop's output committer writes one), not a Lumber "
                f"marker of job {self.job!r}; left as it is: remove it to let the load mark the hour"
            )
        try:
            marker = CompletenessMarker.loads(self.fs.read_bytes(url), url)
        except MalformedJsonError as exc:
            raise ForeignMarkerError(
                f"{exc}; not a Lumber marker of job {self.job!r}, left as it is: remove it to let the load "
                "mark the hour"
            ) from exc
        expected_state = "COMPLETE" if name == SUCCESS else "INCOMPLETE"
        if (marker.job, marker.topic, marker.hour_start_ms, marker.state) != (
            self.job,
            topic,
            hour_start_ms,
            expected_state,
        ):
            raise ForeignMarkerError(
                f"{url}: a marker of job {marker.job!r}, topic {marker.topic!r}, hour {marker.hour}, state "
                f"{marker.state}; expected job {self.job!r}, topic {topic!r}, hour "
                f"{hour_text(hour_start_ms)}, state {expected_state}: left as it is"
            )
        return marker

    def _write(self, marker: CompletenessMarker, name: str) -> None:
        final = self.url(marker.topic, marker.hour_start_ms, name)
        tmp = self.url(marker.topic, marker.hour_start_ms, f".{name}.lumber-tmp")
        self.fs.write_text(tmp, marker.dumps(), overwrite=True)
        self.fs.rename(tmp, final)

    def mark_complete(self, marker: CompletenessMarker, found: HourMarkers) -> None:
        """Publish ``marker`` as the hour's ``_SUCCESS`` (``found``: what :meth:`read` returned)."""
        if found.success is not None:
            self.fs.delete(self.url(marker.topic, marker.hour_start_ms, SUCCESS))
        self._write(marker, SUCCESS)
        if found.incomplete is not None:
            self.fs.delete(self.url(marker.topic, marker.hour_start_ms, INCOMPLETE), missing_ok=True)

    def mark_incomplete(self, marker: CompletenessMarker, found: HourMarkers) -> None:
        """Replace the hour's ``_SUCCESS`` by ``marker`` as ``_INCOMPLETE``."""
        if found.incomplete is not None:
            self.fs.delete(self.url(marker.topic, marker.hour_start_ms, INCOMPLETE))
        self._write(marker, INCOMPLETE)
        if found.success is not None:
            self.fs.delete(self.url(marker.topic, marker.hour_start_ms, SUCCESS), missing_ok=True)
