"""One partition as ``lumber topics describe``, ``list --under-replicated`` and ``elect-leaders`` see it:
its replicas, its state node (leader, leader epoch, ISR), whether its leader is live, and a move in progress
(the replicas being added and removed, and whether the copy is throttled).

While a partition moves, its replicas are RS (the old and the new ones); it is *under-replicated* when its
ISR is smaller than RS without the replicas being added (Kafka's replication factor of an ongoing
reassignment, KIP-455), so a move alone does not make it so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.topic_admin import TopicAdmin

if TYPE_CHECKING:
    from broker.cluster.partition_reassignment import PartitionReassignment
    from broker.cluster.partition_state import PartitionState


@dataclass(frozen=True)
class PartitionRow:
    """One partition as ``describe`` and ``list --under-replicated`` show it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    state: PartitionState | None
    leader_address: str | None
    moving: PartitionReassignment | None = None
    throttled: bool = False

    @property
    def leader(self) -> int:
        return self.state.leader if self.state is not None else -1

    @property
    def isr(self) -> tuple[int, ...]:
        return tuple(self.state.isr) if self.state is not None else ()

    @property
    def leader_live(self) -> bool:
        return self.leader_address is not None

    @property
    def under_replicated(self) -> bool:
        adding = len(self.moving.adding) if self.moving is not None else 0
        return self.state is not None and len(self.isr) < len(self.replicas) - adding

    @property
    def preferred_leader(self) -> bool:
        return self.state is not None and bool(self.replicas) and self.leader == self.replicas[0]

    def status(self) -> str:
        if self.state is None:
            return "no partition state yet"
        notes = []
        if not self.leader_live:
            notes.append("offline: no live leader")
        if self.under_replicated:
            notes.append("under-replicated")
        if self.leader_live and not self.preferred_leader:
            notes.append(f"not on its preferred leader {self.replicas[0]}")
        if self.moving is not None:
            notes.append(move_text(self.moving, self.throttled))
        return "; ".join(notes) or "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.state.leader_epoch if self.state is not None else -1,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader_live": self.leader_live,
            "leader_address": self.leader_address,
            "under_replicated": self.under_replicated,
            "preferred_leader": self.preferred_leader,
            "adding_replicas": list(self.moving.adding) if self.moving is not None else [],
            "removing_replicas": list(self.moving.removing) if self.moving is not None else [],
            "throttled": self.throttled,
        }


def partition_rows(admin: TopicAdmin, topic: str, brokers: Mapping[int, BrokerInfo]) -> list[PartitionRow]:
    assignment = admin.describe_topic(topic)
    states = admin.describe_states(topic)
    moves = admin.describe_moves(topic)
    throttled = admin.throttled_partitions(topic) if moves else set()
    rows = []
    for partition, replicas in sorted(assignment.items()):
        state = states.get(partition)
        leader = brokers.get(state.leader) if state is not None else None
        rows.append(
            PartitionRow(
                topic,
                partition,
                tuple(replicas),
                state,
                leader.address if leader else None,
                moves.get(partition),
                partition in throttled,
            )
        )
    return rows


def move_text(
    moving: PartitionReassignment, throttled: bool, bytes_left: Mapping[int, int] | None = None
) -> str:
    """``reassigning to 2,3 (adding 3, removing 1, throttled; 1,024 bytes left on 3)``: one move in
    words, as ``topics describe`` and the console say it (``bytes_left``: new replica -> bytes)."""
    notes = f"adding {ids_text(moving.adding) or '-'}, removing {ids_text(moving.removing) or '-'}"
    if throttled:
        notes += ", throttled"
    if bytes_left:
        notes += "; " + ", ".join(f"{left:,} bytes left on {b}" for b, left in sorted(bytes_left.items()))
    return f"reassigning to {ids_text(moving.target_replicas)} ({notes})"


def ids_text(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids))
