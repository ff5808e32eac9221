"""``lumber topics create|list|describe|alter-config|delete|elect-leaders``: topics in ZooKeeper.

The commands talk to ZooKeeper directly (:class:`broker.cluster.topic_admin.TopicAdmin`), as Kafka's
``kafka-topics.sh --zookeeper`` did; brokers watch ``/brokers/topics`` and create or delete their partitions,
and the controller watches ``/admin/preferred_replica_election``.

    lumber topics create events --partitions 12 --replication-factor 3    spread over the live brokers
    lumber topics create events --assignment "0:1:2,1:2:0,2:0:1"          partition:replica:replica...
    lumber topics create events --partitions 3 --config min.insync.replicas=2
    lumber topics list [--under-replicated]
    lumber topics describe events          per partition: leader, leader epoch, replicas, ISR, status;
                                           every topic config, its value and where it comes from
    lumber topics alter-config events --set cleanup.policy=compact --set segment.bytes=1048576 \
                                      --delete retention.ms
    lumber topics elect-leaders [--topic events [--partition 1]] [--timeout 30s]
    lumber topics alter events --partitions 24             add partitions (warns: keys move)
    lumber topics alter events --replication-factor 3      move replicas (:mod:`lumber.cli.topics_alter`)
    lumber topics delete events

``--replication-factor`` defaults to ``[broker] default_replication_factor`` (``lumber dev up --brokers N``
writes ``min(N, 3)`` there). A factor above the number of live brokers is refused here, naming the live
brokers, before anything is written. ``--config`` takes the topic configs that Lumber reads
(:data:`TOPIC_CONFIGS`); any other key is refused, naming it. A partition is *under-replicated* when its ISR
is smaller than its replicas (Kafka's definition).

``alter-config`` changes a topic's overrides in ``/config/topics/<topic>`` as IncrementalAlterConfigs does
(``--set`` and ``--delete``, checked as on create), by compare-and-set
(:class:`~broker.cluster.topic_config_store.TopicConfigStore`), so it loses no concurrent change; every
broker applies the result to the topic's logs without a restart. ``describe`` lists every topic config
with its value and source: ``topic override``, ``lumber.toml [log] <key>`` (a broker setting other than the
built-in default) or ``default``; the broker settings are those of the ``lumber.toml`` this command reads,
which are the brokers' when they share it.

``elect-leaders`` is Kafka's preferred replica election (``kafka-leader-election.sh --election-type
preferred``): it writes the request for the partitions whose leader is not their first replica while that
replica is live and in the ISR (the others are reported as skipped, as Kafka's tool does), then waits, at
most ``--timeout``, until the controller moved each, printing every move as it sees it in the partition's
state node. Nothing to move: it says so and writes nothing.

Every command takes ``--json``. Exit codes: 0 done, 1 error (ZooKeeper unreachable, no live brokers, the
election did not finish in time), 2 bad input (invalid name, partitions, replication factor or config; the
topic exists / does not exist).

Layout: the commands' parsers and ``create``, ``list``, ``describe``, ``alter-config``, ``delete`` here;
``elect-leaders`` in :mod:`lumber.cli.topics_elect`; :class:`~lumber.cli.partition_row.PartitionRow` (one
partition as ``describe``, ``list --under-replicated`` and ``elect-leaders`` show it) in
:mod:`lumber.cli.partition_row`; the bad-input error in :mod:`lumber.cli.topic_request_error`.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicConfigError,
    ReassignmentInProgressError,
    TopicExistsError,
    UnknownTopicError,
)
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.topic_config import TOPIC_CONFIG_KEYS, TOPIC_CONFIGS, check_topic_configs
from broker.cluster.topic_config_store import TopicConfigStore
from broker.record.errors import InvalidTopicError
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.partition_row import PartitionRow, ids_text, partition_rows
from lumber.cli.throttle_option import add_throttle_option
from lumber.cli.topic_request_error import TopicRequestError
from lumber.cli.topics_alter import alter as alter_topic
from lumber.cli.topics_elect import DEFAULT_ELECTION_TIMEOUT_MS, elect_leaders
from lumber.cli.zookeeper_session import zookeeper_session
from pipeline.durations import DURATION_HELP, DurationAction

if TYPE_CHECKING:
    from broker.protocol.messages.config_resource import ConfigSource
    from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2

#: Errors caused by what the user typed: exit code 2 with the message alone.
_BAD_INPUT = (
    InvalidReplicaAssignmentError,
    ReassignmentInProgressError,
    InvalidTopicError,
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicError,
    TopicRequestError,
)

_ASSIGNMENT_ITEM = re.compile(r"\s*(\d+)((?:\s*:\s*\d+)+)\s*")

Handler = Callable[[argparse.Namespace, TopicAdmin, "LumberConfig"], int]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics", help="create, list, describe and delete topics, elect preferred leaders (in ZooKeeper)"
    )
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    create = sub.add_parser("create", help="create a topic, its partitions spread over the live brokers")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, help="number of partitions (default: the assignment's)")
    create.add_argument(
        "--replication-factor",
        type=_positive_int,
        metavar="N",
        help="replicas of each partition, at most the live brokers (default: [broker] "
        "default_replication_factor); not with --assignment, whose lists are the replicas",
    )
    create.add_argument(
        "--assignment",
        type=_parse_assignment,
        metavar='"P:BROKER[:BROKER...],..."',
        help="place each partition explicitly: partition, then its replicas, the first the preferred "
        'leader, e.g. "0:1:2,1:2:0,2:0:1" (partitions 0..n-1, live brokers, as many replicas each)',
    )
    create.add_argument(
        "--config",
        dest="configs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config, repeatable: " + ", ".join(f"{k} ({v})" for k, v in TOPIC_CONFIGS.items()),
    )
    _common(create)
    create.set_defaults(handler=_run(_create))

    listing = sub.add_parser("list", help="list the topics (or the under-replicated partitions)")
    listing.add_argument(
        "--under-replicated",
        action="store_true",
        help="list the partitions whose ISR is smaller than their replicas instead, with leader and ISR",
    )
    _common(listing)
    listing.set_defaults(handler=_run(_list))

    describe = sub.add_parser(
        "describe",
        help="show each partition's leader, leader epoch, replicas and ISR, and the topic's configs",
    )
    describe.add_argument("topic")
    _common(describe)
    describe.set_defaults(handler=_run(_describe))

    elect = sub.add_parser(
        "elect-leaders",
        help="move leadership back to each partition's preferred (first) replica and wait until it moved",
    )
    elect.add_argument("--topic", help="only this topic's partitions (default: every topic)")
    elect.add_argument(
        "--partition", type=int, metavar="P", help="only this partition of --topic (default: all of them)"
    )
    elect.add_argument(
        "--timeout",
        dest="timeout_ms",
        action=DurationAction,
        default=DEFAULT_ELECTION_TIMEOUT_MS,
        metavar="DURATION",
        help=f"how long to wait for the controller to move the leaders, {DURATION_HELP} (default: 30s)",
    )
    _common(elect)
    elect.set_defaults(handler=_run(elect_leaders))

    alter = sub.add_parser(
        "alter-config",
        help="set or delete a topic's config overrides; every broker applies them without a restart",
    )
    alter.add_argument("topic")
    alter.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a topic config, repeatable: " + ", ".join(TOPIC_CONFIGS),
    )
    alter.add_argument(
        "--delete",
        dest="deletes",
        action="append",
        default=[],
        metavar="KEY",
        help="remove an override, repeatable (the brokers' own setting applies again)",
    )
    _common(alter)
    alter.set_defaults(handler=_run(_alter_config))

    grow = sub.add_parser(
        "alter", help="add partitions to a topic, or change its replication factor (moves replicas)"
    )
    grow.add_argument("topic")
    change = grow.add_mutually_exclusive_group(required=True)
    change.add_argument(
        "--partitions", type=_positive_int, metavar="N", help="grow to N partitions (keys then move)"
    )
    change.add_argument(
        "--replication-factor", type=_positive_int, metavar="N", help="give every partition N replicas"
    )
    grow.add_argument(
        "--timeout",
        dest="timeout_ms",
        action=DurationAction,
        default=600_000,
        metavar="DURATION",
        help=f"with --replication-factor: how long to wait for the moves, {DURATION_HELP} (default: 10m)",
    )
    add_throttle_option(grow)
    _common(grow)
    grow.set_defaults(handler=_run(alter_topic))

    delete = sub.add_parser("delete", help="delete a topic; brokers delete its partitions and data")
    delete.add_argument("topic")
    _common(delete)
    delete.set_defaults(handler=_run(_delete))


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: a partition needs at least 1 replica")
    return value


def _parse_assignment(text: str) -> dict[int, list[int]]:
    """``"0:1:2,1:2:0"`` -> ``{0: [1, 2], 1: [2, 0]}``: each partition with its replicas, checked to name
    no broker twice in a partition and to give every partition as many replicas."""
    assignment: dict[int, list[int]] = {}
    for item in text.split(","):
        match = _ASSIGNMENT_ITEM.fullmatch(item)
        if match is None:
            raise argparse.ArgumentTypeError(
                f'{item.strip()!r} is not PARTITION:BROKER[:BROKER...] (expected e.g. "0:1:2,1:2:0")'
            )
        number = int(match[1])
        replicas = [int(b) for b in match[2].split(":")[1:]]
        if number in assignment:
            raise argparse.ArgumentTypeError(f"partition {number} is assigned twice")
        twice = sorted({b for b in replicas if replicas.count(b) > 1})
        if twice:
            raise argparse.ArgumentTypeError(
                f"partition {number} names broker {twice[0]} twice ({':'.join(map(str, replicas))}): "
                "each replica must be on another broker"
            )
        if assignment:
            first, first_replicas = next(iter(assignment.items()))
            if len(replicas) != len(first_replicas):
                raise argparse.ArgumentTypeError(
                    f"partition {number} has {len(replicas)} replicas, partition {first} has "
                    f"{len(first_replicas)}: every partition needs the same number"
                )
        assignment[number] = replicas
    return assignment


def _key_values(option: str, items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as ``{key: value}``; a malformed item or a key given twice is refused."""
    configs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise TopicRequestError(f"{option} {item!r}: expected KEY=VALUE, e.g. min.insync.replicas=2")
        if key in configs:
            raise TopicRequestError(f"{option} {key} is given twice ({configs[key]!r} and {value!r})")
        configs[key] = value
    return configs


def _parse_configs(topic: str, items: Sequence[str], replication_factor: int) -> dict[str, str]:
    """``--config`` values as ``{key: value}``, checked as every topic's configs are
    (:func:`broker.cluster.topic_config.check_topic_configs`)."""
    configs = _key_values("--config", items)
    try:
        return check_topic_configs(topic, configs, replication_factor)
    except InvalidTopicConfigError as exc:
        raise TopicRequestError(f"--config: {exc}") from exc


def _run(handler: Handler) -> Callable[[argparse.Namespace, LumberConfig], int]:
    """Wrap ``handler`` with a ZooKeeper session and the bad-input exit code."""

    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        if not args.debug:  # kazoo logs every connection attempt: noise next to our own one-line error
            logging.getLogger("kazoo").setLevel(logging.ERROR)
        try:
            with zookeeper_session(args, config) as client:
                admin = TopicAdmin(client)
                return handler(args, admin, config)
        except _BAD_INPUT as exc:
            if args.debug:
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


# ---------------------------------------------------------------------------------------------- create


def _create(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    assignment: dict[int, list[int]] | None = args.assignment
    partitions: int | None = args.partitions
    if assignment is not None and args.replication_factor is not None:
        raise TopicRequestError(
            f"topic {args.topic!r}: give --replication-factor or --assignment, not both (the assignment's "
            "lists are the replicas)"
        )
    if partitions is None:
        if assignment is None:
            raise InvalidPartitionsError(f"topic {args.topic!r}: give --partitions N or --assignment")
        partitions = len(assignment)
    if assignment is not None:
        replication_factor = len(next(iter(assignment.values())))
    else:
        replication_factor = args.replication_factor or config.broker.default_replication_factor
        _check_replication_factor(args.topic, replication_factor, admin.live_brokers(), args)
    configs = _parse_configs(args.topic, args.configs, replication_factor)
    created = admin.create_topic(
        args.topic,
        partitions,
        replication_factor=replication_factor,
        assignment=assignment,
        configs=configs or None,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "topic": args.topic,
                    "replication_factor": replication_factor,
                    "configs": configs,
                    "partitions": _json_assignment(created),
                }
            )
        )
    else:
        placed = ", ".join(f"{p}->{','.join(map(str, r))}" for p, r in sorted(created.items()))
        extra = f", configs {_configs_text(configs)}" if configs else ""
        print(
            f"created topic {args.topic!r} with {len(created)} partitions, replication factor "
            f"{replication_factor}{extra}: {placed}"
        )
    return 0


def _check_replication_factor(
    topic: str, replication_factor: int, brokers: Mapping[int, BrokerInfo], args: argparse.Namespace
) -> None:
    """Refuse a factor above the live brokers (no brokers at all: ``create_topic`` says so itself)."""
    if not brokers or replication_factor <= len(brokers):
        return
    given = (
        f"--replication-factor {replication_factor}"
        if args.replication_factor is not None
        else f"replication factor {replication_factor} ([broker] default_replication_factor)"
    )
    raise TopicRequestError(
        f"topic {topic!r}: {given} needs {replication_factor} live brokers, but {len(brokers)} "
        f"{'is' if len(brokers) == 1 else 'are'} live: {', '.join(map(str, sorted(brokers)))}"
    )


# ------------------------------------------------------------------------------------------ list, describe


def _list(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    topics = admin.list_topics()
    if args.under_replicated:
        return _list_under_replicated(args, admin, topics)
    if args.json:
        print(json.dumps(topics))
    elif not topics:
        print("no topics")
    else:
        for topic in topics:
            print(topic)
    return 0


def _list_under_replicated(args: argparse.Namespace, admin: TopicAdmin, topics: list[str]) -> int:
    brokers = admin.live_brokers()
    found: list[PartitionRow] = []
    for topic in topics:
        try:
            rows = partition_rows(admin, topic, brokers)
        except UnknownTopicError:
            continue  # deleted since the listing
        found.extend(row for row in rows if row.under_replicated)
    if args.json:
        print(json.dumps([row.to_json() for row in found]))
    elif not found:
        print("no under-replicated partitions")
    else:
        for row in found:
            print(
                f"{row.topic}-{row.partition}: leader {row.leader}"
                f"{'' if row.leader_live else ' (NOT live)'}, replicas {ids_text(row.replicas)}, "
                f"isr {ids_text(row.isr)}"
            )
    return 0


def _describe(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    from broker.server.config_entries import topic_config_entries

    rows = partition_rows(admin, args.topic, admin.live_brokers())
    configs = dict(admin.topic_config(args.topic))
    replication_factor = len(rows[0].replicas) if rows else 0
    under = sum(row.under_replicated for row in rows)
    entries = topic_config_entries(configs, config.log, config.broker)
    if args.json:
        print(
            json.dumps(
                {
                    "topic": args.topic,
                    "replication_factor": replication_factor,
                    "configs": configs,
                    "partitions": [_without_topic(row.to_json()) for row in rows],
                    "all_configs": {
                        e.name: {"value": e.value, "source": _source_text(e.name, e.source)} for e in entries
                    },
                }
            )
        )
        return 0
    header = f"topic {args.topic!r}: {len(rows)} partitions, replication factor {replication_factor}"
    if configs:
        header += f", configs {_configs_text(configs)}"
    if under:
        header += f", {under} under-replicated"
    print(header)
    width = max([len("replicas"), *(len(ids_text(row.replicas)) for row in rows)])
    print(f"  {'partition':>9}  {'leader':>6}  {'epoch':>5}  {'replicas':<{width}}  {'isr':<{width}}  status")
    for row in rows:
        epoch = str(row.state.leader_epoch) if row.state is not None else "-"
        print(
            f"  {row.partition:>9}  {row.leader:>6}  {epoch:>5}  {ids_text(row.replicas):<{width}}  "
            f"{ids_text(row.isr):<{width}}  {row.status()}"
        )
    name_width = max(len(e.name) for e in entries)
    value_width = max([len("value"), *(len(e.value) for e in entries)])
    print(f"  {'config':<{name_width}}  {'value':<{value_width}}  from")
    for entry in entries:
        source = _source_text(entry.name, entry.source)
        print(f"  {entry.name:<{name_width}}  {entry.value:<{value_width}}  {source}")
    return 0


def _source_text(name: str, source: ConfigSource) -> str:
    """Where a topic config's value comes from, in words (``topic override`` marks the overrides)."""
    from broker.protocol.messages.config_resource import ConfigSource

    if source is ConfigSource.TOPIC_CONFIG:
        return "topic override"
    if source is ConfigSource.STATIC_BROKER_CONFIG:
        key = TOPIC_CONFIG_KEYS[name]
        return f"lumber.toml [{key.section}] {key.field}"
    return "default"


# ------------------------------------------------------------------------------------------ alter-config


def _alter_config(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    sets = _key_values("--set", args.sets)
    deletes = list(dict.fromkeys(key.strip() for key in args.deletes))
    if not sets and not deletes:
        raise TopicRequestError(f"topic {args.topic!r}: give --set KEY=VALUE or --delete KEY (or both)")
    both = sorted(set(sets) & set(deletes))
    if both:
        raise TopicRequestError(f"topic {args.topic!r}: {both[0]} is both set and deleted")
    unknown = [key for key in deletes if key not in TOPIC_CONFIG_KEYS]
    if unknown:
        raise TopicRequestError(
            f"--delete {unknown[0]}: Lumber does not read the topic config {unknown[0]!r} (accepted: "
            f"{', '.join(TOPIC_CONFIG_KEYS)})"
        )
    before: dict[str, str] = {}

    def change(current: Mapping[str, str], _replication_factor: int) -> dict[str, str | None]:
        before.clear()
        before.update(current)
        new: dict[str, str | None] = {k: v for k, v in current.items() if k not in deletes}
        new.update(sets)
        return new

    try:
        after = TopicConfigStore(admin.client).alter(args.topic, change)
    except InvalidTopicConfigError as exc:
        raise TopicRequestError(f"--set: {exc}") from exc
    if args.json:
        print(json.dumps({"topic": args.topic, "configs": after, "before": before}))
    else:
        print(
            f"topic {args.topic!r}: configs now {_configs_text(after) or 'none (the brokers own settings)'}"
            f" (before: {_configs_text(before) or 'none'})"
        )
    return 0


# ------------------------------------------------------------------------------------------ delete


def _delete(args: argparse.Namespace, admin: TopicAdmin, config: LumberConfig) -> int:
    admin.delete_topic(args.topic)
    if args.json:
        print(json.dumps({"deleted": args.topic}))
    else:
        print(f"deleted topic {args.topic!r}")
    return 0


def _configs_text(configs: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(configs.items()))


def _without_topic(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "topic"}


def _json_assignment(assignment: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(replicas) for p, replicas in sorted(assignment.items())}
