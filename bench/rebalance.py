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
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.recipe.watchers import ChildrenWatch

from broker.client.consumer_config import ConsumerConfig
from broker.client.errors import GroupClosedError
from broker.client.group_config import GroupConfig
from broker.client.group_consumer import GroupConsumer
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

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
    ok = max(joins + leaves) <= TARGET_S and not checker.violations and not checker.errors
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
