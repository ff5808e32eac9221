"""Charts as inline SVG, drawn on the server: the audit heatmap, horizontal bars and sparklines.

No script: a heatmap cell that leads somewhere is an SVG ``<a>``, and every cell has a ``<title>`` (the
browser's tooltip) with its figures. Text in a chart goes through :func:`~lumber.console.page.esc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lumber.console.page import esc

CELL_W = 22
CELL_H = 20
LABEL_W = 220
HEADER_H = 64
STATUS_COLORS = {"COMPLETE": "#3c9a4f", "INCOMPLETE": "#d2392f", "OPEN": "#e0a526"}
EMPTY_COLOR = "#f0f2f5"
SPARK_W = 160
SPARK_H = 28


@dataclass(frozen=True)
class Cell:
    """One heatmap cell: its colour, tooltip and optional link."""

    color: str
    tooltip: str
    url: str | None = None
    label: str = ""


def completeness_color(received: int, expected: int) -> str:
    """Green when ``received == expected``, red when short, purple when over, grey with nothing expected."""
    if expected <= 0:
        return "#c9cfd8" if received == 0 else "#7a4fbf"
    if received > expected:
        return "#7a4fbf"
    ratio = received / expected
    if ratio >= 1:
        return "#3c9a4f"
    red = 210
    green = int(60 + 140 * ratio)
    return f"#{red:02x}{green:02x}3c"


def heatmap(rows: Sequence[str], columns: Sequence[str], cells: dict[tuple[int, int], Cell]) -> str:
    """Rows by columns; missing cells are drawn empty."""
    width = LABEL_W + CELL_W * len(columns) + HEADER_H
    height = HEADER_H + CELL_H * len(rows) + 10
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" class="heatmap">'
        )
    ]
    for c, name in enumerate(columns):
        x = LABEL_W + c * CELL_W + CELL_W // 2
        out.append(
            f'<text x="{x}" y="{HEADER_H - 6}" font-size="10" transform="rotate(-60 {x} {HEADER_H - 6})">'
            f"{esc(name)}</text>"
        )
    for r, name in enumerate(rows):
        y = HEADER_H + r * CELL_H
        out.append(f'<text x="4" y="{y + CELL_H - 6}" font-size="12">{esc(name)}</text>')
        for c in range(len(columns)):
            cell = cells.get((r, c))
            x = LABEL_W + c * CELL_W
            color = cell.color if cell else EMPTY_COLOR
            rect = (
                f'<rect x="{x}" y="{y}" width="{CELL_W - 2}" height="{CELL_H - 2}" fill="{color}"'
                + (f' data-label="{esc(cell.label)}"' if cell and cell.label else "")
                + ">"
                + (f"<title>{esc(cell.tooltip)}</title>" if cell else "")
                + "</rect>"
            )
            out.append(f'<a href="{esc(cell.url)}">{rect}</a>' if cell and cell.url else rect)
    out.append("</svg>")
    return "".join(out)


def bars(labels: Sequence[str], values: Sequence[int], unit: str = "") -> str:
    """Horizontal bars, one per label, scaled to the largest value."""
    top = max(values, default=0) or 1
    bar_w = 300
    row_h = 18
    height = row_h * len(labels) + 4
    width = LABEL_W + bar_w + 120
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = i * row_h + 2
        w = max(1, int(bar_w * value / top)) if value else 0
        out.append(f'<text x="4" y="{y + 13}" font-size="12">{esc(label)}</text>')
        out.append(f'<rect x="{LABEL_W}" y="{y}" width="{w}" height="{row_h - 4}" fill="#4f7cc4"></rect>')
        out.append(f'<text x="{LABEL_W + w + 6}" y="{y + 13}" font-size="12">{esc(value)}{esc(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def sparkline(times_ms: Sequence[int], values: Sequence[int], tooltip: str = "") -> str:
    """A small line of ``values`` over ``times_ms`` (oldest first, x spaced by time; by index when all the
    times are one), the last value marked with a dot and printed after the line; ``tooltip`` is its
    ``<title>``. With no values, an empty frame."""
    width, height, pad = SPARK_W, SPARK_H, 3
    text_w = 56
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + text_w}" height="{height}" '
            f'viewBox="0 0 {width + text_w} {height}" role="img" class="sparkline" '
            f'data-points="{len(values)}">'
        )
    ]
    if tooltip:
        out.append(f"<title>{esc(tooltip)}</title>")
    out.append(
        f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" '
        'stroke="#d6dae1"></rect>'
    )
    if values:
        first, last = times_ms[0], times_ms[-1]
        top = max(values) or 1
        span = last - first
        coords = []
        for i, (moment, value) in enumerate(zip(times_ms, values, strict=True)):
            share = (moment - first) / span if span else (i / (len(values) - 1) if len(values) > 1 else 1.0)
            x = pad + share * (width - 2 * pad)
            y = height - pad - value / top * (height - 2 * pad)
            coords.append((x, y))
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        out.append(f'<polyline points="{line}" fill="none" stroke="#4f7cc4" stroke-width="1.5"></polyline>')
        x, y = coords[-1]
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="#d2392f"></circle>')
        out.append(f'<text x="{width + 4}" y="{height - 8}" font-size="11">{esc(values[-1])}</text>')
    out.append("</svg>")
    return "".join(out)
