"""Consumer groups of both kinds: ``/groups`` and ``/groups/{group}[?kind=zookeeper|kafka]``.

Lumber has two kinds of consumer groups (``lumber groups``): *zookeeper* groups, the paper's, read through
:class:`~broker.client.groups.zookeeper.group_admin.GroupAdmin`, and *kafka* groups, kept by the brokers'
group coordinator, read through :class:`~broker.client.groups.kafka.kafka_group_admin.KafkaGroupAdmin`
(DescribeGroups and OffsetFetch), as ``lumber groups describe`` reads them. A group's page shows its members
(a kafka group's with client ids, hosts and assignments), and per partition the owner, the committed offset,
the log end offset (from the brokers) and the lag, with a bar per partition, and the lag over time as a
sparkline per partition and one for the group's total (:mod:`lumber.console.lag_history`: a kafka group's from
its commits in ``__consumer_offsets`` over the last ``?history=`` (a duration, default ``1h``;
``lag_history.history_ms``), a zookeeper group's from the window of the lag exporter of ``[console]
lag_exporter_url``); the JSON twin gives each partition's points as its ``history`` and the total as
``lag_history.total``. ``kind`` picks the kind when both have a group of that name (the list links with it);
without it the page finds the one that exists.

A partition the group consumes without a committed offset is not drawn as 0: its lag is measured from the
group's ``auto.offset.reset`` position (``[consumer] auto_offset_reset``: the log start for ``earliest``,
the log end for ``latest``), marked "no commit", and counted in the total, as ``lumber groups lag`` and
the lag exporter count it (:func:`~broker.client.groups.lag_evaluation.reset_position`).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from broker.client.groups.kafka.kafka_group_admin import KafkaGroupDescription
from broker.client.groups.lag_evaluation import reset_position
from broker.client.groups.zookeeper.group_admin import GroupAdmin, GroupDescription
from broker.record.topic_partition import TopicPartition
from lumber.console.console_auth import may_act, read_only_note
from lumber.console.errors import BadRequestError, NotFoundError
from lumber.console.lag_exporter_reader import read_exporter_history, read_exporter_statuses
from lumber.console.lag_history import LagHistory, LagPoint
from lumber.console.offsets_topic_reader import read_kafka_history
from lumber.console.page import esc, form, link, num, respond, table
from lumber.console.params import utc_iso
from lumber.console.sources import Sources, request_sources
from lumber.console.svg import bars, sparkline
from pipeline.durations import DurationError, parse_duration_ms

router = APIRouter()
SourcesDep = Annotated[Sources, Depends(request_sources)]
ZOOKEEPER_KIND = "zookeeper"
KAFKA_KIND = "kafka"
KINDS = (ZOOKEEPER_KIND, KAFKA_KIND)
DEFAULT_HISTORY = "1h"


@router.get("/groups")
def groups_page(request: Request, sources: SourcesDep) -> Response:
    """Every group of both kinds, with its total lag (the sum over its partitions, as its page shows them)
    and Burrow's status as the lag exporter judges it (``-`` for a group it does not watch)."""
    admin = GroupAdmin(sources.zk)
    rows: list[dict[str, Any]] = []
    for group in admin.list_groups():
        generation = admin.generation(group)
        rows.append(
            {
                "group": group,
                "kind": ZOOKEEPER_KIND,
                "members": len(admin.members(group)),
                "generation": None if generation is None else generation.generation,
                "state": None,
            }
        )
    kafka = sources.kafka_groups
    rows.extend(
        {
            "group": listed.group,
            "kind": KAFKA_KIND,
            "members": len(kafka.members(listed.group)),
            "generation": None,
            "state": listed.state,
        }
        for listed in kafka.list_groups()
    )
    rows.sort(key=lambda row: (row["group"], row["kind"]))
    statuses, note = read_exporter_statuses(sources, time.time_ns() // 1_000_000)
    for row in rows:
        described = describe(sources, row["group"], row["kind"]).to_json()
        partitions = with_uncommitted_lag(sources, described)["partitions"]
        row["total_lag"] = sum(p["lag"] or 0 for p in partitions)
        row["partitions"] = len(partitions)
        row["status"] = statuses.get((row["group"], row["kind"]))
    body = table(
        ("group", "kind", "members", "generation", "state", "partitions", "total lag", "status"),
        (
            [
                link(f"/groups/{r['group']}", r["group"], kind=r["kind"]),
                esc(r["kind"]),
                num(r["members"]),
                num(r["generation"]),
                esc(r["state"] or "-"),
                num(r["partitions"]),
                num(r["total_lag"]),
                esc(r["status"] or "-"),
            ]
            for r in rows
        ),
        [
            "bad" if r["status"] in ("STALLED", "STOPPED") else "warn" if r["status"] == "WARNING" else ""
            for r in rows
        ],
    ) + (f'<p class="muted">{esc(note)}</p>' if note else "")
    if not rows:
        body = (
            f'<p class="muted">No consumer groups in ZooKeeper {esc(sources.config.zookeeper.connect)} '
            "nor at the brokers' group coordinators.</p>"
        )
    return respond(request, "Consumer groups", body, {"groups": rows})


def describe(
    sources: Sources, group: str, kind: str | None = None
) -> GroupDescription | KafkaGroupDescription:
    """``group``'s description, of ``kind`` or of the one kind that has it (404: neither; 400: both, or
    an unknown kind)."""
    if kind is not None and kind not in KINDS:
        raise BadRequestError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    admin = GroupAdmin(sources.zk)
    found = []
    if kind in (None, ZOOKEEPER_KIND) and admin.exists(group):
        found.append(ZOOKEEPER_KIND)
    if kind in (None, KAFKA_KIND) and sources.kafka_groups.exists(group):
        found.append(KAFKA_KIND)
    if not found:
        where = {
            None: f"in ZooKeeper {sources.config.zookeeper.connect} nor at the brokers",
            ZOOKEEPER_KIND: f"in ZooKeeper {sources.config.zookeeper.connect}",
            KAFKA_KIND: "at the brokers' group coordinators",
        }[kind]
        raise NotFoundError(f"no consumer group {group!r} {where}")
    if len(found) > 1:
        raise BadRequestError(
            f"consumer group {group!r} exists as a zookeeper group and as a kafka group: "
            "add ?kind=zookeeper or ?kind=kafka"
        )
    if found[0] == KAFKA_KIND:
        return sources.kafka_groups.describe(group, sources.consumer.end_offsets)
    return admin.describe(group, sources.consumer.end_offsets)


def with_uncommitted_lag(sources: Sources, data: dict[str, Any]) -> dict[str, Any]:
    """A description's JSON with each uncommitted partition's lag from its reset position (``no_commit``
    true) and the total recounted (see the module docstring)."""
    missing = [p for p in data["partitions"] if p["committed"] is None and p["log_end"] is not None]
    policy = sources.config.consumer.auto_offset_reset
    earliest = policy == "earliest" and missing
    starts = sources.consumer.beginning_offsets([_tp(p) for p in missing]) if earliest else {}
    for p in data["partitions"]:
        p["no_commit"] = p in missing
        if p["no_commit"]:
            start = starts.get(_tp(p), p["log_end"])
            p["lag"] = p["log_end"] - reset_position(policy, start, p["log_end"])
    if "total_lag" in data:
        data["total_lag"] = sum(p["lag"] or 0 for p in data["partitions"])
    return data


@router.get("/groups/{group}")
def group_page(
    request: Request, sources: SourcesDep, group: str, kind: str | None = None, history: str = DEFAULT_HISTORY
) -> Response:
    window_ms = _history_ms(history)
    description = describe(sources, group, kind)
    data = with_uncommitted_lag(sources, description.to_json())
    history_ms: int | None = window_ms
    if isinstance(description, KafkaGroupDescription):
        lag_history = read_kafka_history(sources, group, window_ms)
        summary, members, partitions = _kafka_parts(description, data, lag_history)
    else:
        lag_history = read_exporter_history(sources, group, ZOOKEEPER_KIND)
        summary, members, partitions = _zookeeper_parts(description, data, lag_history)
        history_ms = None  # the exporter's window, whatever was asked
    for p in data["partitions"]:
        p["history"] = [point.to_json() for point in lag_history.points(_tp(p))]
    data["lag_history"] = {"history_ms": history_ms, **lag_history.to_json()}
    lags = [(f"{p['topic']}-{p['partition']}", p["lag"]) for p in data["partitions"]]
    chart = bars([label for label, _ in lags], [lag or 0 for _, lag in lags])
    body = (
        f"{summary}<h2>Members ({len(description.members)})</h2>{members}"
        f"<h2>Partitions</h2>{partitions}<h2>Lag per partition</h2>{chart}"
        f"<h2>Lag over time</h2>{_history_part(lag_history)}"
        "<h2>Reset offsets</h2>"
        + (
            form(
                f"/groups/{group}/reset",
                {
                    "topic": ("topic", ""),
                    "to": ("to (earliest, latest)", "earliest"),
                    "kind": ("kind", data["kind"]),
                },
                submit="Show the moves",
            )
            if may_act(request)
            else read_only_note("Resetting offsets")
        )
    )
    return respond(request, f"Group {group} ({data['kind']})", body, data)


def _history_ms(history: str) -> int:
    try:
        found = parse_duration_ms(history, "history")
    except DurationError as exc:
        raise BadRequestError(f"parameter history={history!r}: {exc}") from exc
    if found <= 0:
        raise BadRequestError(f"parameter history={history!r}: must be longer than 0")
    return found


def _tp(partition: dict[str, Any]) -> TopicPartition:
    return TopicPartition(partition["topic"], partition["partition"])


def _spark(points: tuple[LagPoint, ...], what: str) -> str:
    """A sparkline of ``points``' lag, its tooltip naming the span and the latest figures."""
    if not points:
        return sparkline([], [], f"{what}: no lag history")
    last = points[-1]
    tooltip = (
        f"{what}: lag {last.lag} (committed {last.committed}, log end {last.log_end}) at "
        f"{utc_iso(last.time_ms)}; {len(points)} points since {utc_iso(points[0].time_ms)}"
    )
    return sparkline([p.time_ms for p in points], [p.lag for p in points], tooltip)


def _history_part(history: LagHistory) -> str:
    """The group's total lag over time, where the points came from, and why there are none (if so)."""
    total = history.total
    note = f'<p class="muted">{esc(history.note)}</p>' if history.note else ""
    return (
        f'<p class="lag-total">total {_spark(total, "total")}</p>'
        f'<p class="muted">from {esc(history.source)}: {len(total)} moments</p>{note}'
    )


def _zookeeper_parts(
    description: GroupDescription, data: dict[str, Any], history: LagHistory
) -> tuple[str, str, str]:
    generation = description.generation
    summary = (
        "<p>A zookeeper group. No generation yet (no leader has assigned partitions).</p>"
        if generation is None
        else f"<p>A zookeeper group. Generation {generation.generation}, leader "
        f"<code>{esc(generation.leader)}</code>, strategy {esc(generation.strategy)}; total lag "
        f"{data['total_lag']}</p>"
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
    return summary, members, _partitions_table(data["partitions"], "owner", history)


def _kafka_parts(
    description: KafkaGroupDescription, data: dict[str, Any], history: LagHistory
) -> tuple[str, str, str]:
    summary = (
        f"<p>A kafka group. State {esc(description.state)}, protocol "
        f"{esc(description.protocol or '-')}, coordinator broker {description.coordinator.node_id}; "
        f"total lag {data['total_lag']}</p>"
    )
    members = table(
        ("member", "client id", "host", "instance id", "assignment"),
        (
            [
                esc(m.member_id),
                esc(m.client_id),
                esc(m.client_host),
                esc(m.group_instance_id or "-"),
                esc(", ".join(str(tp) for tp in m.assignment) or "-"),
            ]
            for m in description.members
        ),
    )
    return summary, members, _partitions_table(data["partitions"], "member", history)


def _partitions_table(partitions: list[dict[str, Any]], owner: str, history: LagHistory) -> str:
    """The partitions of a description's JSON, each with its lag history; ``owner``: its key naming who
    consumes the partition."""
    return table(
        ("topic", "partition", owner, "committed", "log end", "lag", "lag history"),
        (
            [
                link(f"/topics/{p['topic']}", p["topic"], partition=p["partition"]),
                num(p["partition"]),
                esc(p[owner] or "-"),
                "<td>no commit</td>" if p.get("no_commit") else num(p["committed"]),
                num(p["log_end"]),
                num(p["lag"]),
                _spark(history.points(_tp(p)), f"{p['topic']}-{p['partition']}"),
            ]
            for p in partitions
        ),
        ["warn" if (p["lag"] or 0) > 0 else "" for p in partitions],
    )
