"""``lumber topics create|list|describe|delete``: topics in the ZooKeeper of ``[zookeeper] connect``.

The commands talk to ZooKeeper directly (:class:`broker.cluster.topic_admin.TopicAdmin`), as Kafka's
``kafka-topics.sh --zookeeper`` did; brokers watch ``/brokers/topics`` and create or delete their partitions.

    lumber topics create events --partitions 12              spread over the live brokers
    lumber topics create events --assignment "0:1,1:2,2:3"   partition:broker, one broker per partition
    lumber topics list
    lumber topics describe events                            partition, leader, replicas, leader live?
    lumber topics delete events

Every command takes ``--json``. Exit codes: 0 done, 1 error (ZooKeeper unreachable, no live brokers), 2 bad
input (invalid name or partitions, the topic exists / does not exist).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from broker.cluster.errors import (
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicError,
)
from broker.cluster.topic_admin import TopicAdmin
from broker.record.errors import InvalidTopicError
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.zookeeper_session import zookeeper_session
from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2
#: Errors caused by what the user typed: exit code 2 with the message alone.
_BAD_INPUT = (InvalidTopicError, InvalidPartitionsError, TopicExistsError, UnknownTopicError)

_ASSIGNMENT_ITEM = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")

Handler = Callable[[argparse.Namespace, TopicAdmin], int]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe and delete topics (in ZooKeeper)")
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    create = sub.add_parser("create", help="create a topic, its partitions spread over the live brokers")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, help="number of partitions (default: the assignment's)")
    create.add_argument(
        "--assignment",
        type=_parse_assignment,
        metavar='"P:BROKER,..."',
        help='place each partition explicitly, e.g. "0:1,1:2,2:3" (partitions 0..n-1, live brokers)',
    )
    _common(create)
    create.set_defaults(handler=_run(_create))

    listing = sub.add_parser("list", help="list the topics")
    _common(listing)
    listing.set_defaults(handler=_run(_list))

    describe = sub.add_parser("describe", help="show each partition's leader and replicas")
    describe.add_argument("topic")
    _common(describe)
    describe.set_defaults(handler=_run(_describe))

    delete = sub.add_parser("delete", help="delete a topic; brokers delete its partitions and data")
    delete.add_argument("topic")
    _common(delete)
    delete.set_defaults(handler=_run(_delete))


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _parse_assignment(text: str) -> dict[int, list[int]]:
    """``"0:1,1:2"`` -> ``{0: [1], 1: [2]}``."""
    assignment: dict[int, list[int]] = {}
    for item in text.split(","):
        match = _ASSIGNMENT_ITEM.fullmatch(item)
        if match is None:
            raise argparse.ArgumentTypeError(
                f'{item.strip()!r} is not PARTITION:BROKER (expected e.g. "0:1,1:2,2:3")'
            )
        number, broker_id = int(match[1]), int(match[2])
        if number in assignment:
            raise argparse.ArgumentTypeError(f"partition {number} is assigned twice")
        assignment[number] = [broker_id]
    return assignment


def _run(handler: Handler) -> Callable[[argparse.Namespace, LumberConfig], int]:
    """Wrap ``handler`` with a ZooKeeper session and the bad-input exit code."""

    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        if not args.debug:  # kazoo logs every connection attempt: noise next to our own one-line error
            logging.getLogger("kazoo").setLevel(logging.ERROR)
        try:
            with zookeeper_session(args, config) as client:
                admin = TopicAdmin(client)
                return handler(args, admin)
        except _BAD_INPUT as exc:
            if args.debug:
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


def _create(args: argparse.Namespace, admin: TopicAdmin) -> int:
    assignment: dict[int, list[int]] | None = args.assignment
    partitions: int | None = args.partitions
    if partitions is None:
        if assignment is None:
            raise InvalidPartitionsError(f"topic {args.topic!r}: give --partitions N or --assignment")
        partitions = len(assignment)
    created = admin.create_topic(args.topic, partitions, assignment=assignment)
    if args.json:
        print(json.dumps({"topic": args.topic, "partitions": _json_assignment(created)}))
    else:
        placed = ", ".join(f"{p}->{','.join(map(str, r))}" for p, r in sorted(created.items()))
        print(f"created topic {args.topic!r} with {len(created)} partitions: {placed}")
    return 0


def _list(args: argparse.Namespace, admin: TopicAdmin) -> int:
    topics = admin.list_topics()
    if args.json:
        print(json.dumps(topics))
    elif not topics:
        print("no topics")
    else:
        for topic in topics:
            print(topic)
    return 0


def _describe(args: argparse.Namespace, admin: TopicAdmin) -> int:
    assignment = admin.describe_topic(args.topic)
    brokers = admin.live_brokers()
    rows: list[dict[str, Any]] = []
    for partition, replicas in sorted(assignment.items()):
        leader = brokers.get(replicas[0])
        rows.append(
            {
                "partition": partition,
                "leader": replicas[0],
                "replicas": list(replicas),
                "leader_live": leader is not None,
                "leader_address": leader.address if leader is not None else None,
            }
        )
    if args.json:
        print(json.dumps({"topic": args.topic, "partitions": rows}))
        return 0
    print(f"topic {args.topic!r}: {len(rows)} partitions")
    print(f"  {'partition':>9}  {'leader':>6}  {'replicas':<10}  leader live")
    for row in rows:
        live = f"yes ({row['leader_address']})" if row["leader_live"] else "NO"
        replicas_text = ",".join(str(b) for b in row["replicas"])
        print(f"  {row['partition']:>9}  {row['leader']:>6}  {replicas_text:<10}  {live}")
    return 0


def _delete(args: argparse.Namespace, admin: TopicAdmin) -> int:
    admin.delete_topic(args.topic)
    if args.json:
        print(json.dumps({"deleted": args.topic}))
    else:
        print(f"deleted topic {args.topic!r}")
    return 0


def _json_assignment(assignment: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(replicas) for p, replicas in sorted(assignment.items())}
