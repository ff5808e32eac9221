"""``lumber groups list|describe|lag|reset-offsets``: consumer groups in ZooKeeper (``[zookeeper] connect``).

    lumber groups list
    lumber groups describe --group audit          members, generation, per partition: owner, committed
                                                  offset, log end offset and lag
    lumber groups lag --group audit               lag per partition, once
    lumber groups lag --group audit --watch [--interval 10s] [--window 10] [--metrics-port 9310]
    lumber groups lag --all-groups --watch --metrics-port 9310      a lag exporter for every group
                                                  every interval: lag and Burrow's OK / WARNING / STALLED /
                                                  STOPPED over the last --window observations
                                                  (:mod:`broker.client.lag_evaluation`); with
                                                  --metrics-port, also as Prometheus metrics
                                                  (:mod:`pipeline.lag_metrics`) on 127.0.0.1
    lumber groups reset-offsets --group audit --topic events --to-earliest
    lumber groups reset-offsets --group audit --topic events --to-offset 1200      (clamped to the log)
    lumber groups reset-offsets --group audit --topic events --to-datetime 2026-11-22T10:00:00Z

A reset is the paper's rewind for a whole group (:mod:`broker.client.group_offsets`): it may run while
the group consumes; the members that own the partitions go on from the new offsets. Log end offsets and
offsets by time come from the brokers (``[consumer] bootstrap_servers``, else ZooKeeper). Every command
takes ``--json``. Exit codes: 0 done, 1 error (ZooKeeper or brokers unreachable), 2 bad input (unknown
group, bad date).
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
from typing import Any

from broker.client.consumer import Consumer
from broker.client.group_admin import GroupAdmin, UnknownGroupError
from broker.client.lag_evaluation import LagWindow, PartitionLag, group_status
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.zookeeper_session import zookeeper_session
from lumber.config import LumberConfig
from pipeline.durations import DURATION_HELP, DurationError, parse_duration_ms
from pipeline.lag_metrics import LagCollector

BAD_INPUT_EXIT_CODE = 2

Handler = Callable[[argparse.Namespace, LumberConfig, GroupAdmin], int]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("groups", help="list, describe and rewind consumer groups (in ZooKeeper)")
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="list the consumer groups")
    _common(listing)
    listing.set_defaults(handler=_run(_list))

    describe = sub.add_parser("describe", help="members, owners, committed offsets and lag of a group")
    describe.add_argument("--group", required=True)
    _common(describe)
    describe.set_defaults(handler=_run(_describe))

    lag = sub.add_parser("lag", help="lag per partition; --watch adds Burrow's status over a window")
    which = lag.add_mutually_exclusive_group(required=True)
    which.add_argument("--group")
    which.add_argument(
        "--all-groups", action="store_true", help="every group in ZooKeeper, as found at each observation"
    )
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
    lag.add_argument("--metrics-host", default="127.0.0.1", help="address of the metrics server (127.0.0.1)")
    _common(lag)
    lag.set_defaults(handler=_run(_lag))

    reset = sub.add_parser("reset-offsets", help="rewind (or skip) a group's offsets of a topic")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True)
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
                return handler(args, config, GroupAdmin(client))
        except UnknownGroupError as exc:
            if args.debug:
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


@contextmanager
def _brokers(args: argparse.Namespace, config: LumberConfig) -> Iterator[Consumer]:
    """A consumer of no partitions, for ListOffsets."""
    settings = config.consumer
    connect = args.zookeeper_connect or config.zookeeper.connect
    with Consumer(settings, zookeeper_connect=None if settings.bootstrap_servers else connect) as consumer:
        yield consumer


def _list(args: argparse.Namespace, config: LumberConfig, admin: GroupAdmin) -> int:
    groups = admin.list_groups()
    rows = [
        {"group": g, "members": len(admin.members(g)), "generation": _generation(admin, g)} for g in groups
    ]
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no consumer groups")
    for row in rows:
        generation = "-" if row["generation"] is None else row["generation"]
        print(f"{row['group']}\tmembers {row['members']}\tgeneration {generation}")
    return 0


def _generation(admin: GroupAdmin, group: str) -> int | None:
    found = admin.generation(group)
    return None if found is None else found.generation


def _describe(args: argparse.Namespace, config: LumberConfig, admin: GroupAdmin) -> int:
    if not admin.exists(args.group):
        raise UnknownGroupError(args.group)
    with _brokers(args, config) as consumer:
        description = admin.describe(args.group, consumer.end_offsets)
    if args.json:
        print(json.dumps(description.to_json()))
        return 0
    generation = description.generation
    if generation is None:
        print(f"group {args.group!r}: no generation yet")
    else:
        print(
            f"group {args.group!r}: generation {generation.generation}, leader {generation.leader}, "
            f"strategy {generation.strategy}"
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


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _lag(args: argparse.Namespace, config: LumberConfig, admin: GroupAdmin) -> int:
    if args.group is not None and not admin.exists(args.group):
        raise UnknownGroupError(args.group)
    try:
        interval_s = parse_duration_ms(args.interval, "--interval") / 1000
        LagWindow(args.window)  # checks --window
    except (DurationError, ValueError) as exc:
        print(f"lumber: error: {exc}", file=sys.stderr)
        return BAD_INPUT_EXIT_CODE
    collector = LagCollector()
    if args.watch and args.metrics_port is not None:
        from prometheus_client import CollectorRegistry, start_http_server  # noqa: PLC0415

        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=registry)
    count = (args.count if args.count is not None else -1) if args.watch else 1
    observed = 0
    windows: dict[str, LagWindow] = {}
    with _brokers(args, config) as consumer:
        while count < 0 or observed < count:
            if observed:
                time.sleep(interval_s)
            observed += 1
            groups = admin.list_groups() if args.all_groups else [args.group]
            for group in [g for g in windows if g not in groups]:
                del windows[group]
                collector.forget(group)
            for group in groups:
                window = windows.setdefault(group, LagWindow(args.window))
                partitions = admin.partitions(group)
                committed = {
                    tp: (c.offset, c.timestamp_ms)
                    for tp, c in admin.committed_offsets(group, partitions).items()
                    if c is not None
                }
                now_ms = time.time_ns() // 1_000_000
                window.observe(now_ms, committed, consumer.end_offsets(partitions) if partitions else {})
                evaluation = window.evaluate(now_ms)
                collector.update(group, evaluation)
                _print_lag(args, group, evaluation, observed)
    return 0


def _print_lag(args: argparse.Namespace, group: str, evaluation: list[PartitionLag], observed: int) -> None:
    judged = observed >= 2
    status = group_status(evaluation).name if judged else None
    if args.json:
        rows = [
            {
                "topic": p.partition.topic,
                "partition": p.partition.partition,
                "committed": p.latest.committed_offset,
                "log_end": p.latest.log_end_offset,
                "lag": p.lag,
                "status": p.status.name if judged else None,
                "samples": p.samples,
            }
            for p in evaluation
        ]
        print(json.dumps({"group": group, "status": status, "partitions": rows}), flush=True)
        return
    total = sum(p.lag for p in evaluation)
    print(f"group {group!r}: lag {total}, status {status or '- (one observation: use --watch)'}")
    print(f"  {'topic':<20} {'partition':>9}  {'committed':>10}  {'log end':>10}  {'lag':>8}  status")
    for p in evaluation:
        print(
            f"  {p.partition.topic:<20} {p.partition.partition:>9}  {p.latest.committed_offset:>10}  "
            f"{p.latest.log_end_offset:>10}  {p.lag:>8}  {p.status.name if judged else '-'}"
        )
    sys.stdout.flush()


def _reset(args: argparse.Namespace, config: LumberConfig, admin: GroupAdmin) -> int:
    if not admin.exists(args.group):
        raise UnknownGroupError(args.group)
    partitions = admin.partitions(args.group, [args.topic])
    if not partitions:
        print(f"lumber: error: topic {args.topic!r} does not exist", file=sys.stderr)
        return BAD_INPUT_EXIT_CODE
    with _brokers(args, config) as consumer:
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
    before = admin.committed(args.group, partitions)
    admin.reset_offsets(args.group, offsets, requested_by="lumber groups reset-offsets")
    if args.json:
        rows = [
            {"topic": tp.topic, "partition": tp.partition, "before": before[tp], "after": offsets[tp]}
            for tp in sorted(offsets)
        ]
        print(json.dumps({"group": args.group, "partitions": rows}))
        return 0
    print(f"group {args.group!r}, topic {args.topic!r}: offsets reset")
    for tp in sorted(offsets):
        print(f"  partition {tp.partition}: {_dash(before[tp])} -> {offsets[tp]}")
    return 0
