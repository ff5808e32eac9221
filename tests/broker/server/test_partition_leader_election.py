"""The controller's decisions for one partition (broker/server/partition_leader_election.py), case by case."""

from __future__ import annotations

from broker.cluster.partition_state import PartitionState
from broker.server.partition_leader_election import next_state


def state(leader: int, epoch: int, isr: tuple[int, ...], version: int = 7) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, isr=isr, controller_epoch=1, zk_version=version)


REPLICAS = (1, 2, 3)


def test_a_healthy_partition_is_left_alone() -> None:
    current = state(1, 4, (1, 2, 3))
    assert next_state(current, REPLICAS, {1, 2, 3}, set(), controller_epoch=2) is current


def test_a_dead_leader_is_replaced_by_the_first_live_isr_replica_in_assignment_order() -> None:
    new = next_state(state(1, 4, (3, 1, 2)), REPLICAS, {2, 3}, set(), controller_epoch=2)
    assert new == PartitionState(leader=2, leader_epoch=5, isr=(3, 2), controller_epoch=2, zk_version=7)


def test_a_replica_outside_the_isr_is_never_elected_cleanly() -> None:
    new = next_state(state(1, 4, (1, 2)), REPLICAS, {3}, set(), controller_epoch=2)
    # Kafka's NoLeader: leader -1, the ISR keeps its last member so that it can come back as leader
    assert new == PartitionState(leader=-1, leader_epoch=5, isr=(2,), controller_epoch=2, zk_version=7)


def test_unclean_election_takes_the_first_live_replica_as_the_whole_isr() -> None:
    new = next_state(state(1, 4, (1, 2)), REPLICAS, {3}, set(), controller_epoch=2, unclean=True)
    assert new == PartitionState(leader=3, leader_epoch=5, isr=(3,), controller_epoch=2, zk_version=7)


def test_an_offline_partition_is_led_again_by_an_isr_member_that_returns() -> None:
    offline = state(-1, 5, (2,))
    assert next_state(offline, REPLICAS, {1, 3}, set(), controller_epoch=2) is offline
    new = next_state(offline, REPLICAS, {1, 2, 3}, set(), controller_epoch=2)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 6, (2,))


def test_dead_followers_leave_the_isr_without_a_new_leader_epoch() -> None:
    new = next_state(state(1, 4, (1, 2, 3)), REPLICAS, {1, 2}, set(), controller_epoch=2)
    assert (new.leader, new.leader_epoch, new.isr) == (1, 4, (1, 2))


def test_controlled_shutdown_moves_leadership_and_drops_the_broker_from_the_isr() -> None:
    new = next_state(state(1, 4, (1, 2, 3)), REPLICAS, {1, 2, 3}, {1}, controller_epoch=2)
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, (2, 3))
    follower = next_state(state(2, 4, (1, 2, 3)), REPLICAS, {1, 2, 3}, {3}, controller_epoch=2)
    assert (follower.leader, follower.leader_epoch, follower.isr) == (2, 4, (1, 2))


def test_controlled_shutdown_of_the_only_in_sync_replica_keeps_it_leader() -> None:
    current = state(1, 4, (1,))
    assert next_state(current, REPLICAS, {1, 2, 3}, {1}, controller_epoch=2) is current


def test_a_dead_leader_prefers_a_replica_that_is_not_shutting_down() -> None:
    new = next_state(state(1, 4, (1, 2, 3)), REPLICAS, {2, 3}, {2}, controller_epoch=2)
    assert (new.leader, new.isr) == (3, (2, 3))
    only = next_state(state(1, 4, (1, 2)), REPLICAS, {2, 3}, {2}, controller_epoch=2)
    assert (only.leader, only.isr) == (2, (2,))  # better a leader about to stop than none


def test_preferred_election_moves_leadership_back_to_the_first_replica_when_in_sync() -> None:
    current = state(2, 5, (2, 3, 1))
    assert next_state(current, REPLICAS, {1, 2, 3}, set(), controller_epoch=2) is current
    new = next_state(current, REPLICAS, {1, 2, 3}, set(), controller_epoch=2, preferred=True)
    assert (new.leader, new.leader_epoch, new.isr) == (1, 6, (2, 3, 1))
    lagging = state(2, 5, (2, 3))
    assert next_state(lagging, REPLICAS, {1, 2, 3}, set(), controller_epoch=2, preferred=True) is lagging
