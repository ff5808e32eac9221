"""The cluster page (``/``): brokers (the controller marked), and every topic with its partitions, leaders,
replicas, ISR and offsets; offline partitions and under-replicated ones are highlighted."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from lumber.console.cluster_reader import read_cluster
from lumber.console.page import esc, link, num, respond, table
from lumber.console.sources import Sources, request_sources
from lumber.console.svg import bars

router = APIRouter()


@router.get("/")
def cluster_page(request: Request, sources: Annotated[Sources, Depends(request_sources)]) -> Response:
    cluster = read_cluster(sources)
    parts = [
        (
            f"<p>Cluster id <code>{esc(cluster.cluster_id or '-')}</code>, ZooKeeper "
            f"<code>{esc(sources.config.zookeeper.connect)}</code>, registry "
            f"<code>{esc(sources.registry_url)}</code></p>"
        ),
        f"<h2>Brokers ({len(cluster.brokers)} live)</h2>",
        table(
            ("id", "endpoint", "role"),
            (
                [
                    num(b.broker_id),
                    esc(b.address),
                    esc("controller" if b.broker_id == cluster.controller_id else ""),
                ]
                for _, b in sorted(cluster.brokers.items())
            ),
        ),
        f"<h2>Topics ({len(cluster.topics)})</h2>",
    ]
    rows = []
    classes = []
    for topic in cluster.topics:
        for p in topic.partitions:
            rows.append(
                [
                    link(f"/topics/{topic.name}", topic.name, partition=p.partition),
                    num(p.partition),
                    "<td>offline</td>" if p.leader is None else num(p.leader),
                    esc(",".join(map(str, p.replicas))),
                    esc(",".join(map(str, p.isr)) + (" (under-replicated)" if p.under_replicated else "")),
                    num(p.log_start_offset),
                    num(p.log_end_offset),
                    num(p.messages),
                ]
            )
            classes.append("bad" if p.leader is None else "warn" if p.under_replicated else "")
    parts.append(
        table(
            ("topic", "partition", "leader", "replicas", "isr", "log start", "log end", "messages"),
            rows,
            classes,
        )
    )
    if cluster.topics:
        parts.append("<h2>Messages per topic</h2>")
        parts.append(bars([t.name for t in cluster.topics], [t.messages for t in cluster.topics]))
    return respond(request, "Cluster", "".join(parts), cluster.to_json())
