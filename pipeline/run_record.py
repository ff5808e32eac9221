"""What a load job remembers of each run: ``runs/<run_id>.json`` and the ``LAST_RUN`` pointer.

Both live in the job's metadata folder (:mod:`pipeline.job_layout`); the commit protocol
(:mod:`pipeline.commit`) writes them: a run's record when it starts (``outcome`` ``running``) and when it
ends, and ``LAST_RUN`` = ``{"run_id": ...}`` right after the first. ``lumber etl status`` and the console
show them. A run record's JSON::

    {"run_id": "20261122T100500Z-3f2a9c", "job": "hourly", "outcome": "committed",
     "started_at_ms": 1795341890000, "finished_at_ms": 1795341900000, "sequence": 7,
     "ranges": 2, "rows": 229, "quarantined": 1, "lost": 50, "error": null,
     "host": "etl-1", "pid": 4242, "extra": {"spark_app_id": "..."}}

Every key after ``started_at_ms`` may be absent (its default then). The JSON is made and read by
:class:`~pipeline.json_value.JsonValue`; records written by earlier versions load unchanged
(``tests/pipeline/formats/``). Immutable and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pipeline.json_value import JsonValue


@dataclass(frozen=True)
class RunRecord(JsonValue):
    """What ``runs/<run_id>.json`` says about a run (``lumber etl status`` shows the last one)."""

    JSON_WHAT: ClassVar[str] = "run record"

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


@dataclass(frozen=True, slots=True)
class LastRun(JsonValue):
    """``LAST_RUN``: the run started last."""

    JSON_WHAT: ClassVar[str] = "LAST_RUN pointer"

    run_id: str
