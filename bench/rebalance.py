"""Rebalance benchmark: 8 consumer group members x 64 partitions; how long a join and a leave take.

Run from the repository root::

    .venv/bin/python bench/rebalance.py [--members 8] [--partitions 64] [--rounds 10]

It starts a real ZooKeeper and one real Lumber broker process on 127.0.0.1 (``bench_cluster`` of
``tests/support/broker_cluster.py``), creates a topic of 64 partitions with 20 records in each, and starts 8
members of one group in this process (each its own ZooKeeper session, its own consumer and an application
thread that polls, as a real application does). Then, for ``--rounds`` rounds:

1. **leave**: one member closes (commits, releases its partitions, leaves the group);
2. **join**: a new member joins.

For each, the clock starts when an observer's watch on ``/consumers/<group>/ids`` fires (the ZooKeeper
notification the leader gets too) and stops when every partition is being fetched by the member the new
generation gives it to, every member has read that generation, and nothing else is fetched (a member fetches
a partition only after creating its owner node, so this also means every partition is owned; the final
state is checked against the owner nodes in ZooKeeper). Meanwhile the invariant checker of
``tests/support/group_invariants.py`` samples ownership and fetching every 5 ms at one instant and counts
double-owner moments. Target: at most 1 s per rebalance, zero double-owner moments.

Then the same with **Kafka consumer groups** (issue 21, ``--kafka-rounds``, 0 to skip): 8 unmodified
confluent-kafka consumers, each its own process (``tests/support/group_worker.py``: range assignment,
eager rebalancing, 3 s sessions, a synchronous commit after every record) in one group on a fresh
64-partition topic, while this process produces a record to every partition every 100 ms. Each round
one member leaves (SIGTERM: it closes and sends LeaveGroup), then a new one joins. The clock starts at
the SIGTERM (leave) or at the first revoke callback of an old member (join: the moment the coordinator
starts the rebalance; the new process's own start-up is not counted) and stops when every partition has
been consumed by the member
the new assignment gives it to (the broker flushes every 20 ms, so that records are exposed at once, and
records arrive on every partition every 100 ms: both bound the figure from below). Overlaps: from the
members' assign and revoke callbacks (wall clock, one machine), the moments two members owned one
partition.

Last, **commits** (``--commits-only`` for them alone), on a cluster of their own: ``--commit-brokers``
brokers (1), ``__consumer_offsets`` with as many replicas (the offsets topic's RF: 1 on one broker, as
Kafka caps it there too) and a one-partition topic of ``--commit-records`` records. One confluent-kafka
consumer (manual assignment, ``enable.auto.commit`` off) consumes it and commits after every poll, each
way for ``--commit-seconds``: **synchronously** (``commit(message, asynchronous=False)``: one round trip
each), then **asynchronously** (``commit(message)``, the offset after the record just consumed; every
``--async-window`` commits, 1,000 by default, it waits until the ``on_commit`` callbacks of all commits
sent have come, so at most that many are in flight, and only acknowledged commits are counted). Each run
checks that the committed offset equals the last consumed offset + 1. The baseline is the same consumer's
OffsetFetch round trips (``committed()``: the coordinator without the write). Each figure comes with the
brokers' CPU time (user + system, from ``/proc``) per request, which the machine's other load moves far
less than the rates. Goal: 5,000 commits per second on one coordinator. The commit run is
``bench/rebalance_commits.py``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.recipe.watchers import ChildrenWatch

from bench.rebalance_commits import ASYNC_WINDOW, kafka_commits
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import GroupClosedError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.cluster import zk_paths
from tests.broker.client.helpers import producer

GROUP = "bench"
TOPIC = "rebalance"
TARGET_S = 1.0


class App:
    """A member and its polling thread."""

    def __init__(self, cluster: Any, name: str) -> None:
        self.member = GroupConsumer(
            GROUP,
            zookeeper_connect=cluster.zk_connect,
            config=GroupConfig(member_id_prefix=name),
            consumer_config=ConsumerConfig(
                bootstrap_servers=cluster.bootstrap_servers.split(","),
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
            ),
        )
        self.records = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"app-{name}", daemon=True)

    def start(self) -> App:
        self.member.subscribe(TOPIC)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.records += len(self.member.poll(timeout_ms=50))
        except GroupClosedError:
            return
        finally:
            self.member.close()

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(30)


def settled_locally(apps: list[App], partitions: int) -> bool:
    """Every member read the same generation, which names exactly the live members, and fetches exactly
    what it gives it, over all partitions."""
    members = [a.member for a in apps]
    generations = [m.generation for m in members]
    first = generations[0]
    if first is None or any(g is None or g.generation != first.generation for g in generations):
        return False
    if set(first.assignment) != {m.member_id for m in members}:
        return False
    covered = 0
    for m in members:
        wanted = set(first.streams_of(m.member_id))
        if m.fetching() != wanted:
            return False
        covered += len(wanted)
    return covered == partitions


def measure(
    apps: list[App], partitions: int, notified: list[float], before: int, timeout_s: float = 30
) -> float:
    """Seconds from the membership notification (the ``before``-th + 1) to a settled group."""
    deadline = time.monotonic() + timeout_s
    while True:
        if len(notified) > before and settled_locally(apps, partitions):
            return time.monotonic() - notified[before]
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group did not settle within {timeout_s} s")
        time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--kafka-rounds", type=int, default=10, help="rounds with Kafka groups (0: skip)")
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument("--commit-brokers", type=int, default=1, help="brokers (and RF) of the commit run")
    parser.add_argument("--commit-records", type=int, default=200_000)
    parser.add_argument("--commits-only", action="store_true", help="only the commit measurements")
    parser.add_argument(
        "--async-window", type=int, default=ASYNC_WINDOW, help="asynchronous commits in flight at most"
    )
    parser.add_argument("--skip-zookeeper", action="store_true", help="only the Kafka group measurements")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    ok = True
    if not args.skip_zookeeper and not args.commits_only:
        ok = zookeeper_groups(args)
    if args.kafka_rounds > 0 and not args.commits_only:
        ok = kafka_groups(args) and ok
    if args.commit_seconds > 0:
        ok = kafka_commits(args) and ok
    return 0 if ok else 1


def zookeeper_groups(args: argparse.Namespace) -> bool:
    """Lumber's ZooKeeper groups (see the module docstring); True if within the target."""
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher
    from tests.support.group_invariants import InvariantChecker, settled  # noqa: PLC0415

    joins: list[float] = []
    leaves: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-") as folder,
        bench_cluster(Path(folder)) as cluster,
    ):
        cluster.create_topic(TOPIC, args.partitions)
        with producer(cluster) as p:
            for i in range(20):
                for partition in range(args.partitions):
                    p.send(TOPIC, value=b"%d" % i, partition=partition)
            p.flush()
        ids_path = zk_paths.group_ids_path(GROUP)
        cluster.zk.ensure_path(ids_path)
        notified: list[float] = []
        ChildrenWatch(cluster.zk, ids_path, lambda children: notified.append(time.monotonic()))
        apps = [App(cluster, f"m{i:02d}").start() for i in range(args.members)]
        measure(apps, args.partitions, notified, len(notified) - 1, 60)
        print(f"{args.members} members x {args.partitions} partitions settled", flush=True)
        checker = InvariantChecker(
            cluster.zk, GROUP, TOPIC, args.partitions, lambda: [a.member for a in apps], interval_s=0.005
        )
        with checker:
            for round_number in range(args.rounds):
                leaving = apps.pop(0)
                before = len(notified)
                leaving.leave()
                leaves.append(measure(apps, args.partitions, notified, before))
                assert settled(cluster.zk, GROUP, TOPIC, args.partitions, [a.member for a in apps])
                before = len(notified)
                apps.append(App(cluster, f"n{round_number:02d}").start())
                joins.append(measure(apps, args.partitions, notified, before))
                assert settled(cluster.zk, GROUP, TOPIC, args.partitions, [a.member for a in apps])
                print(
                    f"round {round_number + 1}: leave {leaves[-1] * 1000:7.1f} ms   "
                    f"join {joins[-1] * 1000:7.1f} ms",
                    flush=True,
                )
                time.sleep(0.5)  # steady state between rounds, sampled too
        for app in apps:
            app.leave()
    print()
    print(f"{'rebalance':<8s} {'median ms':>10s} {'max ms':>8s} {'target ms':>10s}")
    for name, found in (("leave", leaves), ("join", joins)):
        median_ms, max_ms = statistics.median(found) * 1000, max(found) * 1000
        print(f"{name:<8s} {median_ms:>10.1f} {max_ms:>8.1f} {TARGET_S * 1000:>10.0f}")
    print(f"invariant samples: {checker.samples}, double-owner moments: {len(checker.violations)}")
    for violation in checker.violations[:10]:
        print(f"  {violation}")
    return max(joins + leaves) <= TARGET_S and not checker.violations and not checker.errors


KAFKA_TOPIC = "kafka-rebalance"
KAFKA_GROUP = "kafka-bench"


class KafkaMember:
    """One confluent-kafka consumer process of ``tests/support/group_worker.py`` and its events."""

    def __init__(self, cluster: Any, folder: Path, name: str) -> None:
        repo = Path(__file__).resolve().parent.parent
        self.path = folder / f"{name}.jsonl"
        self.popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.group_worker",
                "confluent",
                cluster.bootstrap_servers,
                KAFKA_GROUP,
                KAFKA_TOPIC,
                str(self.path),
            ],
            cwd=repo,
            env={**os.environ, "PYTHONPATH": str(repo)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ended: float | None = None

    def events(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.endswith("}")]

    def leave(self) -> None:
        self.ended = time.time()
        self.popen.send_signal(signal.SIGTERM)
        self.popen.wait(30)


def _current_assignment(member: KafkaMember) -> tuple[float, list[int]] | None:
    latest: tuple[float, list[int]] | None = None
    for event in member.events():
        if event["e"] == "assign":
            latest = (event["t"], event["parts"])
        elif event["e"] == "revoke":
            latest = None
    return latest


def _settled_at(members: list[KafkaMember], partitions: int, since: float) -> float | None:
    """When every partition was first consumed by its current owner after ``since`` (None: not yet)."""
    done = 0.0
    owned = 0
    for member in members:
        current = _current_assignment(member)
        if current is None or current[0] < since:
            return None
        assigned_at, parts = current
        owned += len(parts)
        firsts: dict[int, float] = {}
        for event in member.events():
            if event["e"] == "rec" and event["t"] >= assigned_at and event["p"] not in firsts:
                firsts[event["p"]] = event["t"]
        if any(p not in firsts for p in parts):
            return None
        done = max([done, *firsts.values()])
    return done if owned == partitions else None


def _overlaps(members: list[KafkaMember]) -> int:
    spans: dict[int, list[tuple[float, float]]] = {}
    for member in members:
        owned: dict[int, float] = {}
        end = member.ended if member.ended is not None else time.time()
        for event in member.events():
            if event["e"] == "assign":
                owned.update(dict.fromkeys(event["parts"], event["t"]))
            elif event["e"] == "revoke":
                for p in event["parts"]:
                    if p in owned:
                        spans.setdefault(p, []).append((owned.pop(p), event["t"]))
        for p, since in owned.items():
            spans.setdefault(p, []).append((since, end))
    count = 0
    for found in spans.values():
        found.sort()
        count += sum(1 for (_, e1), (s2, _) in itertools.pairwise(found) if e1 > s2)
    return count


def _wait(predicate: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found is not None:
            return found
        time.sleep(0.01)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


def kafka_groups(args: argparse.Namespace) -> bool:
    """Kafka consumer groups (see the module docstring); True if within the targets."""
    from confluent_kafka import Producer  # noqa: PLC0415

    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    joins: list[float] = []
    leaves: list[float] = []
    partitions = args.partitions
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-kafka-") as folder,
        bench_cluster(Path(folder), group_min_session_timeout_ms=1000, flush_ms=20) as cluster,
    ):
        cluster.create_topic(KAFKA_TOPIC, partitions)
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
            while not stop.is_set():
                for p in range(partitions):
                    try:
                        producer.produce(KAFKA_TOPIC, value=b"x", partition=p)
                    except BufferError:  # the broker is behind: wait for it rather than grow the queue
                        producer.poll(0.1)
                producer.poll(0)
                time.sleep(0.1)
            producer.flush(10)

        feeder = threading.Thread(target=produce, daemon=True)
        feeder.start()
        members = [KafkaMember(cluster, Path(folder), f"k{i:02d}") for i in range(args.members)]
        everyone = list(members)
        try:
            _wait(lambda: _settled_at(members, partitions, 0.0), 120, "the first generation")
            print(f"kafka groups: {args.members} confluent-kafka members x {partitions} partitions settled")
            for round_number in range(args.kafka_rounds):
                leaving = members.pop(0)
                started = time.time()
                leaving.leave()
                done = _wait(
                    functools.partial(_settled_at, members, partitions, started),
                    60,
                    "the group after a leave",
                )
                leaves.append(done - started)
                time.sleep(0.5)
                before = time.time()
                joining = KafkaMember(cluster, Path(folder), f"j{round_number:02d}")
                everyone.append(joining)
                old = list(members)
                members.append(joining)

                def revoked(old: list[KafkaMember] = old, before: float = before) -> float | None:
                    times = [
                        e["t"] for m in old for e in m.events() if e["e"] == "revoke" and e["t"] >= before
                    ]
                    return min(times) if times else None

                began = _wait(revoked, 60, "the rebalance a join starts")
                done = _wait(
                    functools.partial(_settled_at, members, partitions, began), 60, "the group after a join"
                )
                joins.append(done - began)
                print(
                    f"kafka round {round_number + 1}: leave {leaves[-1] * 1000:7.1f} ms   "
                    f"join {joins[-1] * 1000:7.1f} ms",
                    flush=True,
                )
                time.sleep(0.5)
        finally:
            for member in members:
                if member.popen.poll() is None:
                    member.leave()
            stop.set()
            feeder.join(30)
        overlaps = _overlaps(everyone)

    print()
    print(f"{'kafka groups':<14s} {'median ms':>10s} {'max ms':>8s} {'target ms':>10s}")
    for name, found in (("leave", leaves), ("join", joins)):
        print(
            f"{name:<14s} {statistics.median(found) * 1000:>10.1f} {max(found) * 1000:>8.1f} "
            f"{TARGET_S * 1000:>10.0f}"
        )
    print(f"overlapping ownerships: {overlaps}")
    return statistics.median(joins + leaves) <= TARGET_S and overlaps == 0


if __name__ == "__main__":
    sys.exit(main())
