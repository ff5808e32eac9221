"""The loads page (``/loads?job=``): the job's runs from its run records and manifests, and the warehouse
tree per topic and hour (:mod:`lumber.console.warehouse_reader`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lumber.console.page import esc, link, num, respond, table
from lumber.console.params import utc_iso
from lumber.console.svg import bars
from lumber.console.warehouse_reader import list_jobs, open_warehouse, read_runs, read_tree

router = APIRouter()


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
    }
    return respond(request, "Loads", "".join(parts), data)
