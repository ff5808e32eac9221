"""A reassignment plan: Kafka's JSON (``kafka-reassign-partitions.sh``'s file, the data of
``/admin/reassign_partitions``), its checks, and the plans Lumber proposes (a replication factor, a
rebalance, a decommission).

The file::

    {"version": 1, "partitions": [{"topic": "events", "partition": 0, "replicas": [3, 1, 2]}, ...]}

``log_dirs``, when present, must be ``"any"`` for every replica (Lumber has one log dir per broker: moves
between a broker's log dirs are not supported). :meth:`ReassignmentPlan.check` refuses, naming the file and
the partition, everything Kafka's tool and controller refuse: a partition that does not exist
(UnknownTopicError), an empty replica list, a broker named twice or a broker that is not live
(InvalidReplicaAssignmentError), a partition that is moving already (ReassignmentInProgressError, unless
``additional``), so that nothing is written when any entry is bad.

The planners are pure functions of the assignment and the live brokers (and their racks, when every live
broker declares one):

* :func:`replication_factor_plan`: each partition of a topic to ``n`` replicas: a lower factor keeps the
  first ``n`` (the preferred leader first); a higher one adds the live brokers holding the fewest replicas,
  on racks the partition does not use yet where it can.
* :func:`rebalance_plan`: the fewest moves that leave every live broker within one replica of the others
  (replicas on brokers that are not live move first), racks respected, then each partition's replicas
  ordered so that preferred leaders are within one of each other per broker.
* :func:`decommission_plan`: every replica of one broker moved to the live brokers holding the fewest
  replicas (its place in the list kept, so a preferred leader's successor leads).

Immutable values and pure functions: thread-safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.cluster import zk_paths
from broker.cluster.errors import (
    InvalidReplicaAssignmentError,
    ReassignmentInProgressError,
    UnknownTopicError,
)
from broker.record.topic_partition import TopicPartition

#: topic -> partition -> replicas.
Assignments = Mapping[str, Mapping[int, Sequence[int]]]


@dataclass(frozen=True)
class ReassignmentPlan:
    """Partition -> target replicas (see the module docstring)."""

    targets: Mapping[TopicPartition, tuple[int, ...]]

    @classmethod
    def parse(cls, name: str, text: str | bytes) -> ReassignmentPlan:
        """The plan in ``text`` (``name``, a file name, names it in errors); InvalidReplicaAssignmentError
        if it is not Kafka's JSON."""
        data = text.encode() if isinstance(text, str) else text
        try:
            targets = zk_paths.decode_reassign_partitions(name, data)
            entries: list[Any] = zk_paths.decode_json(name, data)["partitions"]
        except zk_paths.ZkDataError as exc:
            raise InvalidReplicaAssignmentError(str(exc)) from None
        for index, entry in enumerate(entries):
            dirs = entry.get("log_dirs") if isinstance(entry, dict) else None
            if dirs is not None and any(d != "any" for d in dirs):
                raise InvalidReplicaAssignmentError(
                    f"{name}: partitions[{index}]: log_dirs {dirs}: Lumber has one log dir per broker, "
                    'give "any" (moves between a broker\'s log dirs are not supported)'
                )
        return cls(targets)

    def to_json(self) -> str:
        return zk_paths.encode_reassign_partitions(self.targets).decode()

    def check(
        self,
        name: str,
        assignments: Assignments,
        live: Sequence[int],
        moving: Sequence[TopicPartition] = (),
        *,
        additional: bool = False,
    ) -> None:
        """Raise, naming ``name`` and the partition, if any entry cannot be carried out (module docstring)."""
        if not self.targets:
            raise InvalidReplicaAssignmentError(f"{name}: the plan moves no partition")
        for tp, replicas in sorted(self.targets.items()):
            partitions = assignments.get(tp.topic)
            if partitions is None:
                raise UnknownTopicError(tp.topic, f"{name}: {tp}: topic {tp.topic!r} does not exist")
            if tp.partition not in partitions:
                raise UnknownTopicError(
                    tp.topic,
                    f"{name}: {tp}: no such partition (topic {tp.topic!r} has partitions 0 to "
                    f"{len(partitions) - 1})",
                )
            if not replicas:
                raise InvalidReplicaAssignmentError(f"{name}: {tp}: an empty replica list")
            twice = sorted(b for b, n in Counter(replicas).items() if n > 1)
            if twice:
                raise InvalidReplicaAssignmentError(
                    f"{name}: {tp}: replicas {list(replicas)} name broker {twice[0]} twice"
                )
            dead = [b for b in replicas if b not in live]
            if dead:
                raise InvalidReplicaAssignmentError(
                    f"{name}: {tp}: broker {dead[0]} in replicas {list(replicas)} is not a live broker (live "
                    f"brokers: {sorted(live) or 'none'})"
                )
            if tp in moving and not additional:
                raise ReassignmentInProgressError(
                    f"{name}: {tp} is being reassigned already: wait for it (--verify), cancel it "
                    "(--cancel) or replace its target with --additional"
                )


def replication_factor_plan(
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    factor: int,
    load: Mapping[int, int],
    racks: Mapping[int, str] | None = None,
) -> ReassignmentPlan:
    """Each partition of ``topic`` to ``factor`` replicas (module docstring); ``load`` is every live
    broker's replica count now (it decides where new replicas go)."""
    live = sorted(load)
    if not 1 <= factor <= len(live):
        raise InvalidReplicaAssignmentError(
            f"topic {topic!r}: replication factor {factor} is invalid: it must be 1 to the {len(live)} live "
            f"brokers {live}"
        )
    counts = Counter(dict(load))
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for partition, replicas in sorted(assignment.items()):
        chosen = [b for b in replicas if b in counts][:factor] if factor < len(replicas) else list(replicas)
        while len(chosen) < factor:
            extra = _least_loaded(counts, chosen, racks)
            chosen.append(extra)
            counts[extra] += 1
        if tuple(chosen) != tuple(replicas):
            targets[TopicPartition(topic, partition)] = tuple(chosen)
    return ReassignmentPlan(targets)


def decommission_plan(
    assignments: Assignments, broker_id: int, live: Sequence[int], racks: Mapping[int, str] | None = None
) -> ReassignmentPlan:
    """Every replica on ``broker_id`` to another live broker (module docstring)."""
    others = [b for b in live if b != broker_id]
    counts = Counter(dict.fromkeys(others, 0))
    for partitions in assignments.values():
        for replicas in partitions.values():
            counts.update(b for b in replicas if b in counts)
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for topic, partitions in sorted(assignments.items()):
        for partition, replicas in sorted(partitions.items()):
            if broker_id not in replicas:
                continue
            kept = [b for b in replicas if b != broker_id]
            if len(kept) >= len(others):
                raise InvalidReplicaAssignmentError(
                    f"{topic}-{partition} has {len(replicas)} replicas {list(replicas)}: the {len(others)} "
                    f"other live brokers {others} cannot hold them all"
                )
            extra = _least_loaded(counts, kept, racks)
            counts[extra] += 1
            targets[TopicPartition(topic, partition)] = tuple(
                extra if b == broker_id else b for b in replicas
            )
    return ReassignmentPlan(targets)


def rebalance_plan(
    assignments: Assignments, live: Sequence[int], racks: Mapping[int, str] | None = None
) -> ReassignmentPlan:
    """Replicas, then preferred leaders, within one of each other on every live broker (module docstring)."""
    current = {
        TopicPartition(topic, p): list(replicas)
        for topic, partitions in assignments.items()
        for p, replicas in partitions.items()
    }
    live_set = set(live)
    counts = Counter(dict.fromkeys(live, 0))
    for replicas in current.values():
        counts.update(b for b in replicas if b in live_set)
    # 1. replicas on brokers that are not live go to the least loaded live brokers
    for tp in sorted(current):
        replicas = current[tp]
        for i, b in enumerate(replicas):
            if b not in live_set:
                others = [r for r in replicas if r != b]
                if len(others) < len(live):
                    extra = _least_loaded(counts, others, racks)
                    counts[extra] += 1
                    replicas[i] = extra
    # 2. one replica at a time from the most to the least loaded broker while they differ by more than one
    for _ in range(sum(counts.values()) + 1):
        most = max(sorted(counts), key=lambda b: counts[b])
        least = min(sorted(counts), key=lambda b: counts[b])
        if counts[most] - counts[least] <= 1:
            break
        candidates = [
            tp
            for tp in sorted(current)
            if most in current[tp]
            and least not in current[tp]
            and _rack_ok(least, [r for r in current[tp] if r != most], racks)
        ]
        if not candidates:
            break
        tp = candidates[0]
        current[tp][current[tp].index(most)] = least
        counts[most] -= 1
        counts[least] += 1
    # 3. preferred leaders: each partition led by its replica that leads the fewest partitions so far
    leaders = Counter(dict.fromkeys(live, 0))
    for tp in sorted(current, key=lambda t: (len(current[t]), t)):
        replicas = current[tp]
        first = min(replicas, key=lambda b: (leaders.get(b, 1 << 30), replicas.index(b)))
        leaders[first] += 1
        current[tp] = [first, *[b for b in replicas if b != first]]
    targets = {
        tp: tuple(replicas)
        for tp, replicas in current.items()
        if tuple(replicas) != tuple(assignments[tp.topic][tp.partition])
    }
    return ReassignmentPlan(targets)


def _least_loaded(counts: Counter[int], taken: Sequence[int], racks: Mapping[int, str] | None) -> int:
    """The live broker with the fewest replicas not in ``taken``, on a rack ``taken`` does not use if any."""
    free = [b for b in sorted(counts) if b not in taken]
    if not free:
        raise InvalidReplicaAssignmentError(f"no live broker left beside {list(taken)}")
    spread = [b for b in free if _rack_ok(b, taken, racks)] or free
    return min(spread, key=lambda b: (counts[b], b))


def _rack_ok(broker: int, taken: Sequence[int], racks: Mapping[int, str] | None) -> bool:
    if not racks or broker not in racks:
        return True
    return racks[broker] not in {racks.get(b) for b in taken}
