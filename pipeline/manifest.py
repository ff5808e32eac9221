"""The manifest: one committed run of a load job, ``manifests/<sequence:020d>.json``.

A manifest is the commit point of the protocol in :mod:`pipeline.commit`: it holds the cumulative offsets,
the ranges loaded, the audit counts, the losses and the staged -> final name of every file of one run.

Manifest JSON (``format`` 1)::

    {"format": 1, "job": "hourly", "sequence": 7, "run_id": "20261122T100500Z-3f2a9c",
     "committed_at_ms": 1795341900000, "window_ms": 600000,
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
     "staging": "_lumber/hourly/staging/<run_id>", "cutoff_ms": 1795341600000 or null}

``bytes``, ``rows`` and ``crc32`` of a file are absent (or ``null``) in manifests written before tasks
reported them. Key order carries no meaning (manifests before issue 18 wrote ``cutoff_ms`` after
``window_ms``). The JSON is made and read by :class:`~pipeline.json_value.JsonValue` (pydantic over these
dataclasses); manifests written by every earlier version load unchanged (``tests/pipeline/formats/``). A
malformed one raises :class:`~pipeline.load_errors.MalformedJsonError` naming the file and the field.
All values here are immutable and thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pipeline.json_value import JsonValue, Offsets
from pipeline.ranges import LossRange, OffsetRange

MANIFEST_FORMAT = 1


@dataclass(frozen=True, slots=True)
class StagedFile(JsonValue):
    """One file of a run: where its task wrote it and its final name (both relative to the warehouse),
    with what the task reported of it: bytes, rows and CRC-32 (``None`` in manifests older than that)."""

    JSON_WHAT: ClassVar[str] = "staged file"
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ("range",)

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


@dataclass(frozen=True, slots=True)
class RangeResult(JsonValue):
    """A task's range and what it produced."""

    JSON_WHAT: ClassVar[str] = "range result"
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ("range",)

    task: int
    range: OffsetRange
    rows: int
    quarantined: int


@dataclass(frozen=True, slots=True, order=True)
class WindowCount(JsonValue):
    """Committed rows and quarantined records of one partition in one audit window (record timestamp)."""

    JSON_WHAT: ClassVar[str] = "window count"

    topic: str
    partition: int
    window_start_ms: int
    rows: int
    quarantined: int


@dataclass(frozen=True)
class Manifest(JsonValue):
    """One committed run (see the module docstring for the JSON)."""

    JSON_WHAT: ClassVar[str] = "manifest"
    JSON_FORMAT: ClassVar[int | None] = MANIFEST_FORMAT

    job: str
    sequence: int
    run_id: str
    committed_at_ms: int
    window_ms: int
    offsets: Offsets
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


@dataclass(frozen=True, slots=True)
class ManifestPointer(JsonValue):
    """``CURRENT``: ``{"sequence": N}``, the latest manifest whose moves are done."""

    JSON_WHAT: ClassVar[str] = "CURRENT pointer"

    sequence: int
