"""Searching a partition's records: ``/topics/{topic}/search?q=TEXT&in=key|value|header|any&partition=P
&from=O&span=N`` (as Kafdrop's and AKHQ's record search).

The search reads at most ``span`` offsets (default and bound: :data:`MAX_SPAN`) of one partition from
``from`` (default: the last ``span`` offsets before the log end), through the same reader and decoder as
the topic page (:func:`~lumber.console.record_reader.read_records`, pages of
:data:`~lumber.console.record_reader.MAX_LIMIT`), and keeps the records whose key, header (name or value),
or value contains ``q`` (case-sensitive): the key and headers as the page shows them (UTF-8 text, else
``0x`` hex), the value as its decoded Avro JSON, else as its raw text. The answer names the range it read,
so a search that found nothing says where it did not find it, and links the next range. Never more than
``span`` offsets a request: a topic of millions of records is searched range by range, not read whole.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from lumber.console.cluster_reader import read_topic
from lumber.console.errors import BadRequestError
from lumber.console.page import esc, form, link, respond, table
from lumber.console.params import utc_iso
from lumber.console.record_reader import MAX_LIMIT, DecodedRecord, partition_of, read_records, show_bytes
from lumber.console.sources import Sources, request_sources

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]
#: the most offsets one search reads
MAX_SPAN = 10_000
FIELDS = ("any", "key", "value", "header")


def matches(decoded: DecodedRecord, text: str, field: str) -> list[str]:
    """Where ``text`` occurs in ``decoded`` (``key``, ``header``, ``value``), among the fields searched."""
    record = decoded.record
    found = []
    if field in ("any", "key") and text in (show_bytes(record.key) or ""):
        found.append("key")
    if field in ("any", "header") and any(
        text in name or text in (show_bytes(value) or "") for name, value in record.headers
    ):
        found.append("header")
    if field in ("any", "value"):
        shown = show_bytes(record.value) if decoded.error else json.dumps(decoded.value, ensure_ascii=False)
        if text in (shown or ""):
            found.append("value")
    return found


@router.get("/topics/{topic}/search")
def search_page(
    request: Request,
    sources: SourcesDep,
    topic: str,
    q: str = "",
    field: Annotated[str, Query(alias="in")] = "any",
    partition: int = 0,
    start: Annotated[int | None, Query(alias="from")] = None,
    span: int = MAX_SPAN,
) -> Response:
    if field not in FIELDS:
        raise BadRequestError(f"parameter in={field!r}: expected one of {', '.join(FIELDS)}")
    if not 1 <= span <= MAX_SPAN:
        raise BadRequestError(f"parameter span={span}: expected 1 to {MAX_SPAN} offsets")
    if not q:
        raise BadRequestError("parameter q: give the text to search for")
    view = read_topic(sources, topic)
    log_start, log_end = partition_of(view, partition)
    first = max(log_start, log_end - span) if start is None else start
    if not log_start <= first <= log_end:
        raise BadRequestError(
            f"parameter from={first}: out of range for {topic}-{partition}, whose log holds [{log_start}, "
            f"{log_end})"
        )
    until = min(log_end, first + span)
    hits: list[tuple[DecodedRecord, list[str]]] = []
    scanned = 0
    offset = first
    while offset < until:
        page = read_records(
            sources, topic, partition, offset=offset, limit=min(MAX_LIMIT, until - offset), view=view
        )
        if not page.records:
            break
        for decoded in page.records:
            scanned += 1
            where = matches(decoded, q, field)
            if where:
                hits.append((decoded, where))
        offset = page.next_offset
    data: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "q": q,
        "in": field,
        "from_offset": first,
        "until_offset": until,
        "records_read": scanned,
        "log_start_offset": log_start,
        "log_end_offset": log_end,
        "hits": [{**d.to_json(), "matched_in": where} for d, where in hits],
    }
    picker = form(
        f"/topics/{topic}/search",
        {
            "q": ("text", q),
            "in": ("in (any, key, value, header)", field),
            "partition": ("partition", partition),
            "from": ("from offset", first),
            "span": (f"offsets (at most {MAX_SPAN})", span),
        },
        submit="Search",
    )
    summary = (
        f'<p id="searched">{len(hits)} of {scanned} records of {esc(topic)}-{partition} in offsets '
        f"[{first}, {until}) contain {esc(json.dumps(q, ensure_ascii=False))} in {esc(field)}; the log holds "
        f"[{log_start}, {log_end})"
    )
    if until < log_end:
        summary += " · " + link(
            f"/topics/{topic}/search", "search the next range", q=q, partition=partition, span=span, **{
                "in": field, "from": until,
            }
        )  # fmt: skip
    summary += "</p>"
    rows = [
        [
            f'<td class="num">{link(f"/topics/{topic}/{partition}/{d.record.offset}", d.record.offset)}</td>',
            esc(utc_iso(d.record.timestamp_ms)),
            esc(", ".join(where)),
            esc(show_bytes(d.record.key) or "-"),
            esc(json.dumps(d.value, ensure_ascii=False) if d.error is None else show_bytes(d.record.value)),
        ]
        for d, where in hits
    ]
    body = picker + summary + table(("offset", "timestamp (UTC)", "matched in", "key", "value"), rows)
    return respond(request, f"Search {topic}-{partition}", body, data)
