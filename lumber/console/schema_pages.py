"""The registry's subjects: ``/schemas``, ``/schemas/{subject}`` (versions, compatibility, one version's
schema), ``/schemas/{subject}/diff?from=1&to=2`` (a line diff of the two schemas, pretty-printed) and
``/schemas/ids/{id}``. Unknown subjects, versions and ids are 404 (the registry's 40401/40402/40403)."""

from __future__ import annotations

import difflib
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from lumber.console.errors import BadRequestError, NotFoundError
from lumber.console.page import esc, form, link, num, pretty_json, respond, table
from lumber.console.sources import Sources, request_sources
from schemas.errors import (
    InvalidVersionError,
    SchemaNotFoundError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from schemas.registered_schema import RegisteredSchema

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]


@router.get("/schemas")
def subjects_page(request: Request, sources: SourcesDep) -> Response:
    registry = sources.registry
    rows: list[dict[str, Any]] = []
    for subject in registry.subjects():
        versions = registry.get_versions(subject)
        latest = registry.get_version(subject, versions[-1]) if versions else None
        rows.append(
            {
                "subject": subject,
                "versions": versions,
                "latest_id": None if latest is None else latest.schema_id,
                "compatibility": registry.get_compatibility(subject, default_to_global=True),
            }
        )
    level = registry.get_compatibility()
    body = (
        f"<p>Registry <code>{esc(sources.registry_url)}</code>, global compatibility {esc(level)}</p>"
        + table(
            ("subject", "versions", "latest id", "compatibility"),
            (
                [
                    link(f"/schemas/{r['subject']}", r["subject"]),
                    num(len(r["versions"])),
                    num(r["latest_id"]),
                    esc(r["compatibility"]),
                ]
                for r in rows
            ),
        )
    )
    return respond(request, "Schemas", body, {"compatibility": level, "subjects": rows})


def _version(sources: Sources, subject: str, version: int | str) -> RegisteredSchema:
    try:
        return sources.registry.get_version(subject, version)
    except (SubjectNotFoundError, VersionNotFoundError) as exc:
        raise NotFoundError(f"subject {subject!r}, version {version}: {exc}") from exc
    except InvalidVersionError as exc:
        raise BadRequestError(f"subject {subject!r}: {exc}") from exc


def _versions(sources: Sources, subject: str) -> list[int]:
    try:
        return sources.registry.get_versions(subject)
    except SubjectNotFoundError as exc:
        raise NotFoundError(f"no subject {subject!r} in the registry {sources.registry_url}") from exc


def _pretty(schema: RegisteredSchema) -> str:
    return json.dumps(json.loads(schema.schema), indent=2)


@router.get("/schemas/ids/{schema_id}")
def schema_id_page(request: Request, sources: SourcesDep, schema_id: int) -> Response:
    try:
        schema = sources.registry.get_schema(schema_id)
    except SchemaNotFoundError as exc:
        raise NotFoundError(f"no schema id {schema_id} in the registry {sources.registry_url}") from exc
    body = f"<p>Type {esc(schema.type_name)}</p>" + pretty_json(schema.to_json())
    return respond(request, f"Schema id {schema_id}", body, {"id": schema_id, "schema": schema.to_json()})


@router.get("/schemas/{subject}")
def subject_page(request: Request, sources: SourcesDep, subject: str, version: int | None = None) -> Response:
    versions = _versions(sources, subject)
    shown = _version(sources, subject, version if version is not None else versions[-1])
    level = sources.registry.get_compatibility(subject, default_to_global=True)
    rows = [_version(sources, subject, v) for v in versions]
    listing = table(
        ("version", "id", "diff"),
        (
            [
                link(f"/schemas/{subject}", r.version, version=r.version),
                link(f"/schemas/ids/{r.schema_id}", r.schema_id),
                link(
                    f"/schemas/{subject}/diff",
                    f"v{r.version - 1} → v{r.version}",
                    **{"from": r.version - 1, "to": r.version},
                )
                if r.version > 1 and r.version - 1 in versions
                else "-",
            ]
            for r in rows
        ),
    )
    body = (
        f"<p>Compatibility {esc(level)}</p><h2>Versions</h2>{listing}"
        f"<h2>Version {shown.version} (id {shown.schema_id})</h2><pre>{esc(_pretty(shown))}</pre>"
        + form(
            f"/schemas/{subject}/diff",
            {"from": ("diff from version", versions[0]), "to": ("to", versions[-1])},
            "Diff",
        )
    )
    data: dict[str, Any] = {
        "subject": subject,
        "compatibility": level,
        "versions": [r.to_json() for r in rows],
        "shown": shown.to_json(),
    }
    return respond(request, f"Subject {subject}", body, data)


@router.get("/schemas/{subject}/diff")
def diff_page(
    request: Request,
    sources: SourcesDep,
    subject: str,
    from_version: Annotated[int, Query(alias="from")],
    to_version: Annotated[int, Query(alias="to")],
) -> Response:
    _versions(sources, subject)
    old = _version(sources, subject, from_version)
    new = _version(sources, subject, to_version)
    lines = list(
        difflib.unified_diff(
            _pretty(old).splitlines(),
            _pretty(new).splitlines(),
            f"v{old.version}",
            f"v{new.version}",
            lineterm="",
            n=3,
        )
    )
    rendered = []
    for line in lines:
        css = "add" if line.startswith("+") and not line.startswith("+++") else ""
        css = "del" if line.startswith("-") and not line.startswith("---") else css
        rendered.append(f'<span class="{css}">{esc(line)}</span>' if css else esc(line))
    body = (
        f"<p>{link(f'/schemas/{subject}', subject)}: version {old.version} (id {old.schema_id}) → version "
        f"{new.version} (id {new.schema_id})</p><pre>" + ("\n".join(rendered) or "(identical)") + "</pre>"
    )
    data = {"subject": subject, "from": old.to_json(), "to": new.to_json(), "diff": lines}
    return respond(request, f"Diff of {subject}: v{old.version} → v{new.version}", body, data)
