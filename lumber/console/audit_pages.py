"""The audit: ``/audit`` (a topic x hour heatmap of completeness per tier) and ``/audit/{topic}/{start_ms}``
(one window's expected / loaded / missing / duplicate / late / malformed counts and status).

Both read every event of the audit topic (:func:`audit.audit_reader.read_audit_events`) and reconcile
them with :func:`audit.audit_report.reconcile`, exactly as ``lumber audit verify`` does: the console draws the
report, it does not count anything itself. Parameters: ``since``/``until`` (ms or ISO 8601 UTC; default the
last 24 whole hours), ``window`` (a duration, default ``1h``: the heatmap's columns), ``job`` (default
``[load] job``; ``*`` for every job), ``topic`` (repeatable; default every topic the events mention).

The heatmap has three rows per topic, one per tier: *producer* (shaded by how many messages were counted),
*mirror* and *load* (coloured by received / expected: green when equal, red when short, purple when over);
a load cell whose window is INCOMPLETE is red whatever its ratio, one whose window is still OPEN (within its
grace period: more may arrive) amber whatever its ratio, and every cell links to its window. A legend under
the heatmap names every colour. ``now`` (ms or ISO 8601 UTC, default now) evaluates the grace period as of
that time, as ``lumber audit verify --now`` does.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import AuditRead, read_audit_events
from audit.audit_report import AuditReport, WindowAudit, reconcile, utc_text
from audit.audit_tolerance import Tolerance
from audit.errors import AuditError
from lumber.console.errors import BadRequestError, NotFoundError
from lumber.console.page import esc, form, link, num, pretty_json, respond, table, url
from lumber.console.params import parse_moment_ms
from lumber.console.sources import Sources, request_sources
from lumber.console.svg import EMPTY_COLOR, STATUS_COLORS, Cell, completeness_color, heatmap
from pipeline.durations import DurationError, parse_duration_ms

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]
HOUR_MS = 3_600_000
MAX_COLUMNS = 24 * 14
ALL_JOBS = "*"
#: the heatmap's rows per topic, in the order the messages travel
TIERS = ("producer", "mirror", "load")


class _Query:
    """The page's parameters, checked."""

    def __init__(
        self,
        sources: Sources,
        since: str | None,
        until: str | None,
        window: str,
        job: str | None,
        topics: list[str],
        now: str | None = None,
    ) -> None:
        self.now_ms = parse_moment_ms(now, "now") if now else time.time_ns() // 1_000_000
        try:
            self.window_ms = parse_duration_ms(window, "window")
        except DurationError as exc:
            raise BadRequestError(f"parameter window={window!r}: {exc}") from exc
        if self.window_ms <= 0:
            raise BadRequestError(f"parameter window={window!r}: must be longer than 0")
        self.until_ms = parse_moment_ms(until, "until") if until else self.now_ms
        if since:
            self.since_ms = parse_moment_ms(since, "since")
        else:
            self.since_ms = self.until_ms - 24 * HOUR_MS
            self.since_ms -= self.since_ms % HOUR_MS
        if self.until_ms <= self.since_ms:
            raise BadRequestError(
                f"until ({utc_text(self.until_ms)}) must be after since ({utc_text(self.since_ms)})"
            )
        if (self.until_ms - self.since_ms) // self.window_ms > MAX_COLUMNS:
            raise BadRequestError(
                f"the range {utc_text(self.since_ms)} .. {utc_text(self.until_ms)} holds more than "
                f"{MAX_COLUMNS} windows of {window}: narrow it or widen the window"
            )
        self.job = job or sources.config.load.job
        self.topics = topics
        self.raw = {"since": since, "until": until, "window": window, "job": job, "now": now}

    def params(self) -> dict[str, object]:
        return {k: v for k, v in self.raw.items() if v}


def _read(sources: Sources) -> tuple[AuditRead | None, str | None]:
    config = sources.config
    codec = AuditEventCodec(sources.registry_client(), config.audit.topic)
    try:
        return read_audit_events(sources.consumer_settings(), codec, topic=config.audit.topic), None
    except AuditError as exc:
        return None, str(exc)
    finally:
        codec.close()


def _report(sources: Sources, query: _Query) -> tuple[AuditReport, str | None]:
    read, problem = _read(sources)
    audit = sources.config.audit
    try:
        report = reconcile(
            read.events if read else (),
            since_ms=query.since_ms,
            until_ms=query.until_ms,
            now_ms=query.now_ms,
            grace_ms=audit.grace_ms,
            tolerance=Tolerance.parse(audit.tolerance, "audit.tolerance"),
            topics=query.topics,
            job=None if query.job == ALL_JOBS else query.job,
            window_ms=query.window_ms,
            unreadable=read.unreadable if read else 0,
        )
    except AuditError as exc:
        raise BadRequestError(str(exc)) from exc
    return report, problem


#: What each colour of the heatmap means (its cells' colours come from :mod:`lumber.console.svg`).
LEGEND = (
    '<p class="legend" id="legend">'
    + "".join(
        f'<span style="background:{color}" data-legend="{name}">{description}</span>'
        for name, color, description in (
            ("producer", "#4f7cc4", "producer: messages counted"),
            ("COMPLETE", STATUS_COLORS["COMPLETE"], "COMPLETE: all expected arrived"),
            ("OPEN", STATUS_COLORS["OPEN"], "OPEN: within the grace period, more may arrive"),
            ("INCOMPLETE", STATUS_COLORS["INCOMPLETE"], "INCOMPLETE: missing after the grace period"),
            ("short", completeness_color(1, 2), "mirror short of expected"),
            ("over", completeness_color(3, 2), "more than expected (duplicates)"),
            ("none", EMPTY_COLOR, "no events"),
        )
    )
    + "</p>"
)


def _cell(w: WindowAudit, tier: str, target: str) -> Cell | None:
    counts = w.tiers.get(tier)
    if tier == "producer":
        if counts is None:
            return None
        return Cell(
            "#4f7cc4", f"{w.topic} {utc_text(w.window_start_ms)} producer: {counts.count} counted", target
        )
    received = 0 if counts is None else counts.count + counts.malformed
    if tier == "load":
        color = (
            STATUS_COLORS[w.status]
            if w.status in ("INCOMPLETE", "OPEN")
            else completeness_color(received, w.expected)
        )
        tip = (
            f"{w.topic} {utc_text(w.window_start_ms)} load: {w.status}, expected {w.expected}, "
            f"loaded {w.loaded}, malformed {w.malformed}, missing {w.missing}, duplicate {w.duplicate}, "
            f"late {w.late}"
        )
        return Cell(color, tip, target, w.status)
    if counts is None:
        return None
    tip = f"{w.topic} {utc_text(w.window_start_ms)} {tier}: {received} of {w.expected} expected"
    return Cell(completeness_color(received, w.expected), tip, target)


@router.get("/audit")
def audit_page(
    request: Request,
    sources: SourcesDep,
    since: str | None = None,
    until: str | None = None,
    window: str = "1h",
    job: str | None = None,
    topic: Annotated[list[str] | None, Query()] = None,
    now: str | None = None,
) -> Response:
    query = _Query(sources, since, until, window, job, topic or [], now)
    report, problem = _report(sources, query)
    first = query.since_ms - query.since_ms % report.window_ms
    columns = list(range(first, query.until_ms, report.window_ms))
    rows = [f"{t} · {tier}" for t in report.topics for tier in TIERS]
    cells: dict[tuple[int, int], Cell] = {}
    index = {start: c for c, start in enumerate(columns)}
    for t_index, t in enumerate(report.topics):
        for w in report.windows_of(t):
            c = index.get(w.window_start_ms)
            if c is None:
                continue
            target = url(f"/audit/{t}/{w.window_start_ms}", **query.params())
            for tier_index, tier in enumerate(TIERS):
                cell = _cell(w, tier, target)
                if cell is not None:
                    cells[(t_index * len(TIERS) + tier_index, c)] = cell
    labels = [utc_text(s)[5:] for s in columns]
    picker = form(
        "/audit",
        {
            "since": ("since", query.raw["since"] or utc_text(query.since_ms).replace(" ", "T")),
            "until": ("until", query.raw["until"] or ""),
            "window": ("window", window),
            "job": ("job (* = all)", query.job),
        },
    )
    failing = report.failing
    parts = [
        picker,
        f"<p>Job {esc(query.job)}, window {esc(window)}, grace {report.grace_ms // 60_000} min, tolerance "
        f"{esc(report.tolerance)}; {report.events_unique} events; "
        + (
            f'<b class="error">{len(failing)} INCOMPLETE windows</b>'
            if failing
            else '<b class="ok">no INCOMPLETE window</b>'
        )
        + "</p>",
    ]
    if problem:
        parts.append(f'<p class="warn">{esc(problem)}</p>')
    parts.extend(f'<p class="muted">{esc(note)}</p>' for note in report.notes)
    parts.append(heatmap(rows, labels, cells) + LEGEND if rows else "<p>No audit events in this range.</p>")
    parts.append("<h2>Windows</h2>")
    parts.append(_windows_table(report.windows, query))
    data = {**report.to_json(), "problem": problem}
    return respond(request, "Audit", "".join(parts), data)


def _windows_table(windows: tuple[WindowAudit, ...], query: _Query) -> str:
    return table(
        (
            "topic",
            "window (UTC)",
            "expected",
            "loaded",
            "missing",
            "duplicate",
            "late",
            "malformed",
            "status",
        ),
        (
            [
                esc(w.topic),
                link(f"/audit/{w.topic}/{w.window_start_ms}", utc_text(w.window_start_ms), **query.params()),
                num(w.expected),
                num(w.loaded),
                num(w.missing),
                num(w.duplicate),
                num(w.late),
                num(w.malformed),
                esc(w.status),
            ]
            for w in windows
        ),
        ["bad" if w.status == "INCOMPLETE" else "" for w in windows],
    )


@router.get("/audit/{topic}/{window_start_ms}")
def window_page(
    request: Request,
    sources: SourcesDep,
    topic: str,
    window_start_ms: int,
    since: str | None = None,
    until: str | None = None,
    window: str = "1h",
    job: str | None = None,
) -> Response:
    query = _Query(sources, since, until, window, job, [topic])
    report, _ = _report(sources, query)
    try:
        found = report.window(topic, window_start_ms)
    except KeyError as exc:
        raise NotFoundError(
            f"no audit window of topic {topic!r} starting at {window_start_ms} ({utc_text(window_start_ms)}) "
            f"in {utc_text(query.since_ms)} .. {utc_text(query.until_ms)} with {window} windows"
        ) from exc
    body = (
        f"<p>{link('/audit', 'Back to the heatmap', **query.params())}</p>"
        + _windows_table((found,), query)
        + "<h2>Per tier</h2>"
        + table(
            ("tier", "count", "bytes", "malformed", "missing timestamp", "events"),
            (
                [
                    esc(tier),
                    num(c.count),
                    num(c.bytes),
                    num(c.malformed),
                    num(c.missing_timestamp),
                    num(c.events),
                ]
                for tier, c in found.tiers.items()
            ),
        )
        + "<h2>Producer hosts</h2>"
        + table(("host", "count"), ([esc(h), num(n)] for h, n in found.hosts.items()))
        + "<h2>JSON</h2>"
        + pretty_json(found.to_json())
    )
    return respond(
        request, f"Audit {topic} {utc_text(window_start_ms)} ({found.status})", body, found.to_json()
    )
