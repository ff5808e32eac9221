"""Reconciliation: what the producers counted against what the load committed, per (topic, window).

Paper section 4: "The consumers can then count the number of messages that they have received from a given
topic and validate those counts with the monitoring events". The events come from the audit topic
(:mod:`audit.audit_reader`); :func:`reconcile` turns them into an :class:`AuditReport`, which
``lumber audit verify`` prints as a table, JSON or HTML (:mod:`audit.audit_text`,
:mod:`audit.audit_html`).

1. **Deduplicate** by ``event_id`` (:func:`dedupe`): the first copy counts, later copies are dropped (an id
   whose copies disagree on the counts is reported as a conflict).
2. **Select**: the requested topics; of the load tier, the requested job's events only (two jobs loading one
   topic each load it whole).
3. **Window**: every event is put in the report's window holding its window (the report's ``window_ms`` is
   the one given, else the preferred one when the events' windows divide it, else the widest among the
   events: :func:`report_window_ms`; every event's window must divide it, so windows nest). Windows
   starting in ``[since_ms, until_ms)`` are reported; a window no event mentions is not.
4. **Count**, per window, with *received* = loaded + malformed (a malformed record reached the load and is in
   its error dataset: it is accounted for, not lost):

   ============== ===========================================================================================
   ``expected``   the producer tier's count (confirmed sends)
   ``loaded``     the load tier's committed rows
   ``malformed``  the load tier's quarantined records
   ``missing``    ``max(0, expected - received)``
   ``duplicate``  ``max(0, received - expected)``: loaded exceeds expected
   ``late``       received after the window was first complete, for messages the producers counted after
                  that moment: ``min(received after T, expected(final) - expected(T))``. T is the first
                  moment at or after the window's end when the events emitted so far had received >=
                  expected > 0 (``emitted_at_ms`` orders the events: a producer's emission time, a load's
                  commit time). Data re-read by a load (duplicates) is therefore not late, and data produced
                  with old timestamps after the window was loaded is.
   ============== ===========================================================================================

   Messages without a timestamp are shown per tier (``missing_timestamp``) in the window of the moment they
   were counted; they are not in the comparison (the tiers cannot put them in the same window).
5. **Status**: ``OPEN`` while the window has not ended, and after its end while it is outside the tolerance
   and ``now < end + grace``; ``COMPLETE`` when missing and duplicate are both within the tolerance (and the
   window has ended); ``INCOMPLETE`` otherwise. :attr:`AuditReport.ok` is false when any window is
   INCOMPLETE: ``lumber audit verify`` then exits with 3.

Pure functions over events: no I/O here.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from audit.audit_event import TIERS, AuditEvent, window_start
from audit.audit_tolerance import Tolerance
from audit.errors import AuditError

WindowStatus = Literal["COMPLETE", "INCOMPLETE", "OPEN"]
STATUSES: tuple[WindowStatus, ...] = ("COMPLETE", "INCOMPLETE", "OPEN")
DEFAULT_WINDOW_MS = 600_000


def utc_text(ms: int, seconds: bool = False) -> str:
    """``YYYY-MM-DD HH:MM`` (UTC) of ``ms`` since the epoch."""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def duration_text(ms: int) -> str:
    """``1h``, ``10m``, ``90s``: a duration as the command line takes it."""
    if ms and ms % 3_600_000 == 0:
        return f"{ms // 3_600_000}h"
    if ms and ms % 60_000 == 0:
        return f"{ms // 60_000}m"
    return f"{ms / 1000:g}s"


# ---------------------------------------------------------------------------------------------- dedupe


@dataclass(frozen=True)
class Deduplicated:
    """The unique events of a read, and what deduplication dropped."""

    events: tuple[AuditEvent, ...]
    read: int
    #: ids whose copies disagree on the counts (the first copy was kept)
    conflicts: tuple[str, ...] = ()

    @property
    def dropped(self) -> int:
        return self.read - len(self.events)


def dedupe(events: Iterable[AuditEvent]) -> Deduplicated:
    """Keep the first copy of every ``event_id`` (see the module docstring)."""
    first: dict[str, AuditEvent] = {}
    conflicts: dict[str, None] = {}
    read = 0
    for event in events:
        read += 1
        seen = first.get(event.event_id)
        if seen is None:
            first[event.event_id] = event
        elif not seen.same_counts(event):
            conflicts[event.event_id] = None
    return Deduplicated(tuple(first.values()), read, tuple(conflicts))


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class TierCounts:
    """One tier's events in one window, summed."""

    count: int = 0
    bytes: int = 0
    malformed: int = 0
    missing_timestamp: int = 0
    events: int = 0

    def plus(self, event: AuditEvent) -> TierCounts:
        return TierCounts(
            self.count + event.count,
            self.bytes + event.bytes,
            self.malformed + event.malformed_count,
            self.missing_timestamp + event.missing_timestamp_count,
            self.events + 1,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "count": self.count,
            "bytes": self.bytes,
            "malformed": self.malformed,
            "missing_timestamp": self.missing_timestamp,
            "events": self.events,
        }


@dataclass(frozen=True)
class WindowAudit:
    """The reconciliation of one topic in one window (the columns are in the module docstring)."""

    topic: str
    window_start_ms: int
    window_ms: int
    expected: int
    loaded: int
    malformed: int
    missing: int
    duplicate: int
    late: int
    status: WindowStatus
    tiers: Mapping[str, TierCounts] = field(default_factory=dict)
    #: the producer tier's count per producing host
    hosts: Mapping[str, int] = field(default_factory=dict)
    first_complete_at_ms: int | None = None
    allowed: int = 0
    #: the load-tier event with the highest manifest sequence: that manifest and its run
    last_load_sequence: int = 0
    last_load_run_id: str = ""

    @property
    def window_end_ms(self) -> int:
        return self.window_start_ms + self.window_ms

    @property
    def received(self) -> int:
        return self.loaded + self.malformed

    @property
    def expected_bytes(self) -> int:
        return self.tiers.get("producer", TierCounts()).bytes

    @property
    def missing_timestamp(self) -> dict[str, int]:
        return {tier: counts.missing_timestamp for tier, counts in self.tiers.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "window_start": utc_text(self.window_start_ms),
            "window_start_ms": self.window_start_ms,
            "window_ms": self.window_ms,
            "expected": self.expected,
            "loaded": self.loaded,
            "missing": self.missing,
            "duplicate": self.duplicate,
            "late": self.late,
            "malformed": self.malformed,
            "missing_timestamp": self.missing_timestamp,
            "expected_bytes": self.expected_bytes,
            "status": self.status,
            "first_complete_at_ms": self.first_complete_at_ms,
            "tolerance_messages": self.allowed,
            "tiers": {tier: counts.to_json() for tier, counts in self.tiers.items()},
            "hosts": dict(self.hosts),
        }


@dataclass(frozen=True)
class TopicTotals:
    """A topic's windows summed."""

    topic: str
    windows: int = 0
    expected: int = 0
    loaded: int = 0
    malformed: int = 0
    missing: int = 0
    duplicate: int = 0
    late: int = 0
    statuses: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "windows": self.windows,
            "expected": self.expected,
            "loaded": self.loaded,
            "missing": self.missing,
            "duplicate": self.duplicate,
            "late": self.late,
            "malformed": self.malformed,
            "statuses": {s: self.statuses.get(s, 0) for s in STATUSES},
        }


@dataclass(frozen=True)
class AuditReport:
    """The result of :func:`reconcile`: every window, the parameters and what the read found."""

    since_ms: int
    until_ms: int
    now_ms: int
    window_ms: int
    grace_ms: int
    tolerance: Tolerance
    topics: tuple[str, ...]
    job: str | None
    windows: tuple[WindowAudit, ...]
    events_read: int = 0
    events_unique: int = 0
    conflicts: tuple[str, ...] = ()
    unreadable: int = 0
    notes: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[WindowAudit, ...]:
        return tuple(w for w in self.windows if w.status == "INCOMPLETE")

    @property
    def ok(self) -> bool:
        """No window is INCOMPLETE (missing or duplicate beyond the tolerance after the grace period)."""
        return not self.failing

    def windows_of(self, topic: str) -> tuple[WindowAudit, ...]:
        return tuple(w for w in self.windows if w.topic == topic)

    def totals(self, topic: str) -> TopicTotals:
        windows = self.windows_of(topic)
        statuses: dict[str, int] = {}
        for w in windows:
            statuses[w.status] = statuses.get(w.status, 0) + 1
        return TopicTotals(
            topic,
            len(windows),
            sum(w.expected for w in windows),
            sum(w.loaded for w in windows),
            sum(w.malformed for w in windows),
            sum(w.missing for w in windows),
            sum(w.duplicate for w in windows),
            sum(w.late for w in windows),
            statuses,
        )

    def window(self, topic: str, window_start_ms: int) -> WindowAudit:
        """The row of ``topic`` for the window starting at ``window_start_ms`` (:class:`KeyError` if none)."""
        for w in self.windows:
            if w.topic == topic and w.window_start_ms == window_start_ms:
                return w
        raise KeyError(f"no window of {topic} starting at {utc_text(window_start_ms)} in the report")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "since": utc_text(self.since_ms),
            "since_ms": self.since_ms,
            "until": utc_text(self.until_ms),
            "until_ms": self.until_ms,
            "now_ms": self.now_ms,
            "window_ms": self.window_ms,
            "grace_ms": self.grace_ms,
            "tolerance": str(self.tolerance),
            "job": self.job,
            "topics": [self.totals(t).to_json() for t in self.topics],
            "windows": [w.to_json() for w in self.windows],
            "events": {
                "read": self.events_read,
                "unique": self.events_unique,
                "duplicates_dropped": self.events_read - self.events_unique,
                "conflicting_ids": list(self.conflicts),
                "unreadable": self.unreadable,
            },
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------- reconcile


def report_window_ms(events: Sequence[AuditEvent], window_ms: int = 0, preferred_window_ms: int = 0) -> int:
    """The report's window: ``window_ms`` if given; else ``preferred_window_ms`` (``lumber audit verify``:
    the loads' interval) when every event's window divides it; else the widest event window. Every event's
    window must divide the chosen one (raises :class:`AuditError` naming the ones that do not)."""
    widest = max((e.window_ms for e in events), default=DEFAULT_WINDOW_MS)
    if window_ms:
        chosen = window_ms
    elif preferred_window_ms and all(preferred_window_ms % e.window_ms == 0 for e in events):
        chosen = preferred_window_ms
    else:
        chosen = widest
    odd = sorted({(e.topic, e.tier, e.window_ms) for e in events if chosen % e.window_ms})
    if odd:
        listed = ", ".join(f"{topic} {tier} tier: {w} ms" for topic, tier, w in odd[:5])
        raise AuditError(
            f"audit windows do not line up: the report's window is {chosen} ms, which these events' windows "
            f"do not divide: {listed}. Use one window width everywhere ([audit] window_ms) or report in a "
            "multiple of all of them (--window)."
        )
    return chosen


def _first_complete(events: Sequence[AuditEvent], end_ms: int) -> tuple[int | None, int]:
    """T (see the module docstring) and the expected count at T (``(None, 0)`` if never complete)."""
    expected = received = 0
    passed_end = False
    ordered = sorted(events, key=lambda e: e.emitted_at_ms)
    for moment, group in itertools.groupby(ordered, key=lambda e: e.emitted_at_ms):
        if not passed_end and moment > end_ms:
            passed_end = True
            if 0 < expected <= received:
                return end_ms, expected
        for event in group:
            if event.tier == "producer":
                expected += event.count
            elif event.tier == "load":
                received += event.received
        if moment >= end_ms and 0 < expected <= received:
            return moment, expected
    if not passed_end and 0 < expected <= received:
        return end_ms, expected
    return None, 0


def _audit_window(
    topic: str,
    start_ms: int,
    window_ms: int,
    events: Sequence[AuditEvent],
    *,
    now_ms: int,
    grace_ms: int,
    tolerance: Tolerance,
) -> WindowAudit:
    tiers: dict[str, TierCounts] = {}
    hosts: dict[str, int] = {}
    for event in events:
        tiers[event.tier] = tiers.get(event.tier, TierCounts()).plus(event)
        if event.tier == "producer":
            hosts[event.host] = hosts.get(event.host, 0) + event.count
    producer = tiers.get("producer", TierCounts())
    load = tiers.get("load", TierCounts())
    expected = producer.count
    received = load.count + load.malformed
    missing = max(0, expected - received)
    duplicate = max(0, received - expected)
    end_ms = start_ms + window_ms
    complete_at, expected_then = _first_complete(events, end_ms)
    late = 0
    if complete_at is not None:
        after = sum(e.received for e in events if e.tier == "load" and e.emitted_at_ms > complete_at)
        late = min(after, max(0, expected - expected_then))
    allowed = tolerance.allowed(expected)
    status: WindowStatus
    if now_ms < end_ms:
        status = "OPEN"
    elif missing <= allowed and duplicate <= allowed:
        status = "COMPLETE"
    elif now_ms < end_ms + grace_ms:
        status = "OPEN"
    else:
        status = "INCOMPLETE"
    ordered_tiers: dict[str, TierCounts] = {t: tiers[t] for t in TIERS if t in tiers}
    last_load = max((e for e in events if e.tier == "load"), key=lambda e: e.sequence, default=None)
    return WindowAudit(
        topic=topic,
        window_start_ms=start_ms,
        window_ms=window_ms,
        expected=expected,
        loaded=load.count,
        malformed=load.malformed,
        missing=missing,
        duplicate=duplicate,
        late=late,
        status=status,
        tiers=ordered_tiers,
        hosts=dict(sorted(hosts.items())),
        first_complete_at_ms=complete_at,
        allowed=allowed,
        last_load_sequence=0 if last_load is None else last_load.sequence,
        last_load_run_id="" if last_load is None else last_load.counter,
    )


def reconcile(
    events: Iterable[AuditEvent],
    *,
    since_ms: int,
    until_ms: int,
    now_ms: int,
    grace_ms: int = 3_600_000,
    tolerance: Tolerance | None = None,
    topics: Sequence[str] = (),
    job: str | None = None,
    window_ms: int = 0,
    preferred_window_ms: int = 0,
    unreadable: int = 0,
) -> AuditReport:
    """Reconcile ``events`` (see the module docstring). ``topics`` empty: every topic the events mention;
    ``job`` ``None``: every load job's events; the window: :func:`report_window_ms`."""
    if until_ms <= since_ms:
        raise AuditError(
            f"the audit range is empty: until {utc_text(until_ms)} is not after since {utc_text(since_ms)}"
        )
    tolerance = tolerance or Tolerance()
    unique = dedupe(events)
    wanted = set(topics)
    selected = [
        e
        for e in unique.events
        if (not wanted or e.topic in wanted) and (e.tier != "load" or job is None or e.job in (job, None))
    ]
    width = report_window_ms(selected, window_ms, preferred_window_ms)
    buckets: dict[tuple[str, int], list[AuditEvent]] = {}
    for event in selected:
        start = window_start(event.window_start_ms, width)
        if since_ms <= start < until_ms:
            buckets.setdefault((event.topic, start), []).append(event)
    windows = tuple(
        _audit_window(topic, start, width, bucket, now_ms=now_ms, grace_ms=grace_ms, tolerance=tolerance)
        for (topic, start), bucket in sorted(buckets.items())
    )
    report_topics = tuple(topics) if topics else tuple(sorted({t for t, _ in buckets}))
    notes: list[str] = []
    for topic in report_topics:
        rows = [w for w in windows if w.topic == topic]
        if not rows:
            notes.append(f"{topic}: no audit events for windows in this range")
        elif not any("producer" in w.tiers for w in rows):
            notes.append(
                f"{topic}: no producer-tier events in this range, so nothing is expected: are its producers "
                "audited ([producer] audit_interval_ms)?"
            )
        elif not any("load" in w.tiers for w in rows):
            notes.append(
                f"{topic}: no load-tier events in this range"
                + (f" from job {job!r}" if job else "")
                + ": not loaded yet, or [audit] publish_load_counts is off"
            )
    if unique.conflicts:
        notes.append(
            f"{len(unique.conflicts)} event ids came with different counts (the first copy was used): "
            + ", ".join(unique.conflicts[:3])
        )
    if unreadable:
        notes.append(f"{unreadable} records of the audit topic are not audit events (skipped)")
    return AuditReport(
        since_ms=since_ms,
        until_ms=until_ms,
        now_ms=now_ms,
        window_ms=width,
        grace_ms=grace_ms,
        tolerance=tolerance,
        topics=report_topics,
        job=job,
        windows=windows,
        events_read=unique.read,
        events_unique=len(unique.events),
        conflicts=unique.conflicts,
        unreadable=unreadable,
        notes=tuple(notes),
    )
