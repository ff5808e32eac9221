"""``lumber cluster reassign|rebalance|decommission``: moving partitions between brokers.

The commands talk to ZooKeeper, as Kafka's ``kafka-reassign-partitions.sh --zookeeper`` did: a move is asked
for by writing ``/admin/reassign_partitions`` and the controller carries it out
(:mod:`broker.server.partition_reassigner`); Kafka's admin clients can do the same through
AlterPartitionReassignments.

    lumber cluster reassign --plan moves.json --execute [--additional]   start the plan's moves
    lumber cluster reassign --plan moves.json --verify                   which are done, which still move
    lumber cluster reassign --plan moves.json --cancel                   put the moving ones back
    lumber cluster rebalance --plan [--output moves.json]                propose an even spread, print it
                                                                         with the bytes each move copies
    lumber cluster rebalance --execute [--timeout 10m]                   carry it out and wait
    lumber cluster decommission 3 [--timeout 10m]                        move everything off broker 3

The plan file is Kafka's JSON (:mod:`broker.cluster.reassignment_plan`). ``--execute`` first prints the
current replicas of the partitions it moves (keep them: they are the plan to go back), and refuses the
whole plan, writing nothing, if any entry names a partition that does not exist, an empty list, a broker
twice, a broker that is not live, or a partition that is moving already (unless ``--additional``).
``--cancel`` asks for each moving partition of the plan to go back to its replicas before the move (the
controller treats a move to the original replicas as Kafka's cancel). ``rebalance`` and ``decommission``
wait until the moves are done (``--timeout``), then ask for preferred leaders; ``decommission`` then says
the broker may be stopped. Both print each move with the bytes it copies and their total
(:mod:`lumber.cli.partition_sizes`; ``--json``: ``bytes`` per move, ``total_bytes``), or, when the brokers
do not tell the sizes, the moves alone and one warning line saying why.

Exit codes: 0 done, 1 error (ZooKeeper unreachable, a wait that timed out), 2 bad input.
Heavy imports stay inside the handlers (the CLI starts fast).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.throttle_option import add_throttle_option
from pipeline.durations import DURATION_HELP, DurationAction

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from broker.cluster.partition_reassignment import PartitionReassignment
    from broker.cluster.reassignment_plan import ReassignmentPlan
    from broker.record.topic_partition import TopicPartition
    from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2
TIMEOUT_EXIT_CODE = 1
DEFAULT_TIMEOUT_MS = 600_000
#: How often a waiting command reads the topic nodes.
POLL_S = 0.5

Handler = Callable[[argparse.Namespace, "KazooClient"], int]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster", help="move partitions between brokers: reassign, rebalance, decommission a broker"
    )
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    reassign = sub.add_parser("reassign", help="start, verify or cancel the moves of a plan (Kafka's JSON)")
    reassign.add_argument("--plan", required=True, type=Path, metavar="FILE", help="the plan: Kafka's JSON")
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the plan's moves")
    action.add_argument("--verify", action="store_true", help="show which moves are done")
    action.add_argument("--cancel", action="store_true", help="put the plan's moving partitions back")
    reassign.add_argument(
        "--additional",
        action="store_true",
        help="with --execute: also when partitions of the plan are moving already (their target is replaced)",
    )
    add_throttle_option(reassign)
    _common(reassign)
    reassign.set_defaults(handler=_run(_reassign))

    rebalance = sub.add_parser(
        "rebalance", help="spread replicas and preferred leaders evenly over the live brokers"
    )
    mode = rebalance.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--plan", action="store_true", help="print the moves and the bytes each copies, change nothing"
    )
    mode.add_argument("--execute", action="store_true", help="carry the moves out and wait for them")
    rebalance.add_argument(
        "--output", type=Path, metavar="FILE", help="with --plan: write it as Kafka's JSON"
    )
    _timeout(rebalance)
    _common(rebalance)
    rebalance.set_defaults(handler=_run(_rebalance))

    decommission = sub.add_parser(
        "decommission", help="move every replica off a broker, wait, then say it may be stopped"
    )
    decommission.add_argument("broker", type=int, metavar="BROKER", help="the broker's id")
    add_throttle_option(decommission)
    _timeout(decommission)
    _common(decommission)
    decommission.set_defaults(handler=_run(_decommission))


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        dest="timeout_ms",
        action=DurationAction,
        default=DEFAULT_TIMEOUT_MS,
        metavar="DURATION",
        help=f"how long to wait for the moves, {DURATION_HELP} (default: 10m)",
    )


def _run(handler: Handler) -> Callable[[argparse.Namespace, LumberConfig], int]:
    """Wrap ``handler`` with a ZooKeeper session and the bad-input exit code."""

    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        from broker.cluster.errors import (
            InvalidReplicaAssignmentError,
            ReassignmentInProgressError,
            UnknownTopicError,
        )
        from lumber.cli.zookeeper_session import zookeeper_session

        if not args.debug:
            logging.getLogger("kazoo").setLevel(logging.ERROR)
        args.consumer_settings = config.consumer  # the brokers' partition sizes are asked as [consumer]
        try:
            with zookeeper_session(args, config) as client:
                return handler(args, client)
        except (
            InvalidReplicaAssignmentError,
            ReassignmentInProgressError,
            UnknownTopicError,
            OSError,
        ) as exc:
            if args.debug:
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the commands read: topic -> partition -> replicas, the partitions moving, the live brokers."""

    assignments: dict[str, dict[int, tuple[int, ...]]]
    moving: dict[TopicPartition, PartitionReassignment]
    live: list[int]
    #: each live broker's rack, when every live broker declares one (else empty: racks are ignored)
    racks: dict[int, str]

    @classmethod
    def read(cls, client: KazooClient) -> ClusterSnapshot:
        from broker.cluster import zk_reads
        from broker.cluster.partition_reassignment import PartitionReassignment
        from broker.record.topic_partition import TopicPartition

        names = zk_reads.read_topic_names(client)
        assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        moving: dict[TopicPartition, PartitionReassignment] = {}
        for name, node in zk_reads.read_assignments(client, names).items():
            if node is None or isinstance(node, Exception):
                continue
            assignments[name] = node.assignment
            for p, (adding, removing) in node.moving.items():
                moving[TopicPartition(name, p)] = PartitionReassignment(node.assignment[p], adding, removing)
        brokers = zk_reads.read_brokers(client)
        racks = {b: info.rack for b, info in brokers.items() if info.rack is not None}
        return cls(assignments, moving, sorted(brokers), racks if len(racks) == len(brokers) else {})

    def done(self, tp: TopicPartition, target: tuple[int, ...]) -> bool:
        return tp not in self.moving and self.assignments.get(tp.topic, {}).get(tp.partition) == target


def _reassign(args: argparse.Namespace, client: KazooClient) -> int:
    from broker.cluster import reassignment_store
    from broker.cluster.reassignment_plan import ReassignmentPlan

    name = str(args.plan)
    plan = ReassignmentPlan.parse(name, args.plan.read_bytes())
    snapshot = ClusterSnapshot.read(client)
    if args.verify:
        return _verify(args, client, snapshot, plan)
    if args.cancel:
        back = {
            tp: snapshot.moving[tp].origin_replicas for tp in sorted(plan.targets) if tp in snapshot.moving
        }
        if back:
            reassignment_store.request_reassignment(client, back, additional=True)
        _report(
            args,
            {"cancelled": _entries(back)},
            [f"{tp}: cancelled, back to {list(r)}" for tp, r in back.items()],
        )
        if not back:
            print("nothing to cancel: no partition of the plan is moving")
        return 0
    plan.check(name, snapshot.assignments, snapshot.live, list(snapshot.moving), additional=args.additional)
    execute(args, client, snapshot, plan)
    return 0


def execute(
    args: argparse.Namespace, client: KazooClient, snapshot: ClusterSnapshot, plan: ReassignmentPlan
) -> None:
    from broker.cluster import reassignment_store

    current = {tp: snapshot.assignments[tp.topic][tp.partition] for tp in plan.targets}
    if not args.json:
        print("Current partition replica assignment (save it: it is the plan to go back):")
        print(_plan_json(current))
    throttle = getattr(args, "throttle", None)
    if throttle is not None:
        from broker.cluster.replication_throttle import write_throttle

        leader: dict[str, set[tuple[int, int]]] = {}
        follower: dict[str, set[tuple[int, int]]] = {}
        for tp, target in plan.targets.items():
            moving = snapshot.moving.get(tp)
            origin = moving.origin_replicas if moving is not None else current[tp]
            leader.setdefault(tp.topic, set()).update((tp.partition, b) for b in origin)
            follower.setdefault(tp.topic, set()).update((tp.partition, b) for b in target if b not in origin)
        args.throttled_brokers = _brokers_of(snapshot, plan)
        write_throttle(client, throttle, args.throttled_brokers, leader, follower)
        if not args.json:
            print(f"Throttled the copy to {throttle} bytes/s")
    reassignment_store.request_reassignment(
        client, plan.targets, additional=getattr(args, "additional", False)
    )
    _report(
        args,
        {"started": _entries(plan.targets), "previous": _entries(current)},
        [f"Started the reassignment of {len(plan.targets)} partitions: {_names(plan.targets)}"],
    )


def _verify(
    args: argparse.Namespace, client: KazooClient, snapshot: ClusterSnapshot, plan: ReassignmentPlan
) -> int:
    rows = []
    for tp, target in sorted(plan.targets.items()):
        moving = snapshot.moving.get(tp)
        if snapshot.done(tp, target):
            status = "complete"
        elif moving is not None and moving.target_replicas == target:
            status = f"in progress (adding {list(moving.adding)}, removing {list(moving.removing)})"
        else:
            now = snapshot.assignments.get(tp.topic, {}).get(tp.partition, ())
            status = f"not started or replaced (replicas {list(now)})"
        rows.append((tp, status))
    _report(
        args,
        {"partitions": [{"topic": tp.topic, "partition": tp.partition, "status": s} for tp, s in rows]},
        [f"Reassignment of partition {tp}: {s}" for tp, s in rows],
    )
    if all(s == "complete" for _tp, s in rows):
        clear_plan_throttle(client, snapshot, plan)
        if not args.json:
            print("Cleared the replication throttles of the plan's brokers and topics")
    return 0


def _rebalance(args: argparse.Namespace, client: KazooClient) -> int:
    from broker.cluster.reassignment_plan import rebalance_plan

    snapshot = ClusterSnapshot.read(client)
    if snapshot.moving:
        from broker.cluster.errors import ReassignmentInProgressError

        raise ReassignmentInProgressError(
            f"{len(snapshot.moving)} partitions are moving already (e.g. {min(snapshot.moving)}): wait for "
            "them"
        )
    plan = rebalance_plan(snapshot.assignments, snapshot.live, snapshot.racks)
    if not plan.targets:
        _report(args, {"moves": [], "total_bytes": 0}, ["balanced already: nothing to move"])
        return 0
    moves, total = planned_moves(args, client, snapshot, plan)
    if args.plan:
        if args.output is not None:
            args.output.write_text(plan.to_json() + "\n")
        _report(args, {"moves": moves, "total_bytes": total}, _move_lines(moves, total))
        return 0
    for line in _move_lines(moves, total):
        print(line)
    execute(args, client, snapshot, plan)
    return wait_for_moves(args, client, plan)


def _decommission(args: argparse.Namespace, client: KazooClient) -> int:
    from broker.cluster.errors import InvalidReplicaAssignmentError
    from broker.cluster.reassignment_plan import decommission_plan

    snapshot = ClusterSnapshot.read(client)
    broker = args.broker
    held = _partitions_on(snapshot, broker)
    if broker not in snapshot.live and not held:
        raise InvalidReplicaAssignmentError(f"broker {broker} is not live and holds no replica")
    plan = decommission_plan(snapshot.assignments, broker, snapshot.live, snapshot.racks)
    if plan.targets:
        plan.check(
            "decommission",
            snapshot.assignments,
            [b for b in snapshot.live if b != broker],
            list(snapshot.moving),
        )
        moves, total = planned_moves(args, client, snapshot, plan)
        for line in _move_lines(moves, total):
            print(line)
        execute(args, client, snapshot, plan)
        code = wait_for_moves(args, client, plan)
        if code != 0:
            return code
    print(f"broker {broker} holds no replicas and leads no partition: it may be stopped")
    return 0


def _partitions_on(snapshot: ClusterSnapshot, broker: int) -> list[TopicPartition]:
    from broker.record.topic_partition import TopicPartition

    return [
        TopicPartition(topic, p)
        for topic, partitions in sorted(snapshot.assignments.items())
        for p, replicas in sorted(partitions.items())
        if broker in replicas
    ]


def planned_moves(
    args: argparse.Namespace, client: KazooClient, snapshot: ClusterSnapshot, plan: ReassignmentPlan
) -> tuple[list[dict[str, Any]], int | None]:
    """Each move of ``plan`` (topic, partition, replicas now and after, the bytes it copies) and their
    total; bytes None when the brokers did not tell the sizes (a warning on stderr says why)."""
    from broker.cluster import zk_reads
    from lumber.cli.partition_sizes import PartitionSizes

    current = {tp: snapshot.assignments[tp.topic][tp.partition] for tp in plan.targets}
    copying = sorted(tp for tp, target in plan.targets.items() if set(target) - set(current[tp]))
    states = zk_reads.read_states(client, copying) if copying else {}
    leaders = {tp: state.leader if state is not None else -1 for tp, state in states.items()}
    sizes = PartitionSizes.read(leaders, zk_reads.read_brokers(client), args.consumer_settings)
    if sizes.unknown_because:
        print(
            f"lumber: warning: the bytes each move copies are not shown: {sizes.unknown_because}",
            file=sys.stderr,
        )
    copied = {tp: sizes.copied(tp, current[tp], target) for tp, target in plan.targets.items()}
    moves: list[dict[str, Any]] = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current": list(current[tp]),
            "replicas": list(target),
            "bytes": copied[tp],
        }
        for tp, target in sorted(plan.targets.items())
    ]
    total = None if sizes.unknown_because else sum(n or 0 for n in copied.values())
    return moves, total


def _move_lines(moves: list[dict[str, Any]], total: int | None) -> list[str]:
    lines = []
    for move in moves:
        line = f"{move['topic']}-{move['partition']}: {move['current']} -> {move['replicas']}"
        if move["bytes"] is not None:
            line += f"  copies {move['bytes']:,} bytes"
        lines.append(line)
    if total is not None:
        lines.append(f"{len(moves)} moves copy {total:,} bytes in all")
    return lines


def wait_for_moves(args: argparse.Namespace, client: KazooClient, plan: ReassignmentPlan) -> int:
    """Wait (``--timeout``) until every move of ``plan`` is done, then ask for the preferred leaders."""
    from broker.cluster.errors import ZooKeeperError
    from broker.cluster.topic_admin import TopicAdmin

    deadline = time.monotonic() + args.timeout_ms / 1000
    pending = dict(plan.targets)
    while pending:
        snapshot = ClusterSnapshot.read(client)
        for tp in [tp for tp, target in pending.items() if snapshot.done(tp, target)]:
            del pending[tp]
            print(f"{tp}: moved to {list(plan.targets[tp])}")
        if not pending:
            break
        if time.monotonic() >= deadline:
            print(
                f"lumber: error: {len(pending)} moves not done within {args.timeout_ms / 1000:g} s (e.g. "
                f"{min(pending)}); they go on: lumber cluster reassign --verify shows them",
                file=sys.stderr,
            )
            return TIMEOUT_EXIT_CODE
        time.sleep(POLL_S)
    if getattr(args, "throttle", None) is not None:
        from broker.cluster.replication_throttle import clear_throttle

        clear_throttle(client, args.throttled_brokers, {tp.topic for tp in plan.targets})
        print("Cleared the replication throttles")
    admin = TopicAdmin(client)
    led_elsewhere = []
    for tp in sorted(plan.targets):
        state = admin.describe_states(tp.topic).get(tp.partition)
        if state is not None and state.leader != plan.targets[tp][0]:
            led_elsewhere.append(tp)
    if led_elsewhere:
        try:
            admin.request_preferred_election(led_elsewhere)
        except ZooKeeperError as exc:
            print(f"lumber: warning: preferred leaders not asked for: {exc}", file=sys.stderr)
    return 0


def _brokers_of(snapshot: ClusterSnapshot, plan: ReassignmentPlan) -> set[int]:
    """Every broker a plan copies from or to (its partitions' replicas now, and their targets)."""
    brokers: set[int] = set()
    for tp, target in plan.targets.items():
        brokers.update(target)
        brokers.update(snapshot.assignments.get(tp.topic, {}).get(tp.partition, ()))
    return brokers


def clear_plan_throttle(client: KazooClient, snapshot: ClusterSnapshot, plan: ReassignmentPlan) -> None:
    """Kafka's ``--verify`` clean-up: the rates of the plan's brokers, the lists of its topics."""
    from broker.cluster.replication_throttle import clear_throttle

    clear_throttle(client, _brokers_of(snapshot, plan), {tp.topic for tp in plan.targets})


def _names(targets: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    return ", ".join(map(str, sorted(targets)))


def _entries(targets: Mapping[TopicPartition, tuple[int, ...]]) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
        for tp, r in sorted(targets.items())
    ]


def _plan_json(targets: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    return json.dumps({"version": 1, "partitions": _entries(targets)})


def _report(args: argparse.Namespace, as_json: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(as_json))
    else:
        for line in lines:
            print(line)
