"""An :class:`~pipeline.audit.AuditReport` as one self-contained HTML page, with a chart per topic.

The page has the verdict, then per topic: the totals, a chart (PNG drawn with matplotlib, embedded as a
``data:`` URL, so the file can be mailed or archived alone) and the table of windows, statuses coloured.

The chart (:func:`completeness_chart_png`) has two panels sharing the time axis, one group per hour (per day
when the range holds more than :data:`MAX_HOURS` hours with data):

* **messages per tier**: the producer tier's count (expected) beside the load tier's committed rows with its
  malformed records stacked on them (and the mirror tier's count when there is one);
* **completeness per tier**: what each tier after the producer accounted for, as a percentage of the
  producer tier's count, against a 100 % line; a point is green on 100 %, red below, amber above, and
  labelled with the missing (``-n``) or duplicate (``+n``) count. Late messages are marked under the axis.

matplotlib is used through its object API (``Figure``, the Agg canvas): no global pyplot state, safe in
threads.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field

from matplotlib.figure import Figure

from pipeline.audit import AuditReport, WindowAudit, utc_text

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


def completeness_chart_png(report: AuditReport, topic: str) -> bytes:
    """The chart of ``topic`` (see the module docstring) as PNG bytes."""
    buckets, width = _buckets(report.windows_of(topic))
    n = max(1, len(buckets))
    figure = Figure(figsize=(min(16.0, max(7.0, 0.7 * n + 2.5)), 6.4), dpi=110, layout="constrained")
    counts_axes, share_axes = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    positions = list(range(len(buckets)))
    has_mirror = any(b.mirror for b in buckets)
    bar = 0.38 if not has_mirror else 0.27

    # panel 1: messages per tier
    expected = [b.expected for b in buckets]
    loaded = [b.loaded for b in buckets]
    malformed = [b.malformed for b in buckets]
    left = [p - bar / 2 if not has_mirror else p - bar for p in positions]
    right = [p + bar / 2 if not has_mirror else p for p in positions]
    counts_axes.bar(left, expected, bar, color=_COLORS["producer"], label="producer tier (expected)")
    counts_axes.bar(right, loaded, bar, color=_COLORS["load"], label="load tier: rows committed")
    counts_axes.bar(
        right, malformed, bar, bottom=loaded, color=_COLORS["malformed"], label="load tier: malformed"
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
    counts_axes.set_title(
        f"{topic}: messages per {'hour' if width < DAY_MS else 'day'} and tier (UTC)", loc="left", fontsize=11
    )
    counts_axes.legend(loc="upper left", fontsize=8, ncols=4 if has_mirror else 3, frameon=False)
    top = max([*expected, *(a + b for a, b in zip(loaded, malformed, strict=True)), 1])
    counts_axes.set_ylim(0, top * 1.25)
    counts_axes.grid(axis="y", alpha=0.3)

    # panel 2: completeness per tier, as a share of the producer tier's count
    tiers = [("load", [b.loaded + b.malformed for b in buckets], _COLORS["load"])]
    if has_mirror:
        tiers.append(("mirror", [b.mirror for b in buckets], _COLORS["mirror"]))
    peak = 100.0
    for name, received, color in tiers:
        xs = [p for p, b in zip(positions, buckets, strict=True) if b.expected > 0]
        ys = [100.0 * r / b.expected for r, b in zip(received, buckets, strict=True) if b.expected > 0]
        share_axes.plot(xs, ys, color=color, alpha=0.45, linewidth=1.5, label=f"{name} tier")
        for x, y in zip(xs, ys, strict=True):
            state = "ok" if abs(y - 100.0) < 1e-9 else ("low" if y < 100 else "high")
            share_axes.scatter([x], [y], s=46, color=_COLORS[state], zorder=3, edgecolors="white")
            peak = max(peak, y)
        if name == "load":
            for bucket, x in zip(buckets, positions, strict=True):
                if bucket.expected == 0:
                    continue
                y = 100.0 * (bucket.loaded + bucket.malformed) / bucket.expected
                note = []
                if bucket.missing:
                    note.append(f"-{bucket.missing} missing")
                if bucket.duplicate:
                    note.append(f"+{bucket.duplicate} dup")
                if note:
                    share_axes.annotate(
                        "\n".join(note),
                        (x, y),
                        textcoords="offset points",
                        xytext=(0, -22 if y < 100 else 8),
                        ha="center",
                        fontsize=8,
                        color=_COLORS["low"] if bucket.missing else _COLORS["high"],
                    )
                if bucket.late:
                    share_axes.annotate(
                        f"{bucket.late} late",
                        (x, 0),
                        xycoords=("data", "axes fraction"),
                        textcoords="offset points",
                        xytext=(0, 4),
                        ha="center",
                        fontsize=8,
                        color="#555555",
                    )
    share_axes.axhline(100.0, color="#888888", linewidth=1, linestyle="--")
    lowest = min(
        [100.0]
        + [100.0 * (b.loaded + b.malformed) / b.expected for b in buckets if b.expected > 0]
        + [100.0 * b.mirror / b.expected for b in buckets if b.expected > 0 and has_mirror]
    )
    share_axes.set_ylim(max(0.0, min(90.0, lowest - 10.0)), max(110.0, peak + 8.0))
    share_axes.set_ylabel("% of expected")
    share_axes.legend(loc="lower left", fontsize=8, frameon=False)
    share_axes.grid(axis="y", alpha=0.3)
    share_axes.set_xticks(positions, [_label(b.start_ms, width) for b in buckets], fontsize=8)
    share_axes.set_xlim(-0.6, max(0.6, len(buckets) - 0.4))
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
        f"windows of {report.window_ms // 60_000} min; grace {report.grace_ms // 60_000} min; tolerance "
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
