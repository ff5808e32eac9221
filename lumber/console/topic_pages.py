"""A topic's pages: its partitions and a page of records (``/topics/{topic}``), one record, one value.

The partitions table shows each partition's replicas, ISR and problems (offline, under-replicated, under
min ISR), a banner above it the same problems in words.
``/topics/{topic}?partition=P&offset=O&limit=N`` (or ``&time=T``, ms or ISO 8601 UTC) shows records with
key, headers, timestamp and the value decoded through the registry (the schema id linked to its subject
version). Unknown topics and partitions are 404; offsets outside the log and malformed times are 400.
``/topics/{topic}/{partition}/{offset}/value`` is the decoded value alone as JSON, 400 when it is not Avro.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from lumber.console.cluster_reader import read_topic
from lumber.console.errors import BadRequestError
from lumber.console.page import banner, esc, form, link, num, pretty_json, respond, table
from lumber.console.params import parse_moment_ms, utc_iso
from lumber.console.record_reader import (
    DecodedRecord,
    RecordPage,
    partition_of,
    read_record,
    read_records,
    show_bytes,
)
from lumber.console.sources import Sources, request_sources

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]


@router.get("/topics/{topic}")
def topic_page(
    request: Request,
    sources: SourcesDep,
    topic: str,
    partition: int = 0,
    offset: int | None = None,
    time: str | None = None,
    limit: int | None = None,
) -> Response:
    view = read_topic(sources, topic)
    partition_of(view, partition)  # 404 before anything is read
    if offset is not None and time:
        raise BadRequestError("give offset or time, not both")
    page = read_records(
        sources,
        topic,
        partition,
        offset=offset,
        time_ms=parse_moment_ms(time, "time") if time else None,
        limit=sources.config.console.records_per_page if limit is None else limit,
        view=view,
    )
    partitions = table(
        ("partition", "leader", "replicas", "isr", "problems", "log start", "log end", "messages"),
        (
            [
                link(f"/topics/{topic}", p.partition, partition=p.partition),
                "<td>offline</td>" if p.leader is None else num(p.leader),
                esc(",".join(map(str, p.replicas))),
                esc(",".join(map(str, p.isr))),
                esc(p.marks),
                num(p.log_start_offset),
                num(p.log_end_offset),
                num(p.messages),
            ]
            for p in view.partitions
        ),
        [
            "bad" if p.leader is None or p.under_min_isr else "warn" if p.under_replicated else ""
            for p in view.partitions
        ],
    )
    problems = [f"partition {p.partition}: {p.marks}" for p in view.partitions if p.marks]
    picker = form(
        f"/topics/{topic}",
        {
            "partition": ("partition", partition),
            "offset": ("offset", "" if offset is None else offset),
            "time": ("or time (UTC)", time or ""),
            "limit": ("limit", sources.config.console.records_per_page if limit is None else limit),
        },
    )
    body = (
        banner(problems, "Healthy: every partition led and fully replicated.")
        + f"<h2>Partitions</h2>{partitions}"
        + form(
            f"/topics/{topic}/search",
            {"q": ("search keys, headers and values for", ""), "partition": ("in partition", partition)},
            submit="Search",
        )
        + f"<h2>Records of partition {partition}</h2>{picker}"
        + _paging(page)
        + _records_table(page)
    )
    return respond(request, f"Topic {topic}", body, {**view.to_json(), "page": page.to_json()})


def _paging(page: RecordPage) -> str:
    shown = len(page.records)
    first = page.records[0].record.offset if page.records else page.from_offset
    parts = [f"<p>{shown} records from offset {first}; log [{page.log_start_offset}, {page.log_end_offset})"]
    if page.next_offset < page.log_end_offset:
        parts.append(
            " · " + link(f"/topics/{page.topic}", "next", partition=page.partition, offset=page.next_offset)
        )
    parts.append("</p>")
    return "".join(parts)


def _schema_cell(decoded: DecodedRecord) -> str:
    ref = decoded.schema
    if ref is None:
        return "-"
    by_id = link(f"/schemas/ids/{ref.schema_id}", f"id {ref.schema_id}")
    if ref.subject is None or ref.version is None:
        return by_id
    return (
        by_id + " · " + link(f"/schemas/{ref.subject}", f"{ref.subject} v{ref.version}", version=ref.version)
    )


def _value_cell(decoded: DecodedRecord) -> str:
    if decoded.error is not None:
        raw = show_bytes(decoded.record.value)
        return f'<span class="error">{esc(decoded.error)}</span><pre>{esc(raw)}</pre>'
    return pretty_json(decoded.value)


def _records_table(page: RecordPage) -> str:
    rows = []
    for decoded in page.records:
        r = decoded.record
        headers = "<br>".join(f"{esc(k)}: {esc(show_bytes(v))}" for k, v in r.headers)
        rows.append(
            [
                f'<td class="num">{link(f"/topics/{r.topic}/{r.partition}/{r.offset}", r.offset)}</td>',
                esc(utc_iso(r.timestamp_ms)),
                esc(show_bytes(r.key) or "-"),
                headers or "-",
                _schema_cell(decoded),
                _value_cell(decoded),
            ]
        )
    return table(("offset", "timestamp (UTC)", "key", "headers", "schema", "value"), rows)


@router.get("/topics/{topic}/{partition}/{offset}")
def record_page(request: Request, sources: SourcesDep, topic: str, partition: int, offset: int) -> Response:
    decoded = read_record(sources, topic, partition, offset)
    page = RecordPage(topic, partition, offset, offset, offset + 1, (decoded,))
    body = (
        f"<p>{link(f'/topics/{topic}', f'{topic}-{partition}', partition=partition, offset=offset)} "
        f"· {link(f'/topics/{topic}/{partition}/{offset}/value', 'value as JSON')}</p>" + _records_table(page)
    )
    return respond(request, f"{topic}-{partition} @ {offset}", body, {"topic": topic, **decoded.to_json()})


@router.get("/topics/{topic}/{partition}/{offset}/value")
def record_value(sources: SourcesDep, topic: str, partition: int, offset: int) -> Response:
    """The record's value decoded from Avro, as JSON; 400 naming why when the value is not Avro."""
    decoded = read_record(sources, topic, partition, offset)
    if decoded.error is not None:
        raise BadRequestError(f"the record at offset {offset} of {topic}-{partition} is {decoded.error}")
    return JSONResponse(decoded.value)
