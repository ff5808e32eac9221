"""An invariant checker for consumer groups: samples ownership in ZooKeeper and what each member fetches.

One sample is taken at one instant: the checker holds every in-process member's condition (members change
what they fetch only while holding it, and never hold it across a ZooKeeper call), reads each member's
fetch set, reads every owner node of the topic from ZooKeeper, then lets go. While the conditions are held
no fetch set can change, so a member seen fetching a partition fetched it during the whole ZooKeeper read.

Violations (each one is a "double-owner moment"):

* a partition fetched by two members at once;
* a partition fetched by a member while its owner node names another member.

(A member fetching a partition whose owner node is gone is not a violation by itself: its session may just
have expired and it stops within its connection-loss detection; what matters is that nobody else has it.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.client.errors import GroupError
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition


@dataclass
class Sample:
    at: float
    owners: dict[TopicPartition, str]
    fetching: dict[str, set[TopicPartition]]
    violations: list[str] = field(default_factory=list)


def member_id_of(member: GroupConsumer) -> str | None:
    try:
        return member.member_id
    except GroupError:
        return None


def take_sample(
    zk: KazooClient, group: str, topic: str, partitions: int, members: list[GroupConsumer]
) -> Sample:
    """One consistent sample (see the module docstring)."""
    with ExitStack() as stack:
        for member in sorted(members, key=id):
            stack.enter_context(member.condition)
        fetching: dict[str, set[TopicPartition]] = {}
        for member in members:
            member_id = member_id_of(member)
            if member_id is not None:
                fetching[member_id] = member.fetching()
        reads = [(p, zk.get_async(zk_paths.group_owner_path(group, topic, p))) for p in range(partitions)]
        owners: dict[TopicPartition, str] = {}
        for p, result in reads:
            try:
                data, _ = result.get()
            except NoNodeError:
                continue
            path = zk_paths.group_owner_path(group, topic, p)
            owners[TopicPartition(topic, p)] = PartitionOwner.decode(path, data).owner
    sample = Sample(time.monotonic(), owners, fetching)
    seen: dict[TopicPartition, str] = {}
    for member_id, fetched in fetching.items():
        for tp in fetched:
            if tp in seen:
                sample.violations.append(f"{tp} fetched by {seen[tp]} and {member_id}")
            seen[tp] = member_id
            owner = owners.get(tp)
            if owner is not None and owner != member_id:
                sample.violations.append(f"{tp} fetched by {member_id} but owned by {owner}")
    return sample


class InvariantChecker:
    """Samples every ``interval_s`` in a thread until stopped; keeps the count and every violation."""

    def __init__(
        self,
        zk: KazooClient,
        group: str,
        topic: str,
        partitions: int,
        members: Callable[[], list[GroupConsumer]],
        interval_s: float = 0.01,
    ) -> None:
        self._args = (zk, group, topic, partitions)
        self._members = members
        self._interval_s = interval_s
        self.samples = 0
        self.violations: list[str] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="invariant-checker", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sample = take_sample(*self._args, self._members())
            except Exception as exc:  # reported by stop(); the test fails on it
                self.errors.append(exc)
                return
            self.samples += 1
            self.violations.extend(sample.violations)
            self._stop.wait(self._interval_s)

    def __enter__(self) -> InvariantChecker:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)


def settled(zk: KazooClient, group: str, topic: str, partitions: int, members: list[GroupConsumer]) -> bool:
    """The group is done rebalancing: every member read the same generation, which gives each partition
    to a live member, that member owns it in ZooKeeper and fetches exactly what the generation gives it."""
    ids = {member_id_of(m) for m in members}
    read = [m.generation for m in members]
    generation = read[0] if read else None
    if (
        None in ids
        or generation is None
        or any(g is None or g.generation != generation.generation for g in read)
    ):
        return False
    if set(generation.assignment) != ids:
        return False
    targets = generation.owners()
    if len(targets) != partitions:
        return False
    sample = take_sample(zk, group, topic, partitions, members)
    if sample.violations:
        return False
    for tp, (member_id, _) in targets.items():
        if sample.owners.get(tp) != member_id or tp not in sample.fetching.get(member_id, set()):
            return False
    return all(len(f) == len(generation.streams_of(m)) for m, f in sample.fetching.items())
