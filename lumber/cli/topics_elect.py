"""``lumber topics elect-leaders``: Kafka's preferred replica election (see :mod:`lumber.cli.topics`).

It writes the request for the partitions whose leader is not their first replica while that replica is live
and in the ISR (the others are reported as skipped), then waits, at most ``--timeout``, until the controller
moved each, printing every move as it sees it in the partition's state node.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.errors import UnknownTopicError
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition
from lumber.cli.partition_row import PartitionRow, ids_text, partition_rows
from lumber.cli.topic_request_error import TopicRequestError

if TYPE_CHECKING:
    from lumber.config import LumberConfig

ELECTION_TIMEOUT_EXIT_CODE = 1
#: How often ``elect-leaders`` reads the partition states while it waits.
ELECTION_POLL_S = 0.1
#: ``elect-leaders --timeout`` unless given.
DEFAULT_ELECTION_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class _Election:
    """The partitions ``elect-leaders`` looked at, sorted into what it will do with each."""

    to_move: dict[TopicPartition, PartitionRow]
    already: list[PartitionRow]
    skipped: list[tuple[PartitionRow, str]]


def elect_leaders(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    if args.partition is not None and args.topic is None:
        raise TopicRequestError("--partition needs --topic: which topic's partition?")
    brokers = admin.live_brokers()
    rows = _election_rows(args, admin, brokers)
    plan = _plan_election(rows, brokers)
    moved: list[dict[str, Any]] = []

    def report(text: str) -> None:
        if not args.json:
            print(text)

    for row, reason in plan.skipped:
        report(f"{row.topic}-{row.partition}: skipped, {reason}")
    for row in plan.already:
        report(f"{row.topic}-{row.partition}: already led by its preferred replica {row.leader}")
    pending = dict(plan.to_move)
    if pending:
        admin.request_preferred_election(sorted(pending))
        deadline = time.monotonic() + args.timeout_ms / 1000
        while pending:
            for topic in sorted({tp.topic for tp in pending}):
                states = admin.describe_states(topic)
                for tp in [tp for tp in sorted(pending) if tp.topic == topic]:
                    before = pending[tp]
                    now = states.get(tp.partition)
                    if now is None or now.leader != before.replicas[0]:
                        continue
                    del pending[tp]
                    old = before.state
                    moved.append(
                        {
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "from": before.leader,
                            "to": now.leader,
                            "leader_epoch": now.leader_epoch,
                        }
                    )
                    report(
                        f"{tp.topic}-{tp.partition}: leader {before.leader} -> {now.leader} (leader epoch "
                        f"{old.leader_epoch if old is not None else -1} -> {now.leader_epoch})"
                    )
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(ELECTION_POLL_S)
    if args.json:
        print(
            json.dumps(
                {
                    "moved": moved,
                    "already_preferred": [
                        {"topic": r.topic, "partition": r.partition, "leader": r.leader} for r in plan.already
                    ],
                    "skipped": [
                        {"topic": r.topic, "partition": r.partition, "reason": why} for r, why in plan.skipped
                    ],
                    "not_moved": [
                        {"topic": tp.topic, "partition": tp.partition, "leader": row.leader}
                        for tp, row in sorted(pending.items())
                    ],
                }
            )
        )
    if pending:
        still = ", ".join(
            f"{tp.topic}-{tp.partition} (leader {row.leader}, preferred {row.replicas[0]})"
            for tp, row in sorted(pending.items())
        )
        print(
            f"lumber: error: the preferred leaders were not elected within {args.timeout_ms / 1000:g} s: "
            f"{still}; is a controller running? (the request waits in /admin/preferred_replica_election)",
            file=sys.stderr,
        )
        return ELECTION_TIMEOUT_EXIT_CODE
    if not args.json and not plan.to_move:
        print("nothing to move: every partition asked about is on its preferred leader or was skipped")
    return 0


def _election_rows(
    args: argparse.Namespace, admin: TopicAdmin, brokers: Mapping[int, BrokerInfo]
) -> list[PartitionRow]:
    if args.topic is None:
        rows: list[PartitionRow] = []
        for topic in admin.list_topics():
            try:
                rows.extend(partition_rows(admin, topic, brokers))
            except UnknownTopicError:
                continue  # deleted since the listing
        return rows
    rows = partition_rows(admin, args.topic, brokers)
    if args.partition is None:
        return rows
    chosen = [row for row in rows if row.partition == args.partition]
    if not chosen:
        raise TopicRequestError(
            f"--partition {args.partition}: topic {args.topic!r} has partitions 0 to {len(rows) - 1}"
        )
    return chosen


def _plan_election(rows: Sequence[PartitionRow], brokers: Mapping[int, BrokerInfo]) -> _Election:
    """Kafka's preferred election only moves a partition whose preferred replica is live and in the ISR."""
    to_move: dict[TopicPartition, PartitionRow] = {}
    already: list[PartitionRow] = []
    skipped: list[tuple[PartitionRow, str]] = []
    for row in rows:
        preferred = row.replicas[0]
        if row.state is None:
            skipped.append((row, "it has no partition state yet"))
        elif row.preferred_leader and row.leader_live:
            already.append(row)
        elif preferred not in brokers:
            why = f"its preferred replica {preferred} is not live (leader stays {row.leader})"
            skipped.append((row, why))
        elif preferred not in row.isr:
            skipped.append(
                (row, f"its preferred replica {preferred} is not in the ISR {ids_text(row.isr) or '(empty)'}")
            )
        else:
            to_move[TopicPartition(row.topic, row.partition)] = row
    return _Election(to_move, already, skipped)
