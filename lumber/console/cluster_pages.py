"""The cluster page (``/``): its health first (a banner naming brokers down, partitions offline, under min
ISR or under-replicated, from :meth:`~lumber.console.cluster_reader.ClusterView.problems`), then the
brokers (the controller marked, brokers that are down listed as down), and every topic with its
partitions, leaders, replicas, ISR and offsets, each problem marked on its row. Internal topics
(``__consumer_offsets``, ``_audit``) are hidden unless ``?internal=1`` (a link toggles it); the banner
counts them either way."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from lumber.console.cluster_reader import read_cluster
from lumber.console.page import banner, esc, link, num, respond, table
from lumber.console.sources import Sources, request_sources
from lumber.console.svg import bars

router = APIRouter()


@router.get("/")
def cluster_page(
    request: Request, sources: Annotated[Sources, Depends(request_sources)], internal: bool = False
) -> Response:
    cluster = read_cluster(sources)
    down = cluster.down_brokers
    broker_rows = [
        [
            num(b.broker_id),
            esc(b.address),
            "up",
            esc("controller" if b.broker_id == cluster.controller_id else ""),
        ]
        for _, b in sorted(cluster.brokers.items())
    ] + [[num(b), "-", "<td><b>down</b></td>", ""] for b in down]
    parts = [
        banner(cluster.problems()),
        (
            f"<p>Cluster id <code>{esc(cluster.cluster_id or '-')}</code>, ZooKeeper "
            f"<code>{esc(sources.config.zookeeper.connect)}</code>, registry "
            f"<code>{esc(sources.registry_url)}</code></p>"
        ),
        f"<h2>Brokers ({len(cluster.brokers)} live, {len(down)} down)</h2>",
        table(
            ("id", "endpoint", "state", "role"),
            broker_rows,
            [""] * len(cluster.brokers) + ["bad"] * len(down),
        ),
    ]
    shown = [t for t in cluster.topics if internal or not t.internal]
    hidden = len(cluster.topics) - len(shown)
    toggle = (
        link("/", f"show internal topics ({hidden})", internal=1)
        if hidden
        else link("/", "hide internal topics")
        if internal
        else ""
    )
    parts.append(f'<h2>Topics ({len(shown)})</h2><p id="internal-toggle">{toggle}</p>')
    rows = []
    classes = []
    for topic in shown:
        for p in topic.partitions:
            rows.append(
                [
                    link(f"/topics/{topic.name}", topic.name, partition=p.partition),
                    num(p.partition),
                    "<td>offline</td>" if p.leader is None else num(p.leader),
                    esc(",".join(map(str, p.replicas))),
                    esc(",".join(map(str, p.isr))),
                    esc(p.marks),
                    num(p.log_start_offset),
                    num(p.log_end_offset),
                    num(p.messages),
                ]
            )
            classes.append(
                "bad" if p.leader is None or p.under_min_isr else "warn" if p.under_replicated else ""
            )
    parts.append(
        table(
            (
                "topic",
                "partition",
                "leader",
                "replicas",
                "isr",
                "problems",
                "log start",
                "log end",
                "messages",
            ),
            rows,
            classes,
        )
    )
    if shown:
        parts.append("<h2>Messages per topic</h2>")
        parts.append(bars([t.name for t in shown], [t.messages for t in shown]))
    return respond(request, "Cluster", "".join(parts), cluster.to_json())
