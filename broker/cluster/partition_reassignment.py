"""One partition's replica assignment while it may be moving (Kafka's ``ReplicaAssignment``, KIP-455).

Kafka's letters, used throughout the reassignment code::

    RS  replicas   the partition's full replica set now (in /brokers/topics/<topic>'s "partitions")
    AR  adding     the replicas a reassignment adds   (the node's "adding_replicas")
    RR  removing   the replicas a reassignment removes (the node's "removing_replicas")
    ORS origin     RS - AR: where the partition was before the reassignment (a cancel goes back there)
    TRS target     RS - RR: where it goes

Invariants: AR and RR are disjoint subsets of RS; a partition is *moving* while AR or RR is non-empty.
:meth:`PartitionReassignment.reassign_to` is Kafka's ``reassignTo``: RS becomes TRS followed by the ORS
members not in it (so the target order comes first and TRS[0] is the preferred leader once done). Only the
controller writes these (:mod:`broker.server.partition_reassigner`). Immutable, so thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionReassignment:
    """RS, AR and RR of one partition (see the module docstring)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS: RS without the replicas being added."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS: RS without the replicas being removed."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> PartitionReassignment:
        """Kafka's ``reassignTo``: RS = TRS + ORS (distinct, in that order), AR = RS - ORS, RR = RS - TRS.

        Reassigning to the origin (a cancel) gives a partition that is not moving."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys([*target, *origin]))
        return PartitionReassignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )

    def completed(self) -> PartitionReassignment:
        """Phase B's result: RS = TRS, nothing adding or removing."""
        return PartitionReassignment(self.target_replicas)
