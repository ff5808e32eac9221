"""An :class:`~audit.audit_report.AuditReport` as a terminal table: a block per topic, a line per window."""

from __future__ import annotations

from audit.audit_report import AuditReport, WindowAudit, duration_text, utc_text

_COLUMNS = (
    ("window (UTC)", 16, "<"),
    ("expected", 9, ">"),
    ("loaded", 9, ">"),
    ("missing", 8, ">"),
    ("duplicate", 9, ">"),
    ("late", 6, ">"),
    ("malformed", 9, ">"),
    ("no ts", 6, ">"),
    ("status", 10, "<"),
)


def _row(cells: list[str]) -> str:
    return "  ".join(
        f"{cell:{align}{width}}" for (_, width, align), cell in zip(_COLUMNS, cells, strict=True)
    ).rstrip()


def _window_cells(w: WindowAudit) -> list[str]:
    no_timestamp = sum(w.missing_timestamp.values())
    return [
        utc_text(w.window_start_ms),
        str(w.expected),
        str(w.loaded),
        str(w.missing),
        str(w.duplicate),
        str(w.late),
        str(w.malformed),
        str(no_timestamp),
        w.status,
    ]


def render_text(report: AuditReport, window_source: str = "") -> str:
    """The report as aligned text (what ``lumber audit verify`` prints); ``window_source`` says where the
    window width came from (in the header, after the width)."""
    lines = [
        f"audit {utc_text(report.since_ms)} .. {utc_text(report.until_ms)} UTC, windows of "
        f"{duration_text(report.window_ms)}"
        + (f" ({window_source})" if window_source else "")
        + f", grace {duration_text(report.grace_ms)}, "
        f"tolerance {report.tolerance}"
        + (f", load job {report.job!r}" if report.job else "")
        + f"; {report.events_unique} events ({report.events_read - report.events_unique} repeats dropped)",
    ]
    header = _row([name for name, _, _ in _COLUMNS])
    for topic in report.topics:
        windows = report.windows_of(topic)
        totals = report.totals(topic)
        lines.append("")
        lines.append(f"topic {topic}")
        if not windows:
            lines.append("  no audit events in this range")
            continue
        lines.append("  " + header)
        lines.extend("  " + _row(_window_cells(w)) for w in windows)
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(totals.statuses.items()))
        lines.append(
            "  "
            + _row(
                [
                    "total",
                    str(totals.expected),
                    str(totals.loaded),
                    str(totals.missing),
                    str(totals.duplicate),
                    str(totals.late),
                    str(totals.malformed),
                    str(sum(sum(w.missing_timestamp.values()) for w in windows)),
                    statuses,
                ]
            )
        )
    if not report.topics:
        lines.append("")
        lines.append("no audit events for windows in this range (for any topic)")
    lines.extend(f"note: {note}" for note in report.notes)
    failing = report.failing
    lines.append("")
    if failing:
        lines.append(
            f"FAILED: {len(failing)} windows INCOMPLETE beyond the tolerance after the grace period: "
            + ", ".join(f"{w.topic} {utc_text(w.window_start_ms)}" for w in failing[:5])
            + (" ..." if len(failing) > 5 else "")
        )
    else:
        opened = sum(1 for w in report.windows if w.status == "OPEN")
        lines.append("OK" + (f" ({opened} windows still OPEN)" if opened else ""))
    return "\n".join(lines) + "\n"
