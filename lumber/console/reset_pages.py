"""Resetting a group's offsets of a topic from the console, as ``lumber groups reset-offsets`` does, with a
confirmation that shows the moves first.

``GET /groups/{group}/reset?topic=T&to=earliest|latest|offset[&offset=N][&kind=K]`` computes the moves
(each partition's committed offset now, ``-`` for none, and where it goes: the log start, the log end, or
offset N clamped to each log) and shows them with a button; ``POST`` of the same address with ``confirm=yes``
writes them (a zookeeper group's through :meth:`GroupAdmin.reset_offsets
<broker.client.groups.zookeeper.group_admin.GroupAdmin.reset_offsets>`, its live members adopting them; a
kafka group's through OffsetCommit, which its coordinator refuses while the group has members, as Kafka's
tool does) and shows what was written. Nothing is written by a GET, and a POST without ``confirm=yes`` is
a 400. The parameters travel in the address (the page has no script and the form no body), so the
confirmation and the request it confirms are the same.

Who may reset: a user of role ``admin`` (:mod:`lumber.console.console_auth`; everyone when the console does
not authenticate). A ``read`` user sees the confirmation's moves without the button, and a POST of theirs is
answered 403 before anything is read or written.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from broker.client.errors import ClientError
from broker.client.groups.zookeeper.group_admin import GroupAdmin
from broker.record.topic_partition import TopicPartition
from lumber.console.cluster_reader import read_topic
from lumber.console.console_auth import may_act, read_only_note, require_admin
from lumber.console.errors import BadRequestError
from lumber.console.group_pages import KAFKA_KIND, describe
from lumber.console.page import esc, link, respond, table, url
from lumber.console.sources import Sources, request_sources

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]
TARGETS = ("earliest", "latest", "offset")


def _moves(
    sources: Sources, group: str, kind: str, topic: str, to: str, offset: int | None
) -> tuple[dict[TopicPartition, int | None], dict[TopicPartition, int]]:
    """The committed offsets now and the targets, per partition of ``topic``."""
    if to not in TARGETS:
        raise BadRequestError(f"parameter to={to!r}: expected one of {', '.join(TARGETS)}")
    if (to == "offset") != (offset is not None):
        raise BadRequestError("parameter offset: give it with to=offset, and only then")
    view = read_topic(sources, topic)
    partitions = [TopicPartition(topic, p.partition) for p in view.partitions]
    earliest = sources.consumer.beginning_offsets(partitions)
    latest = sources.consumer.end_offsets(partitions)
    if to == "earliest":
        targets = earliest
    elif offset is None:  # to=latest
        targets = latest
    else:
        targets = {tp: min(max(offset, earliest[tp]), latest[tp]) for tp in partitions}
    if kind == KAFKA_KIND:
        before = sources.kafka_groups.committed(group, partitions)
    else:
        before = GroupAdmin(sources.zk).committed(group, partitions)
    return before, targets


def _table(before: dict[TopicPartition, int | None], targets: dict[TopicPartition, int]) -> str:
    return table(
        ("partition", "committed now", "after the reset"),
        (
            [esc(tp.partition), esc("-" if before[tp] is None else before[tp]), esc(targets[tp])]
            for tp in sorted(targets)
        ),
    )


def _json(
    before: dict[TopicPartition, int | None], targets: dict[TopicPartition, int]
) -> list[dict[str, Any]]:
    return [{"partition": tp.partition, "before": before[tp], "after": targets[tp]} for tp in sorted(targets)]


@router.get("/groups/{group}/reset")
def confirm_reset(
    request: Request,
    sources: SourcesDep,
    group: str,
    topic: str,
    to: str,
    offset: int | None = None,
    kind: str | None = None,
) -> Response:
    found = describe(sources, group, kind).to_json()["kind"]
    before, targets = _moves(sources, group, found, topic, to, offset)
    action = url(f"/groups/{group}/reset", topic=topic, to=to, offset=offset, kind=found, confirm="yes")
    allowed = may_act(request)
    if allowed:
        button = (
            f'<form method="post" action="{esc(action)}"><button type="submit" id="confirm">Reset offsets'
            f"</button> {link(f'/groups/{group}', 'cancel', kind=found)}</form>"
        )
    else:
        button = (
            read_only_note("Resetting offsets") + f"<p>{link(f'/groups/{group}', 'back', kind=found)}</p>"
        )
    body = (
        f"<p>Reset {esc(found)} group <b>{esc(group)}</b>'s offsets of topic <b>{esc(topic)}</b> to "
        f"{esc(to if offset is None else f'offset {offset}')}: these moves will be written.</p>"
        + _table(before, targets)
        + button
    )
    data = {
        "group": group,
        "kind": found,
        "topic": topic,
        "to": to,
        "moves": _json(before, targets),
        "allowed": allowed,
    }
    return respond(request, f"Reset group {group}?", body, data)


@router.post("/groups/{group}/reset")
def reset(
    request: Request,
    sources: SourcesDep,
    group: str,
    topic: str,
    to: str,
    offset: int | None = None,
    kind: str | None = None,
    confirm: str = "",
) -> Response:
    require_admin(request, "resetting a group's offsets")
    if confirm != "yes":
        raise BadRequestError(
            "parameter confirm: a reset is written only with confirm=yes (see its GET page)"
        )
    found = describe(sources, group, kind).to_json()["kind"]
    before, targets = _moves(sources, group, found, topic, to, offset)
    try:
        if found == KAFKA_KIND:
            sources.kafka_groups.reset_offsets(group, targets)
        else:
            GroupAdmin(sources.zk).reset_offsets(group, targets, requested_by="the Lumber console")
    except ClientError as exc:
        raise BadRequestError(f"{found} group {group!r}: the reset was refused: {exc}") from exc
    body = (
        f'<p id="done">Reset {esc(found)} group <b>{esc(group)}</b>\'s offsets of topic <b>{esc(topic)}</b>.'
        f"</p>{_table(before, targets)}<p>{link(f'/groups/{group}', 'back to the group', kind=found)}</p>"
    )
    data = {"group": group, "kind": found, "topic": topic, "to": to, "moves": _json(before, targets)}
    return respond(request, f"Group {group} reset", body, data)
