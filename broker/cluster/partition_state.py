"""A partition's leader, leader epoch and in-sync replicas, as held in its ZooKeeper state node.

The node is ``/brokers/topics/<topic>/partitions/<p>/state`` (Kafka's ``TopicPartitionStateZNode``; its JSON
is in :mod:`broker.cluster.zk_paths`). Who writes it:

* :class:`~broker.cluster.topic_admin.TopicAdmin` creates it with the topic (leader = first replica,
  leader epoch 0, ISR = every replica);
* the controller (through :func:`broker.cluster.partition_state_store.write_states`) elects leaders, fenced by
  the ``/controller_epoch`` znode version;
* the leader shrinks and expands the ISR (:func:`broker.cluster.partition_state_store.update_isr`), a
  compare-and-set on the state node's own znode version.

``zk_version`` is that znode version when the state was read from ZooKeeper (``-1``: not read, e.g. a state
about to be created). It is what conditional updates are made against, so two states read at different
versions differ even when their data is the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

#: Kafka's ``LeaderAndIsr.NoLeader``: the partition has no leader (every ISR member is down).
NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leader, leader epoch, ISR and the epoch of the controller that wrote it (see the module docstring)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def with_isr(self, isr: Iterable[int]) -> PartitionState:
        """This state with another ISR, same leader and epoch (the leader's ISR change)."""
        return replace(self, isr=tuple(isr))

    def with_zk_version(self, zk_version: int) -> PartitionState:
        return replace(self, zk_version=zk_version)
