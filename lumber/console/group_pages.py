"""Consumer groups (the paper's, in ZooKeeper): ``/groups`` and ``/groups/{group}``.

A group's page shows its members, its generation, and per partition the owner, the committed offset,
the log end offset (from the brokers) and the lag, read through
:class:`~broker.client.group_admin.GroupAdmin` as ``lumber groups describe`` does.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from broker.client.group_admin import GroupAdmin, GroupDescription
from lumber.console.errors import NotFoundError
from lumber.console.page import esc, link, num, respond, table
from lumber.console.sources import Sources, request_sources
from lumber.console.svg import bars

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]


@router.get("/groups")
def groups_page(request: Request, sources: SourcesDep) -> Response:
    admin = GroupAdmin(sources.zk)
    rows: list[dict[str, Any]] = []
    for group in admin.list_groups():
        generation = admin.generation(group)
        rows.append(
            {
                "group": group,
                "members": len(admin.members(group)),
                "generation": None if generation is None else generation.generation,
            }
        )
    body = table(
        ("group", "members", "generation"),
        ([link(f"/groups/{r['group']}", r["group"]), num(r["members"]), num(r["generation"])] for r in rows),
    )
    if not rows:
        body = (
            f'<p class="muted">No consumer groups in ZooKeeper {esc(sources.config.zookeeper.connect)}.</p>'
        )
    return respond(request, "Consumer groups", body, {"groups": rows})


def describe(sources: Sources, group: str) -> GroupDescription:
    admin = GroupAdmin(sources.zk)
    if not admin.exists(group):
        raise NotFoundError(f"no consumer group {group!r} in ZooKeeper {sources.config.zookeeper.connect}")
    return admin.describe(group, sources.consumer.end_offsets)


@router.get("/groups/{group}")
def group_page(request: Request, sources: SourcesDep, group: str) -> Response:
    description = describe(sources, group)
    data = description.to_json()
    generation = description.generation
    summary = (
        "<p>No generation yet (no leader has assigned partitions).</p>"
        if generation is None
        else f"<p>Generation {generation.generation}, leader <code>{esc(generation.leader)}</code>, "
        f"strategy {esc(generation.strategy)}; total lag {data['total_lag']}</p>"
    )
    members = table(
        ("member", "host", "pid", "subscription"),
        (
            [
                esc(m.consumer_id),
                esc(m.host),
                num(m.pid),
                esc(", ".join(f"{t}:{n}" for t, n in sorted(m.subscription.items()))),
            ]
            for m in description.members
        ),
    )
    partitions = table(
        ("topic", "partition", "owner", "committed", "log end", "lag"),
        (
            [
                link(f"/topics/{p.topic}", p.topic, partition=p.partition),
                num(p.partition),
                esc(p.owner or "-"),
                num(p.committed),
                num(p.log_end),
                num(p.lag),
            ]
            for p in description.partitions
        ),
        ["warn" if (p.lag or 0) > 0 else "" for p in description.partitions],
    )
    chart = bars(
        [f"{p.topic}-{p.partition}" for p in description.partitions],
        [p.lag or 0 for p in description.partitions],
    )
    body = (
        f"{summary}<h2>Members ({len(description.members)})</h2>{members}"
        f"<h2>Partitions</h2>{partitions}<h2>Lag per partition</h2>{chart}"
    )
    return respond(request, f"Group {group}", body, data)
