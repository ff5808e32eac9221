"""What the controller decides for one partition: its next leader and ISR (Kafka's
``PartitionLeaderElectionAlgorithms`` and the ISR edits of ``KafkaController``).

:func:`next_state` is a pure function of the partition's current state, its replicas and the cluster's live
and shutting-down brokers; the controller (:mod:`broker.server.controller`) applies it to every partition
whenever the cluster changes and writes the states that differ. In order:

1. **Offline partition** (the leader is not live, or there is none): the first replica, in assignment
   order, that is live and in the ISR, preferring one that is not shutting down (Kafka's
   ``offlinePartitionLeaderElection``). None: with unclean election on, the first live replica, which
   becomes the whole ISR (what only the dead ISR held is lost); else the partition has no leader
   (leader -1) and keeps its ISR, so that an ISR member coming back is elected.
2. **Controlled shutdown of the leader**: the first live ISR replica not shutting down (Kafka's
   ``controlledShutdownPartitionLeaderElection``); the shutting-down broker leaves the ISR. None: the
   leader stays until it stops.
3. **Preferred replica** (asked for, or the periodic rebalance): the first replica, if it is live, in
   the ISR and not shutting down (Kafka's ``preferredReplicaPartitionLeaderElection``).
4. **ISR**: replicas that are not live, and followers shutting down, leave the ISR (Kafka's
   ``removeReplicasFromIsr``); the last member is never removed.

The leader epoch goes up by one whenever the leader changes (to -1 too); an ISR change alone keeps it (the
znode version orders those, as KRaft's partition epoch does; Kafka's ZooKeeper controller bumped the
leader epoch for ISR changes as well).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from broker.cluster.partition_state import PartitionState

NO_LEADER = -1


def next_state(
    state: PartitionState,
    replicas: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
    *,
    controller_epoch: int,
    unclean: bool = False,
    preferred: bool = False,
) -> PartitionState:
    """The partition's state after the controller's decisions (``state`` itself when nothing changes)."""
    leader, isr = state.leader, tuple(state.isr)
    if leader == NO_LEADER or leader not in live:
        in_sync = [r for r in replicas if r in live and r in isr]
        candidates = [r for r in in_sync if r not in shutting_down] or in_sync
        if candidates:
            leader = candidates[0]
            isr = tuple(r for r in isr if r in live)
        elif unclean and (live_replicas := [r for r in replicas if r in live]):
            fresh = [r for r in live_replicas if r not in shutting_down] or live_replicas
            leader = fresh[0]
            isr = (leader,)
        else:
            leader = NO_LEADER
            isr = _without_dead(isr, live)
    elif leader in shutting_down:
        candidates = [r for r in replicas if r in live and r in isr and r not in shutting_down]
        if candidates:
            leader = candidates[0]
            isr = tuple(r for r in isr if r in live and r not in shutting_down)
        else:
            isr = tuple(r for r in isr if r == leader or (r in live and r not in shutting_down))
    else:
        isr = tuple(r for r in isr if r == leader or (r in live and r not in shutting_down))
        if preferred and replicas:
            first = replicas[0]
            if first != leader and first in live and first in isr and first not in shutting_down:
                leader = first
    if leader == state.leader and isr == tuple(state.isr):
        return state
    epoch = state.leader_epoch + 1 if leader != state.leader else state.leader_epoch
    return PartitionState(
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        controller_epoch=controller_epoch,
        zk_version=state.zk_version,
    )


def _without_dead(isr: tuple[int, ...], live: Collection[int]) -> tuple[int, ...]:
    """The ISR without its dead members, keeping the last one standing (Kafka keeps the last)."""
    alive = tuple(r for r in isr if r in live)
    return alive or isr[-1:]
