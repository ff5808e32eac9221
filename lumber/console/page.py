"""Laying out a console page, and answering it as HTML or as its JSON twin (``?format=json``).

Every page is one call of :func:`respond` with a title, its HTML body and the data the body shows; with
``?format=json`` the data itself is the answer, so scripts read exactly what the page shows. Pages are
plain HTML with one inline style sheet: no script, no external resource (the favicon is an empty data
URL, so that browsers do not ask for ``/favicon.ico``). Every text that comes from outside (topic names,
keys, values, error messages) goes through :func:`esc`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

NAV = (
    ("/", "Cluster"),
    ("/groups", "Groups"),
    ("/schemas", "Schemas"),
    ("/loads", "Loads"),
    ("/audit", "Audit"),
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { background: #1d2330; color: #fff; padding: 0.6em 1.2em; display: flex; gap: 1.4em; }
header a { color: #cfe0ff; text-decoration: none; } header b { color: #fff; }
main { padding: 1em 1.4em; }
table { border-collapse: collapse; background: #fff; margin: 0.6em 0 1.2em; }
th, td { border: 1px solid #d6dae1; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #eef1f5; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #fff; border: 1px solid #d6dae1; padding: 0.5em; margin: 0; white-space: pre-wrap; }
.error { color: #a3160f; } .warn { background: #fff2cc; } .bad { background: #fbd5d2; }
.ok { color: #1b6e2a; } .muted { color: #6b7280; } .del { background: #fbd5d2; } .add { background: #d4f5d9; }
form { margin: 0.5em 0; } form label { margin-right: 0.8em; }
.banner { background: #fbd5d2; border: 1px solid #a3160f; color: #5c0d08; padding: 0.5em 0.8em; }
.banner ul { margin: 0.2em 0 0; } .healthy { color: #1b6e2a; margin: 0.6em 0; }
.legend span { display: inline-block; padding: 0.1em 0.6em; margin-right: 0.4em; border: 1px solid #d6dae1; }
"""


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(path: str, **params: object) -> str:
    """``path?k=v`` with the parameters that are not ``None`` (path segments percent-encoded)."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    quoted = quote(path, safe="/")
    return f"{quoted}?{query}" if query else quoted


def href(path: str, **params: object) -> str:
    """:func:`url`, escaped for an attribute."""
    return esc(url(path, **params))


def link(path: str, text: object, **params: object) -> str:
    return f'<a href="{href(path, **params)}">{esc(text)}</a>'


def num(value: int | float | None) -> str:
    return '<td class="num">' + ("-" if value is None else esc(value)) + "</td>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], row_classes: Sequence[str] = ()) -> str:
    """A table; ``headers`` are escaped, cells are HTML (``<td>`` added unless the cell starts with it)."""
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in headers), "</tr>"]
    for index, row in enumerate(rows):
        css = row_classes[index] if index < len(row_classes) else ""
        out.append(f'<tr class="{esc(css)}">' if css else "<tr>")
        out.extend(cell if cell.startswith("<td") else f"<td>{cell}</td>" for cell in row)
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


HEALTHY = "Healthy: every broker up, every partition led and fully replicated."


def banner(problems: Sequence[str], healthy: str = HEALTHY) -> str:
    """The cluster's problems at the top of a page (``role="alert"``), or a quiet line when there are none."""
    if not problems:
        return f'<p class="healthy" id="health">{esc(healthy)}</p>'
    items = "".join(f"<li>{esc(problem)}</li>" for problem in problems)
    return f'<div class="banner" id="health" role="alert"><b>Cluster health</b><ul>{items}</ul></div>'


def pretty_json(value: Any) -> str:
    return "<pre>" + esc(json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)) + "</pre>"


def layout(title: str, body: str) -> str:
    nav = "".join(f'<a href="{p}">{esc(t)}</a>' for p, t in NAV)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)} · Lumber console</title>"
        '<link rel="icon" href="data:,">'
        f"<style>{STYLE}</style></head><body>"
        f"<header><b>Lumber</b>{nav}</header><main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )


def wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


def respond(request: Request, title: str, body: str, data: Any, status: int = 200) -> Response:
    """The page as HTML, or ``data`` as JSON with ``?format=json``."""
    if wants_json(request):
        return JSONResponse(data, status_code=status)
    return HTMLResponse(layout(title, body), status_code=status)


def error_response(request: Request, status: int, title: str, message: str) -> Response:
    """An error page: the status, what was wrong, and a way back."""
    if wants_json(request):
        return JSONResponse({"error": title, "status": status, "message": message}, status_code=status)
    body = f'<p class="error">{esc(message)}</p><p>{link("/", "Back to the cluster")}</p>'
    return HTMLResponse(layout(f"{status} {title}", body), status_code=status)


def form(action: str, fields: Mapping[str, tuple[str, object]], submit: str = "Show") -> str:
    """A GET form: ``name -> (label, current value)``."""
    inputs = "".join(
        f'<label>{esc(label)} <input name="{esc(name)}" value="{esc(value)}" size="16"></label>'
        for name, (label, value) in fields.items()
    )
    button = f'<button type="submit">{esc(submit)}</button>'
    return f'<form method="get" action="{esc(action)}">{inputs}{button}</form>'
