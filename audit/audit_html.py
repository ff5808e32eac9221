"""An :class:`~audit.audit_report.AuditReport` as one self-contained HTML page, with a chart per topic.

The page has the verdict, then per topic: the totals, a chart (PNG drawn with matplotlib, embedded as a
``data:`` URL, so the file can be mailed or archived alone) and the table of windows, statuses coloured.

The chart (:func:`completeness_chart_png`) has two panels sharing the time axis, one group per hour (per day
when the range holds more than :data:`MAX_HOURS` hours with data; hours without data are left out, and a
dotted line marks where time jumps):

* **messages per tier**: the producer tier's count (expected) beside the load tier's committed rows with its
  malformed records stacked on them (and the mirror tier's count when there is one);
* **completeness per tier**: what each tier after the producer accounted for (the load: rows plus
  malformed), as a percentage of the producer tier's count, against a 100 % line; a point is green on
  100 %, red below, amber above, and labelled with its percentage and the missing or duplicate count.
  The late part of the load's rows is hatched in the first panel.

matplotlib is used through its object API (``Figure``, the Agg canvas): no global pyplot state, safe in
threads.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from audit.audit_report import AuditReport, WindowAudit, duration_text, utc_text

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
#: Above this many hours with data, the chart groups by day.
MAX_HOURS = 48

_COLORS = {
    "producer": "#4C72B0",
    "load": "#55A868",
    "malformed": "#DD8452",
    "mirror": "#8172B3",
    "ok": "#2E8B57",
    "low": "#C44E52",
    "high": "#E1A100",
}


@dataclass
class _Bucket:
    start_ms: int
    expected: int = 0
    loaded: int = 0
    malformed: int = 0
    mirror: int = 0
    missing: int = 0
    duplicate: int = 0
    late: int = 0
    statuses: set[str] = field(default_factory=set)


def _buckets(windows: tuple[WindowAudit, ...]) -> tuple[list[_Bucket], int]:
    hours = {w.window_start_ms - w.window_start_ms % HOUR_MS for w in windows}
    width = HOUR_MS if len(hours) <= MAX_HOURS else DAY_MS
    width = max(width, max((w.window_ms for w in windows), default=HOUR_MS))
    found: dict[int, _Bucket] = {}
    for w in windows:
        start = w.window_start_ms - w.window_start_ms % width
        bucket = found.setdefault(start, _Bucket(start))
        bucket.expected += w.expected
        bucket.loaded += w.loaded
        bucket.malformed += w.malformed
        bucket.mirror += w.tiers["mirror"].count if "mirror" in w.tiers else 0
        bucket.missing += w.missing
        bucket.duplicate += w.duplicate
        bucket.late += w.late
        bucket.statuses.add(w.status)
    return [found[k] for k in sorted(found)], width


def _label(start_ms: int, width_ms: int) -> str:
    text = utc_text(start_ms)  # YYYY-MM-DD HH:MM
    if width_ms >= DAY_MS:
        return text[:10]
    return f"{text[5:10]}\n{text[11:13]}h"


def _share(received: int, expected: int) -> float:
    return 100.0 * received / expected


def completeness_chart_png(report: AuditReport, topic: str) -> bytes:
    """The chart of ``topic`` (see the module docstring) as PNG bytes."""
    buckets, width = _buckets(report.windows_of(topic))
    n = max(1, len(buckets))
    figure = Figure(figsize=(min(16.0, max(7.5, 0.8 * n + 3.0)), 6.6), dpi=110, layout="constrained")
    counts_axes, share_axes = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    positions = list(range(len(buckets)))
    has_mirror = any(b.mirror for b in buckets)
    bar = 0.36 if not has_mirror else 0.26
    unit = "hour" if width < DAY_MS else "day"

    # panel 1: messages per tier; the late part of the load's rows hatched
    expected = [b.expected for b in buckets]
    loaded = [b.loaded for b in buckets]
    malformed = [b.malformed for b in buckets]
    late = [min(b.late, b.loaded) for b in buckets]
    offset = bar / 2 if not has_mirror else bar
    left = [p - offset for p in positions]
    middle = [p + (bar / 2 if not has_mirror else 0.0) for p in positions]
    counts_axes.bar(left, expected, bar, color=_COLORS["producer"], label="producer tier (expected)")
    counts_axes.bar(middle, loaded, bar, color=_COLORS["load"], label="load tier: rows committed")
    if any(late):
        counts_axes.bar(
            middle,
            late,
            bar,
            bottom=[a - b for a, b in zip(loaded, late, strict=True)],
            color=_COLORS["load"],
            hatch="///",
            edgecolor="white",
            linewidth=0,
            label="of which late",
        )
    if any(malformed):
        counts_axes.bar(
            middle, malformed, bar, bottom=loaded, color=_COLORS["malformed"], label="load tier: malformed"
        )
    if has_mirror:
        counts_axes.bar(
            [p + bar for p in positions],
            [b.mirror for b in buckets],
            bar,
            color=_COLORS["mirror"],
            label="mirror tier",
        )
    counts_axes.set_ylabel("messages")
    counts_axes.set_title(f"{topic}: messages per {unit} and tier (UTC)", loc="left", fontsize=11)
    counts_axes.legend(loc="upper right", fontsize=8, frameon=False)
    top = max([*expected, *(a + b for a, b in zip(loaded, malformed, strict=True)), 1])
    counts_axes.set_ylim(0, top * 1.3)
    counts_axes.grid(axis="y", alpha=0.3)

    # panel 2: completeness per tier, as a share of the producer tier's count
    tiers: list[tuple[str, list[int], str]] = [("load", [b.loaded + b.malformed for b in buckets], "o")]
    if has_mirror:
        tiers.append(("mirror", [b.mirror for b in buckets], "s"))
    shares = [
        _share(r, b.expected)
        for _, received, _ in tiers
        for r, b in zip(received, buckets, strict=True)
        if b.expected
    ]
    lowest = min(shares, default=100.0)
    low_limit = min(90.0, lowest - 15.0) if lowest >= 15.0 else -8.0  # a point at 0 % stays visible
    high_limit = max(118.0, max(shares, default=100.0) * 1.08 + 20.0)  # room for the labels above
    share_axes.axhline(100.0, color="#888888", linewidth=1, linestyle="--", zorder=1)
    for name, received, marker in tiers:
        shift = 0.0 if not has_mirror else (-0.12 if name == "load" else 0.12)
        for x, r, bucket in zip(positions, received, buckets, strict=True):
            if bucket.expected == 0:
                if name != "load":
                    continue
                share_axes.annotate(
                    "nothing expected", (x, 100.0), ha="center", va="bottom", fontsize=7, color="#777777"
                )
                continue
            y = _share(r, bucket.expected)
            state = "ok" if r == bucket.expected else ("low" if r < bucket.expected else "high")
            share_axes.scatter(
                [x + shift], [y], s=60, marker=marker, color=_COLORS[state], zorder=3, edgecolors="white"
            )
            text = f"{y:.0f}%" if abs(y - round(y)) < 0.05 else f"{y:.1f}%"
            if name == "load":
                if bucket.missing:
                    text += f"\n-{bucket.missing} missing"
                if bucket.duplicate:
                    text += f"\n+{bucket.duplicate} duplicate"
            share_axes.annotate(
                text,
                (x + shift, y),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                va="bottom",
                fontsize=8,
                color=_COLORS[state] if state != "ok" else "#333333",
            )
    share_axes.set_ylim(low_limit, high_limit)
    share_axes.set_yticks([t for t in share_axes.get_yticks() if 0 <= t <= high_limit])
    share_axes.set_ylim(low_limit, high_limit)
    if has_mirror:
        share_axes.legend(
            handles=[
                Line2D([], [], linestyle="", marker=marker, color="#555555", label=f"{name} tier")
                for name, _, marker in tiers
            ],
            loc="best",
            fontsize=7,
            frameon=False,
        )
    share_axes.set_ylabel("% of expected")
    share_axes.set_title(
        "completeness per tier: (rows + malformed) / expected; green = 100 %, red below, amber above",
        loc="left",
        fontsize=9,
        color="#444444",
    )
    share_axes.grid(axis="y", alpha=0.3)
    for index in range(1, len(buckets)):  # hours without data are left out: mark where time jumps
        if buckets[index].start_ms - buckets[index - 1].start_ms > width:
            for axes in (counts_axes, share_axes):
                axes.axvline(index - 0.5, color="#bbbbbb", linewidth=1, linestyle=":")
    share_axes.set_xticks(positions, [_label(b.start_ms, width) for b in buckets], fontsize=8)
    share_axes.set_xlim(-0.7, max(0.7, len(buckets) - 0.3))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 2em; }
.params { color: #555; margin-bottom: 1em; }
.verdict { display: inline-block; padding: 0.4em 0.9em; border-radius: 4px; font-weight: 600; }
.verdict.ok { background: #e3f4ea; color: #1d6b3f; } .verdict.failed { background: #fbe4e4; color: #9b1c1c; }
.totals span { display: inline-block; margin-right: 1.4em; } .totals b { font-size: 1.1em; }
table { border-collapse: collapse; margin-top: 0.8em; font-size: 0.9em; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th { background: #f5f5f5; } td.window, th.window { text-align: left; font-family: monospace; }
td.COMPLETE { color: #1d6b3f; font-weight: 600; } td.INCOMPLETE { color: #9b1c1c; font-weight: 600; }
td.OPEN { color: #8a6d00; font-weight: 600; } td.flag { background: #fff3cd; }
img { max-width: 100%; border: 1px solid #eee; }
.notes li, .legend li { margin: 0.2em 0; } .legend { color: #555; font-size: 0.9em; }
"""

_LEGEND = (
    ("expected", "messages the producers' brokers confirmed (producer tier)"),
    ("loaded", "rows the load committed (load tier)"),
    ("missing", "expected minus loaded minus malformed, when positive"),
    ("duplicate", "loaded plus malformed minus expected, when positive"),
    ("late", "loaded after the window was first complete, for messages produced after that"),
    ("malformed", "records the load quarantined (in its _errors dataset: accounted for, not lost)"),
    ("no ts", "messages without a timestamp, in the window where they were counted (not compared)"),
    ("status", "COMPLETE within the tolerance; OPEN before the window's end plus the grace; else INCOMPLETE"),
)


def _cell(value: int, flag: bool = False) -> str:
    return f'<td class="flag">{value}</td>' if flag and value else f"<td>{value}</td>"


def render_html(report: AuditReport) -> str:
    """The report as a self-contained HTML page (see the module docstring)."""
    esc = html.escape
    failing = report.failing
    verdict = (
        f'<span class="verdict failed">FAILED: {len(failing)} windows INCOMPLETE</span>'
        if failing
        else '<span class="verdict ok">OK: no window beyond the tolerance</span>'
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Lumber audit {esc(utc_text(report.since_ms))} to {esc(utc_text(report.until_ms))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Lumber audit: producers against loads</h1>",
        f'<div class="params">{esc(utc_text(report.since_ms))} to {esc(utc_text(report.until_ms))} UTC; '
        f"windows of {duration_text(report.window_ms)}; grace {duration_text(report.grace_ms)}; tolerance "
        f"{esc(str(report.tolerance))}"
        + (f"; load job {esc(report.job)}" if report.job else "")
        + f"; {report.events_unique} events ({report.events_read - report.events_unique} repeats dropped); "
        f"evaluated at {esc(utc_text(report.now_ms, seconds=True))} UTC</div>",
        verdict,
    ]
    for topic in report.topics:
        totals = report.totals(topic)
        windows = report.windows_of(topic)
        parts.append(f"<h2>{esc(topic)}</h2>")
        if not windows:
            parts.append("<p>No audit events in this range.</p>")
            continue
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(totals.statuses.items()))
        parts.append(
            '<div class="totals">'
            + "".join(
                f"<span>{name} <b>{value}</b></span>"
                for name, value in (
                    ("expected", totals.expected),
                    ("loaded", totals.loaded),
                    ("missing", totals.missing),
                    ("duplicate", totals.duplicate),
                    ("late", totals.late),
                    ("malformed", totals.malformed),
                )
            )
            + f"<span>{esc(statuses)}</span></div>"
        )
        png = base64.b64encode(completeness_chart_png(report, topic)).decode("ascii")
        parts.append(
            f'<p><img alt="messages and completeness per hour and tier of {esc(topic)}" '
            f'src="data:image/png;base64,{png}"></p>'
        )
        parts.append(
            "<table><tr><th class=window>window (UTC)</th><th>expected</th><th>loaded</th>"
            "<th>missing</th><th>duplicate</th><th>late</th><th>malformed</th><th>no ts</th><th>hosts</th>"
            "<th>status</th></tr>"
        )
        for w in windows:
            hosts = ", ".join(f"{host} {count}" for host, count in w.hosts.items())
            parts.append(
                f"<tr><td class=window>{esc(utc_text(w.window_start_ms))}</td>"
                + _cell(w.expected)
                + _cell(w.loaded)
                + _cell(w.missing, True)
                + _cell(w.duplicate, True)
                + _cell(w.late, True)
                + _cell(w.malformed, True)
                + _cell(sum(w.missing_timestamp.values()), True)
                + f'<td style="text-align:left">{esc(hosts)}</td>'
                + f'<td class="{w.status}">{w.status}</td></tr>'
            )
        parts.append("</table>")
    if report.notes:
        parts.append('<h2>Notes</h2><ul class="notes">')
        parts.extend(f"<li>{esc(note)}</li>" for note in report.notes)
        parts.append("</ul>")
    parts.append('<h2>Columns</h2><ul class="legend">')
    parts.extend(f"<li><b>{esc(name)}</b>: {esc(text)}</li>" for name, text in _LEGEND)
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
