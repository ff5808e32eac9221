"""The loads page (``/loads?job=``): the job's runs from its run records and manifests, each loaded hour
with its completeness marker (:mod:`pipeline.completeness_marker`), and the warehouse tree per topic and
hour (:mod:`lumber.console.warehouse_reader`).

An hour's marker: ``COMPLETE`` (its ``_SUCCESS``: revision, expected, loaded, quarantined, the manifest that
completed it), ``INCOMPLETE`` (a marked hour that late data or a quarantine reopened: ``_INCOMPLETE``),
``none`` (not decided complete yet), or the error of a marker file that is not the job's. An hour without
``_SUCCESS`` whose end is more than ``[completeness] alert_after_ms`` ago is marked overdue (red)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lumber.console.page import esc, link, num, respond, table
from lumber.console.params import utc_iso
from lumber.console.svg import bars
from lumber.console.warehouse_reader import HourFolder, list_jobs, open_warehouse, read_runs, read_tree
from pipeline.fs import FileSystem

router = APIRouter()


@dataclass(frozen=True)
class HourMark:
    """One loaded hour of a topic and its marker, as the page shows it."""

    topic: str
    hour: str
    state: str
    overdue: bool
    marker: dict[str, Any] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "hour": self.hour,
            "state": self.state,
            "overdue": self.overdue,
            "marker": self.marker,
            "error": self.error,
        }


def read_hours(fs: FileSystem, job: str, tree: list[HourFolder], alert_after_ms: int) -> list[HourMark]:
    """The markers of every data hour folder of ``tree`` (newest first)."""
    from pipeline.completeness_marker import (  # noqa: PLC0415 - the page's only use of the pipeline's fs
        HOUR_MS,
        ForeignMarkerError,
        MarkerStore,
        parse_hour,
    )

    store = MarkerStore(fs, fs.root, job)
    now = time.time_ns() // 1_000_000
    hours: list[HourMark] = []
    for folder in sorted(tree, key=lambda h: (h.dt, h.hr, h.topic), reverse=True):
        if folder.dataset != "data":
            continue
        hour = f"{folder.dt}T{folder.hr}"
        start = parse_hour(hour)
        late = alert_after_ms > 0 and now >= start + HOUR_MS + alert_after_ms
        try:
            found = store.read(folder.topic, start)
        except ForeignMarkerError as exc:
            hours.append(HourMark(folder.topic, hour, "error", late, error=str(exc)))
            continue
        latest = found.success or found.incomplete
        state = "none" if latest is None else latest.state
        marker = None if latest is None else latest.to_json()
        hours.append(HourMark(folder.topic, hour, state, late and found.success is None, marker))
    return hours


def _hour_row(h: HourMark) -> list[str]:
    m = h.marker or {}
    state = esc(h.state) + (' <span class="error">overdue</span>' if h.overdue else "")
    return [
        esc(h.topic),
        esc(h.hour),
        state,
        num(m.get("revision")),
        num(m.get("expected")),
        num(m.get("loaded")),
        num(m.get("quarantined")),
        num(m.get("manifest_sequence")),
        esc(utc_iso(m["decided_at_ms"])) if "decided_at_ms" in m else "",
        f'<span class="error">{esc(h.error)}</span>' if h.error else esc(m.get("reason", "")),
    ]


@router.get("/loads")
def loads_page(request: Request, job: str | None = None) -> Response:
    config = request.app.state.config
    warehouse = open_warehouse(config.load)
    chosen = job or config.load.job
    runs = read_runs(warehouse, chosen)
    tree = read_tree(warehouse)
    jobs = list_jobs(warehouse)
    parts = [
        f"<p>Warehouse <code>{esc(warehouse.root)}</code>; jobs: "
        + (", ".join(link("/loads", j, job=j) for j in jobs) or "none yet")
        + "</p>",
        f"<h2>Runs of job {esc(chosen)} ({len(runs.runs)})</h2>",
        table(
            (
                "run",
                "started (UTC)",
                "status",
                "hours",
                "rows",
                "quarantined",
                "lost",
                "files",
                "seconds",
                "manifest",
                "error",
            ),
            (
                [
                    esc(r.record.run_id),
                    esc(utc_iso(r.record.started_at_ms)),
                    esc(r.record.outcome),
                    esc(f"{r.first_hour} .. {r.last_hour}" if r.first_hour else "-"),
                    num(r.record.rows),
                    num(r.record.quarantined),
                    num(r.record.lost),
                    num(r.files),
                    num(None if r.duration_ms is None else round(r.duration_ms / 1000, 1)),
                    num(r.record.sequence),
                    f'<span class="error">{esc(r.record.error)}</span>' if r.record.error else "",
                ]
                for r in runs.runs
            ),
            ["bad" if r.record.outcome in ("failed", "crashed") else "" for r in runs.runs],
        ),
    ]
    if runs.unreadable:
        parts.append(
            "<h3>Unreadable files</h3>"
            + table(
                ("file", "why"),
                ([esc(p), f'<span class="error">{esc(w)}</span>'] for p, w in runs.unreadable),
            )
        )
    hours = read_hours(warehouse, chosen, tree, config.completeness.alert_after_ms)
    parts.append(f"<h2>Hours and their completeness markers ({len(hours)})</h2>")
    parts.append(
        table(
            (
                "topic",
                "hour",
                "marker",
                "revision",
                "expected",
                "loaded",
                "quarantined",
                "manifest",
                "decided (UTC)",
                "why",
            ),
            (_hour_row(h) for h in hours),
            ["bad" if h.overdue or h.state in ("INCOMPLETE", "error") else "" for h in hours],
        )
    )
    parts.append(f"<h2>Warehouse tree ({len(tree)} hour folders)</h2>")
    parts.append(
        table(
            ("topic", "dataset", "dt", "hr", "files", "bytes"),
            ([esc(h.topic), esc(h.dataset), esc(h.dt), esc(h.hr), num(h.files), num(h.bytes)] for h in tree),
        )
    )
    data_folders = [h for h in tree if h.dataset == "data"]
    if data_folders:
        parts.append("<h2>Bytes per hour</h2>")
        parts.append(
            bars([f"{h.topic} {h.dt}T{h.hr}" for h in data_folders], [h.bytes for h in data_folders], " B")
        )
    data = {
        "warehouse": warehouse.root,
        "job": chosen,
        "jobs": jobs,
        "runs": [r.to_json() for r in runs.runs],
        "unreadable": [{"path": p, "error": w} for p, w in runs.unreadable],
        "tree": [h.to_json() for h in tree],
        "hours": [h.to_json() for h in hours],
    }
    return respond(request, "Loads", "".join(parts), data)
