"""``lumber groups list|describe|lag|reset-offsets|delete``: consumer groups of both kinds.

Lumber has two kinds of consumer groups (``[group] protocol``): *zookeeper* groups, the paper's, kept in
ZooKeeper (``[zookeeper] connect``, :mod:`broker.client.groups.zookeeper.group_admin`), and *kafka* groups,
kept by the brokers' group coordinator (Kafka's group protocol: Lumber members with ``protocol = "kafka"`` and
any Kafka client; :mod:`broker.client.groups.kafka.kafka_group_admin`). Every command works on both and every
answer says which kind a group is; a name used by both kinds needs ``--kind``.

    lumber groups list                            every group: name, kind, members, generation or state
    lumber groups describe --group audit          members (kafka: client ids, hosts, assignments), per
                                                  partition: owner, committed offset, log end and lag
    lumber groups lag --group audit               lag per partition, once
    lumber groups lag --group audit --watch [--interval 10s] [--window 10] [--metrics-port 9310]
    lumber groups lag --all-groups --watch --metrics-port 9310      a lag exporter for every group
                                                  every interval: lag and Burrow's OK / WARNING / STALLED /
                                                  STOPPED over the last --window observations
                                                  (:mod:`broker.client.groups.lag_evaluation`); with
                                                  --metrics-port, also as Prometheus metrics
                                                  (:mod:`pipeline.lag_metrics`) on 127.0.0.1
                                                  ([lag_exporter] host or --metrics-host; users and
                                                  TLS from [lag_exporter]), and each
                                                  group's window as JSON at /lag-history
                                                  (:mod:`pipeline.lag_exporter`); a partition
                                                  consumed without a commit counts from its
                                                  auto.offset.reset position ([consumer]
                                                  auto_offset_reset), marked "no commit"
    lumber groups reset-offsets --group audit --topic events --to-earliest
    lumber groups reset-offsets --group audit --topic events --to-offset 1200      (clamped to the log)
    lumber groups reset-offsets --group audit --topic events --to-datetime 2026-11-22T10:00:00Z
    lumber groups delete --group audit            a group without members, and its offsets

A reset of a zookeeper group is the paper's rewind for a whole group
(:mod:`broker.client.groups.zookeeper.group_offsets`): it may run while the group consumes; the members that
own the partitions go on from the new offsets. A kafka group's offsets are reset only while it has no members,
as ``kafka-consumer-groups`` does (its members keep their positions in memory). ``lag`` judges both kinds; a
kafka group's commits come without their time (OffsetFetch), so they are timed by observation
(:meth:`LagWindow.commit_times <broker.client.groups.lag_evaluation.LagWindow.commit_times>`). Log end offsets
and offsets by time come from the brokers (``[consumer] bootstrap_servers``, else ZooKeeper). With
``--watch``, an observation that meets a broker down or ZooKeeper unreachable is reported on stderr and tried
again at the next interval, so that a lag exporter outlives a failover. Every command takes ``--json``. Exit
codes: 0 done, 1 error (ZooKeeper or brokers unreachable), 2 bad input (unknown group, bad date, a group with
members to delete or, kafka, to reset).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.errors import ClientError, GroupError
from broker.client.groups.kafka.kafka_group_admin import (
    KafkaGroupAdmin,
    KafkaGroupAdminError,
    KafkaGroupDescription,
)
from broker.client.groups.lag_evaluation import LagWindow, PartitionLag, group_status, reset_position
from broker.client.groups.zookeeper.group_admin import GroupAdmin, NonEmptyGroupError, UnknownGroupError
from broker.record.topic_partition import TopicPartition
from broker.web.errors import WebSecurityError
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.zookeeper_session import zookeeper_session
from pipeline.durations import DURATION_HELP, DurationError, parse_duration_ms

if TYPE_CHECKING:
    from broker.client.consumer.consumer import Consumer
    from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2
ZOOKEEPER_KIND = "zookeeper"
KAFKA_KIND = "kafka"
KINDS = (ZOOKEEPER_KIND, KAFKA_KIND)

Handler = Callable[[argparse.Namespace, "LumberConfig", "Admins"], int]


class BadGroupInputError(GroupError):
    """The command cannot be done on this group as asked (ambiguous name, members present)."""


class Admins:
    """The two kinds' admins for one command: ZooKeeper's now, the brokers' on first use."""

    def __init__(self, zookeeper: GroupAdmin, args: argparse.Namespace, config: LumberConfig) -> None:
        self.zookeeper = zookeeper
        self._args = args
        self._config = config
        self._kafka: KafkaGroupAdmin | None = None

    @property
    def kafka(self) -> KafkaGroupAdmin:
        if self._kafka is None:
            settings = self._config.consumer
            connect = self._args.zookeeper_connect or self._config.zookeeper.connect
            self._kafka = KafkaGroupAdmin(zookeeper_connect=connect, config=settings)
        return self._kafka

    def kind_of(self, group: str, wanted: str | None, *, may_be_new: bool = False) -> str:
        """Which kind ``group`` is (``wanted``: the user's ``--kind``); UnknownGroupError if neither."""
        found = [kind for kind in KINDS if wanted in (None, kind) and self._exists(kind, group)]
        if len(found) == 1:
            return found[0]
        if len(found) == 2:
            raise BadGroupInputError(
                f"consumer group {group!r} exists as a zookeeper group and as a kafka group: say which "
                "with --kind zookeeper or --kind kafka"
            )
        if may_be_new and wanted == KAFKA_KIND:
            return KAFKA_KIND
        raise UnknownGroupError(group)

    def _exists(self, kind: str, group: str) -> bool:
        if kind == ZOOKEEPER_KIND:
            return self.zookeeper.exists(group)
        try:
            return self.kafka.exists(group)
        except ClientError:
            if self.zookeeper.exists(group):
                return False  # brokers unreachable: the zookeeper group is the one meant
            raise

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.close()


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "groups", help="list, describe, rewind and delete consumer groups (zookeeper and kafka)"
    )
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="list the consumer groups")
    _common(listing)
    listing.set_defaults(handler=_run(_list))

    describe = sub.add_parser("describe", help="members, owners, committed offsets and lag of a group")
    describe.add_argument("--group", required=True)
    _kind_option(describe)
    _common(describe)
    describe.set_defaults(handler=_run(_describe))

    lag = sub.add_parser("lag", help="lag per partition; --watch adds Burrow's status over a window")
    which = lag.add_mutually_exclusive_group(required=True)
    which.add_argument("--group")
    which.add_argument(
        "--all-groups",
        action="store_true",
        help="every group of both kinds (or of --kind), as found at each observation",
    )
    _kind_option(lag)
    lag.add_argument(
        "--watch", action="store_true", help="observe every --interval until Ctrl-C (or --count)"
    )
    lag.add_argument(
        "--interval", default="10s", help=f"time between observations, {DURATION_HELP} (default 10s)"
    )
    lag.add_argument(
        "--window", type=int, default=10, help="observations the status is judged over (default 10)"
    )
    lag.add_argument("--count", type=int, help="with --watch: stop after this many observations")
    lag.add_argument("--metrics-port", type=int, help="with --watch: serve Prometheus metrics on this port")
    lag.add_argument(
        "--metrics-host", help="address of the metrics server (default: [lag_exporter] host, 127.0.0.1)"
    )
    _common(lag)
    lag.set_defaults(handler=_run(_lag))

    reset = sub.add_parser("reset-offsets", help="rewind (or skip) a group's offsets of a topic")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True)
    _kind_option(reset)
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start of every partition")
    target.add_argument("--to-latest", action="store_true", help="the log end of every partition")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to each log)")
    target.add_argument(
        "--to-datetime",
        type=_parse_datetime,
        metavar="ISO",
        help="the first record at or after this time, e.g. 2026-11-22T10:00:00Z (no zone: UTC)",
    )
    _common(reset)
    reset.set_defaults(handler=_run(_reset))

    delete = sub.add_parser("delete", help="delete a group without members, and its committed offsets")
    delete.add_argument("--group", required=True)
    _kind_option(delete)
    _common(delete)
    delete.set_defaults(handler=_run(_delete))


def _kind_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="the group's kind, when a zookeeper group and a kafka group share the name",
    )


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _parse_datetime(text: str) -> int:
    """ISO 8601 -> milliseconds since the epoch (a time without a zone is UTC)."""
    try:
        moment = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _run(handler: Handler) -> Callable[[argparse.Namespace, LumberConfig], int]:
    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        if not args.debug:  # kazoo logs every connection step at INFO: noise in a command's output
            logging.getLogger("kazoo").setLevel(logging.WARNING)
        try:
            with zookeeper_session(args, config) as client:
                admins = Admins(GroupAdmin(client), args, config)
                try:
                    return handler(args, config, admins)
                finally:
                    admins.close()
        except (UnknownGroupError, BadGroupInputError, NonEmptyGroupError, KafkaGroupAdminError) as exc:
            if args.debug:
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


@contextmanager
def _brokers(args: argparse.Namespace, config: LumberConfig) -> Iterator[Consumer]:
    """A consumer of no partitions, for ListOffsets."""
    from broker.client.consumer.consumer import Consumer  # its fetcher and batch codec: not for `groups list`

    settings = config.consumer
    connect = args.zookeeper_connect or config.zookeeper.connect
    with Consumer(settings, zookeeper_connect=None if settings.bootstrap_servers else connect) as consumer:
        yield consumer


def _list(args: argparse.Namespace, config: LumberConfig, admins: Admins) -> int:
    admin = admins.zookeeper
    rows: list[dict[str, Any]] = [
        {
            "group": g,
            "kind": ZOOKEEPER_KIND,
            "members": len(admin.members(g)),
            "generation": _generation(admin, g),
        }
        for g in admin.list_groups()
    ]
    for listed in admins.kafka.list_groups():
        members = len(admins.kafka.members(listed.group))
        rows.append({"group": listed.group, "kind": KAFKA_KIND, "members": members, "state": listed.state})
    rows.sort(key=lambda row: (row["group"], row["kind"]))
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no consumer groups")
    for row in rows:
        if row["kind"] == KAFKA_KIND:
            tail = f"state {row['state']}"
        else:
            tail = f"generation {'-' if row['generation'] is None else row['generation']}"
        print(f"{row['group']}\t{row['kind']}\tmembers {row['members']}\t{tail}")
    return 0


def _generation(admin: GroupAdmin, group: str) -> int | None:
    found = admin.generation(group)
    return None if found is None else found.generation


def _describe(args: argparse.Namespace, config: LumberConfig, admins: Admins) -> int:
    if admins.kind_of(args.group, args.kind) == KAFKA_KIND:
        with _brokers(args, config) as consumer:
            found = admins.kafka.describe(args.group, consumer.end_offsets)
        _print_kafka_description(args, found)
        return 0
    admin = admins.zookeeper
    with _brokers(args, config) as consumer:
        description = admin.describe(args.group, consumer.end_offsets)
    if args.json:
        print(json.dumps(description.to_json()))
        return 0
    generation = description.generation
    if generation is None:
        print(f"group {args.group!r} (zookeeper): no generation yet")
    else:
        print(
            f"group {args.group!r} (zookeeper): generation {generation.generation}, leader "
            f"{generation.leader}, strategy {generation.strategy}"
        )
    print(f"members ({len(description.members)}):")
    for m in description.members:
        subscription = ", ".join(f"{t}:{n}" for t, n in sorted(m.subscription.items()))
        print(f"  {m.consumer_id}  host {m.host} pid {m.pid}  subscription {subscription}")
    print(f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  owner")
    for p in description.partitions:
        print(
            f"  {p.topic:<20} {p.partition:>9}  {_dash(p.committed):>10}  {_dash(p.log_end):>10}  "
            f"{_dash(p.lag):>8}  {p.owner or '-'}"
        )
    return 0


def _print_kafka_description(args: argparse.Namespace, found: KafkaGroupDescription) -> None:
    if args.json:
        print(json.dumps(found.to_json()))
        return
    protocol = found.protocol or "-"
    print(
        f"group {found.group!r} (kafka): state {found.state}, protocol {protocol}, coordinator "
        f"{found.coordinator.node_id}"
    )
    print(f"members ({len(found.members)}):")
    for m in found.members:
        assigned = ",".join(str(tp) for tp in m.assignment) or "-"
        instance = f"  instance {m.group_instance_id}" if m.group_instance_id else ""
        print(f"  {m.member_id}  client {m.client_id}  host {m.client_host}{instance}  assignment {assigned}")
    print(
        f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  "
        "member  host  client"
    )
    for p in found.partitions:
        who = (
            "-  -  -"
            if p.member is None
            else f"{p.member.member_id}  {p.member.client_host}  {p.member.client_id}"
        )
        print(
            f"  {p.topic:<20} {p.partition:>9}  {_dash(p.committed):>10}  {_dash(p.log_end):>10}  "
            f"{_dash(p.lag):>8}  {who}"
        )


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _lag(args: argparse.Namespace, config: LumberConfig, admins: Admins) -> int:
    kind = None if args.group is None else admins.kind_of(args.group, args.kind)
    try:
        interval_s = parse_duration_ms(args.interval, "--interval") / 1000
        LagWindow(args.window)  # checks --window
    except (DurationError, ValueError) as exc:
        print(f"lumber: error: {exc}", file=sys.stderr)
        return BAD_INPUT_EXIT_CODE
    # the metrics and their HTTP server (prometheus_client): only for `groups lag`
    from pipeline.lag_exporter import start_lag_exporter
    from pipeline.lag_metrics import LagCollector

    collector = LagCollector()
    if args.watch and args.metrics_port is not None:
        security = config.lag_exporter.security(args.metrics_host)
        try:
            for warning in security.check():
                print(f"lumber: warning: {warning}", file=sys.stderr, flush=True)
            start_lag_exporter(collector, args.metrics_port, security)
        except WebSecurityError as exc:
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE
    count = (args.count if args.count is not None else -1) if args.watch else 1
    observed = 0
    said_none = False
    reset = config.consumer.auto_offset_reset
    windows: dict[tuple[str, str], LagWindow] = {}
    with _brokers(args, config) as consumer:
        while count < 0 or observed < count:
            if observed:
                time.sleep(interval_s)
            observed += 1
            try:
                watched = _every_group(admins, args.kind) if kind is None else [(args.group, kind)]
            except _OBSERVATION_ERRORS as exc:
                if not args.watch:
                    raise
                _observation_failed(args, observed, "the groups", exc)
                continue
            if not watched and not said_none and not args.json:
                print("no consumer groups", flush=True)  # said once, until there are some again
            said_none = not watched
            for group, gone_kind in [key for key in windows if key not in watched]:
                del windows[(group, gone_kind)]
                collector.forget(group, gone_kind)
            for group, group_kind in watched:
                window = windows.setdefault((group, group_kind), LagWindow(args.window))
                try:
                    state = _observe(admins, consumer, group, group_kind, window, reset)
                except _OBSERVATION_ERRORS as exc:
                    if not args.watch:
                        raise
                    _observation_failed(args, observed, f"{group_kind} group {group!r}", exc)
                    continue
                evaluation = window.evaluate(time.time_ns() // 1_000_000)
                collector.update(group, group_kind, evaluation, window.samples())
                _print_lag(args, group, group_kind, state, evaluation, observed)
    return 0


#: What one observation may meet while the cluster changes under a watch (a broker down, ZooKeeper
#: unreachable, a group deleted meanwhile): ``--watch`` says so and observes again at the next interval,
#: so that a lag exporter outlives a broker's failover; a single observation fails with it.
_OBSERVATION_ERRORS = (ClientError, KazooException, KazooTimeoutError)


def _observation_failed(args: argparse.Namespace, observed: int, what: str, exc: Exception) -> None:
    print(
        f"lumber: warning: observation {observed} of {what} failed ({exc}); "
        f"observing again in {args.interval}",
        file=sys.stderr,
        flush=True,
    )


def _every_group(admins: Admins, kind: str | None) -> list[tuple[str, str]]:
    """Every group of both kinds (or of ``--kind``) as ``(group, kind)``, sorted."""
    found: list[tuple[str, str]] = []
    if kind in (None, ZOOKEEPER_KIND):
        found.extend((group, ZOOKEEPER_KIND) for group in admins.zookeeper.list_groups())
    if kind in (None, KAFKA_KIND):
        found.extend((listed.group, KAFKA_KIND) for listed in admins.kafka.list_groups())
    return sorted(found)


def _observe(
    admins: Admins, consumer: Consumer, group: str, kind: str, window: LagWindow, reset: str
) -> str | None:
    """Add one observation of ``group`` to ``window``: its committed offsets (a zookeeper group's with
    their commit times; a kafka group's from OffsetFetch, as ``describe`` reads them, timed by
    observation), the log ends, and for each partition it consumes without a commit the ``reset``
    position (``[consumer] auto_offset_reset``: where its consumers would start). Returns a kafka group's
    state."""
    if kind == ZOOKEEPER_KIND:
        admin = admins.zookeeper
        partitions = admin.partitions(group)
        found = admin.committed_offsets(group, partitions)
        committed = {tp: (c.offset, c.timestamp_ms) for tp, c in found.items() if c is not None}
        ends = consumer.end_offsets(partitions) if partitions else {}
        missing = [tp for tp in partitions if found.get(tp) is None and tp in ends]
        uncommitted = _reset_positions(consumer, missing, ends, reset)
        window.observe(time.time_ns() // 1_000_000, committed, ends, uncommitted)
        return None
    described = admins.kafka.describe(group, consumer.end_offsets)
    now_ms = time.time_ns() // 1_000_000
    offsets = {
        TopicPartition(p.topic, p.partition): p.committed
        for p in described.partitions
        if p.committed is not None
    }
    ends = {
        TopicPartition(p.topic, p.partition): p.log_end for p in described.partitions if p.log_end is not None
    }
    missing = [tp for tp in ends if tp not in offsets]
    uncommitted = _reset_positions(consumer, missing, ends, reset)
    window.observe(now_ms, window.commit_times(now_ms, offsets), ends, uncommitted)
    return described.state


def _reset_positions(
    consumer: Consumer, partitions: list[TopicPartition], ends: dict[TopicPartition, int], reset: str
) -> dict[TopicPartition, int]:
    """Where the group's consumers would start each partition without a commit (see :func:`_observe`)."""
    if not partitions:
        return {}
    starts = consumer.beginning_offsets(partitions) if reset == "earliest" else ends
    return {tp: reset_position(reset, starts[tp], ends[tp]) for tp in partitions}


def _print_lag(
    args: argparse.Namespace,
    group: str,
    kind: str,
    state: str | None,
    evaluation: list[PartitionLag],
    observed: int,
) -> None:
    judged = observed >= 2
    status = group_status(evaluation).name if judged else None
    if args.json:
        rows = [
            {
                "topic": p.partition.topic,
                "partition": p.partition.partition,
                "committed": None if p.no_commit else p.latest.committed_offset,
                "log_end": p.latest.log_end_offset,
                "lag": p.lag,
                "no_commit": p.no_commit,
                "status": p.status.name if judged else None,
                "samples": p.samples,
            }
            for p in evaluation
        ]
        line: dict[str, Any] = {"group": group, "kind": kind}
        if state is not None:
            line["state"] = state
        line.update(status=status, partitions=rows)
        print(json.dumps(line), flush=True)
        return
    total = sum(p.lag for p in evaluation)
    what = kind if state is None else f"{kind}, state {state}"
    print(f"group {group!r} ({what}): lag {total}, status {status or '- (one observation: use --watch)'}")
    print(f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  status")
    for p in evaluation:
        committed = "-" if p.no_commit else p.latest.committed_offset
        status = p.status.name if judged else "-"
        print(
            f"  {p.partition.topic:<20} {p.partition.partition:>9}  {committed:>10}  "
            f"{p.latest.log_end_offset:>10}  {p.lag:>8}  {'no commit' if p.no_commit else status}"
        )
    sys.stdout.flush()


def _reset(args: argparse.Namespace, config: LumberConfig, admins: Admins) -> int:
    kind = admins.kind_of(args.group, args.kind, may_be_new=True)
    with _brokers(args, config) as consumer:
        if kind == ZOOKEEPER_KIND:
            partitions = admins.zookeeper.partitions(args.group, [args.topic])
        else:
            partitions = _topic_partitions(consumer, args.topic)
        if not partitions:
            print(f"lumber: error: topic {args.topic!r} does not exist", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE
        earliest = consumer.beginning_offsets(partitions)
        latest = consumer.end_offsets(partitions)
        if args.to_earliest:
            offsets = earliest
        elif args.to_latest:
            offsets = latest
        elif args.to_offset is not None:
            offsets = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in partitions}
        else:
            found = consumer.offsets_for_times(dict.fromkeys(partitions, args.to_datetime))
            offsets = {tp: latest[tp] if offset is None else offset for tp, offset in found.items()}
    if kind == ZOOKEEPER_KIND:
        before = admins.zookeeper.committed(args.group, partitions)
        admins.zookeeper.reset_offsets(args.group, offsets, requested_by="lumber groups reset-offsets")
    else:
        before = admins.kafka.committed(args.group, partitions)
        admins.kafka.reset_offsets(args.group, offsets)
    if args.json:
        rows = [
            {"topic": tp.topic, "partition": tp.partition, "before": before[tp], "after": offsets[tp]}
            for tp in sorted(offsets)
        ]
        print(json.dumps({"group": args.group, "kind": kind, "partitions": rows}))
        return 0
    print(f"group {args.group!r} ({kind}), topic {args.topic!r}: offsets reset")
    for tp in sorted(offsets):
        print(f"  partition {tp.partition}: {_dash(before[tp])} -> {offsets[tp]}")
    return 0


def _topic_partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    try:
        return sorted(consumer.partitions_for(topic, timeout_ms=0))
    except ClientError:
        return []


def _delete(args: argparse.Namespace, config: LumberConfig, admins: Admins) -> int:
    kind = admins.kind_of(args.group, args.kind)
    if kind == ZOOKEEPER_KIND:
        admins.zookeeper.delete(args.group)
    else:
        admins.kafka.delete(args.group)
    if args.json:
        print(json.dumps({"group": args.group, "kind": kind, "deleted": True}))
    else:
        print(f"group {args.group!r} ({kind}): deleted")
    return 0
