"""Is an hour of a topic done? The decision, from the audit's reconciliation or the partitions' watermarks.

:func:`decide_hour` judges one (topic, event-time hour) and returns an :class:`HourCompleteness`. Its
state is one of:

=============== ==============================================================================================
``OPEN``        the hour has not ended ``grace_ms`` ago yet (records may still come), and is not marked
``COMPLETE``    grace passed and the policy holds (below): the hour gets (or keeps) its ``_SUCCESS``
``INCOMPLETE``  grace passed, the policy does not hold, and the hour was never marked
``LATE``        grace passed, the policy does not hold, and the hour was marked before: its ``_SUCCESS`` is
                replaced by ``_INCOMPLETE`` (late data, a quarantine, counts that arrived late)
=============== ==============================================================================================

The policies (``[completeness] require``, :mod:`pipeline.completeness_config`):

* ``audit``: the audit's reconciliation of the hour (:func:`audit.audit_report.reconcile` with hour-wide
  windows, this job's load tier) has, for every producing tier that counted the hour (producers; mirrors
  when the topic is mirrored in), ``|counted - (loaded + quarantined)| <= tolerance``, and counted > 0;
* ``watermark``: every partition of the topic is loaded past ``hour end + grace`` (its committed offset has
  reached the first offset whose timestamp is at or after that moment, as the brokers' time index answers
  ListOffsets: every record before it is loaded), or is loaded to its log end (an idle partition has nothing
  pending); records with older timestamps that come later are late data, as under ``audit``.

:func:`overdue` says whether a not-complete hour has been open longer than ``alert_after_ms``.
``hosts_missing`` names, for an hour short of records, each producing host whose count exceeds what the
hour's Parquet files hold of it (their ``_host`` column: :func:`loaded_by_host`).

Pure functions and immutable values, but for :func:`loaded_by_host`, which reads Parquet footers and one
column through :mod:`pipeline.fs`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from audit.audit_report import WindowAudit
from pipeline.completeness_config import CompletenessPolicy
from pipeline.completeness_marker import HOUR_MS, HourMarkers, hour_rel, hour_text
from pipeline.fs import FileSystem, join

HourState = Literal["OPEN", "COMPLETE", "INCOMPLETE", "LATE"]
HOUR_STATES: tuple[HourState, ...] = ("COMPLETE", "OPEN", "LATE", "INCOMPLETE")
PRODUCING_TIERS = ("producer", "mirror")


@dataclass(frozen=True)
class PartitionWatermark:
    """One partition, for ``require = "watermark"``: its committed offset (the next to load), log end, and
    the first offset stamped at or after the hour's end + grace (``None``: no such record yet)."""

    partition: int
    committed: int
    log_end: int
    first_after: int | None

    @property
    def passed(self) -> bool:
        if self.first_after is not None:
            return self.committed >= self.first_after
        return self.committed >= self.log_end


@dataclass(frozen=True)
class HourCompleteness:
    """One hour's decision (see the module docstring)."""

    topic: str
    hour_start_ms: int
    state: HourState
    require: str
    expected: int | None
    loaded: int
    quarantined: int
    missing: int
    duplicate: int
    reason: str
    manifest_sequence: int = 0
    manifest_run_id: str = ""
    hosts_missing: Mapping[str, int] = field(default_factory=dict)
    marked_revision: int = 0
    overdue: bool = False

    @property
    def hour(self) -> str:
        return hour_text(self.hour_start_ms)

    @property
    def hour_end_ms(self) -> int:
        return self.hour_start_ms + HOUR_MS

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "hour": self.hour,
            "hour_start_ms": self.hour_start_ms,
            "state": self.state,
            "require": self.require,
            "expected": self.expected,
            "loaded": self.loaded,
            "quarantined": self.quarantined,
            "missing": self.missing,
            "duplicate": self.duplicate,
            "hosts_missing": dict(self.hosts_missing),
            "manifest_sequence": self.manifest_sequence or None,
            "manifest_run_id": self.manifest_run_id or None,
            "marked_revision": self.marked_revision,
            "overdue": self.overdue,
            "reason": self.reason,
        }


def last_manifest(window: WindowAudit | None) -> tuple[int, str]:
    """The manifest (sequence, run id) that last added counts to the hour: its newest load-tier event."""
    if window is None:
        return 0, ""
    return window.last_load_sequence, window.last_load_run_id


def _judge_audit(window: WindowAudit, policy: CompletenessPolicy) -> tuple[bool, str, int, int]:
    """Whether the counts hold, why, and the missing and duplicate counts of the tier that decided."""
    received = window.received
    tiers = [t for t in PRODUCING_TIERS if t in window.tiers]
    if not tiers:
        return False, "no producing tier counted this hour (are its producers audited?)", 0, 0
    worst = (0, 0)
    for tier in tiers:
        counted = window.tiers[tier].count
        allowed = policy.tolerance.allowed(counted)
        missing, duplicate = max(0, counted - received), max(0, received - counted)
        worst = max(worst, (missing, duplicate))
        if missing > allowed:
            return (
                False,
                f"{tier}s counted {counted}, loaded + quarantined {received}: {missing} missing",
                *worst,
            )
        if duplicate > allowed:
            return (
                False,
                f"{tier}s counted {counted}, loaded + quarantined {received}: {duplicate} more than counted",
                *worst,
            )
    counted = window.tiers[tiers[0]].count
    return True, f"loaded + quarantined = produced ({received} of {counted})", *worst


def decide_hour(
    topic: str,
    hour_start_ms: int,
    *,
    policy: CompletenessPolicy,
    now_ms: int,
    window: WindowAudit | None,
    markers: HourMarkers,
    watermarks: tuple[PartitionWatermark, ...] = (),
    alert_after_ms: int = 0,
) -> HourCompleteness:
    """The state of one hour (see the module docstring). ``window``: the hour's reconciliation row (None
    when no tier counted anything in it); ``watermarks``: the topic's partitions (``watermark`` only)."""
    end_ms = hour_start_ms + HOUR_MS
    loaded = window.loaded if window is not None else 0
    quarantined = window.malformed if window is not None else 0
    sequence, run_id = last_manifest(window)
    expected: int | None
    if policy.require == "audit":
        expected = window.expected if window is not None else 0
        if window is None:
            holds, reason, missing, duplicate = False, "no audit events for this hour", 0, 0
        else:
            holds, reason, missing, duplicate = _judge_audit(window, policy)
    else:
        expected, missing, duplicate = None, 0, 0
        behind = [w for w in watermarks if not w.passed]
        holds = bool(watermarks) and not behind
        reason = (
            f"every partition loaded past {hour_text(end_ms)}:00 + grace ({loaded} rows)"
            if holds
            else (
                "no partition of the topic is known"
                if not watermarks
                else "partitions not loaded past the hour's end + grace: "
                + ", ".join(
                    f"{w.partition} (committed {w.committed}, "
                    + (
                        f"first offset after the grace {w.first_after})"
                        if w.first_after is not None
                        else f"log end {w.log_end})"
                    )
                    for w in behind[:5]
                )
            )
        )
    state: HourState
    if now_ms < end_ms + policy.grace_ms and markers.success is None:
        state = "OPEN"
        reason = f"open until {hour_text(end_ms)}:00 + grace {policy.grace_ms // 1000} s; {reason}"
    elif holds:
        state = "COMPLETE"
    elif markers.revision > 0:
        state = "LATE"
    else:
        state = "INCOMPLETE"
    late = state != "COMPLETE" and alert_after_ms > 0 and now_ms >= end_ms + alert_after_ms
    return HourCompleteness(
        topic=topic,
        hour_start_ms=hour_start_ms,
        state=state,
        require=policy.require,
        expected=expected,
        loaded=loaded,
        quarantined=quarantined,
        missing=missing,
        duplicate=duplicate,
        reason=reason,
        manifest_sequence=sequence,
        manifest_run_id=run_id,
        marked_revision=markers.revision,
        overdue=late,
    )


def hosts_missing(produced_by_host: Mapping[str, int], loaded_by: Mapping[str, int]) -> dict[str, int]:
    """Each producing host whose count exceeds what was loaded of it, with the difference."""
    return {
        host: count - loaded_by.get(host, 0)
        for host, count in sorted(produced_by_host.items())
        if count > loaded_by.get(host, 0)
    }


def loaded_by_host(fs: FileSystem, warehouse: str, topic: str, hour_start_ms: int) -> dict[str, int]:
    """Rows and quarantined records of the hour per ``_host`` (the record's ``host`` header), read from
    the Parquet files of its data and error folders (one column each)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only a short hour needs it

    counts: dict[str, int] = {}
    rel = hour_rel(topic, hour_start_ms)
    for folder in (join(warehouse, rel), join(warehouse, "_errors", rel)):
        for info in fs.list_dir(folder):
            if info.is_dir or not info.name.endswith(".parquet") or info.name.startswith(("_", ".")):
                continue
            # no Arrow thread pool: its workers, alive at interpreter exit, can abort a short-lived
            # ``lumber etl completeness`` with std::terminate (apache/arrow#34314)
            parquet = pq.ParquetFile(io.BytesIO(fs.read_bytes(info.url)), pre_buffer=False)
            table = parquet.read(columns=["_host"], use_threads=False)
            for host in table.column("_host").to_pylist():
                name = host if host is not None else "(none)"
                counts[name] = counts.get(name, 0) + 1
    return counts
