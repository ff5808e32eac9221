"""broker/client/groups/zookeeper/fenced_election.py against a real ZooKeeper: the exact candidate znodes, the
predecessor watch, a lost create reply, and the fence (a deposed leader's write does not land)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.client.errors import GroupError
from broker.client.groups.zookeeper.fenced_election import ElectionState, FencedElection
from broker.cluster import zk_paths
from tests.support.zookeeper import expire_session, new_client

GROUP = "g"
LEADER_DIR = zk_paths.group_leader_path(GROUP)


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[Any]]:
    made = [new_client(zk_connect) for _ in range(2)]
    yield made
    for client in made:
        client.stop()
        client.close()


def wait_until(predicate: Any, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)


def test_candidates_are_ephemeral_sequential_nodes_and_the_first_leads(zk: Any, clients: list[Any]) -> None:
    changed = threading.Event()
    first = FencedElection(clients[0], GROUP, lambda: None)
    second = FencedElection(clients[1], GROUP, changed.set)
    assert first.state is ElectionState.IDLE
    assert first.stand("m-1") == f"{LEADER_DIR}/m-1-0000000000"
    assert second.stand("m-2") == f"{LEADER_DIR}/m-2-0000000001"
    data, stat = zk.get(f"{LEADER_DIR}/m-1-0000000000")
    assert (data, stat.version, stat.ephemeralOwner) == (b"m-1", 0, clients[0].client_id[0])
    assert zk.get(f"{LEADER_DIR}/m-2-0000000001")[1].ephemeralOwner == clients[1].client_id[0]
    assert (first.lead(), second.lead()) == (True, False)
    assert (first.state, second.state) == (ElectionState.LEADING, ElectionState.STANDING)
    assert first.contenders() == ["m-1", "m-2"]
    # the second candidate watches only its predecessor: the first one leaving notifies it
    assert not changed.is_set()
    clients[0].stop()
    assert changed.wait(20)
    assert second.lead() is True
    assert second.state is ElectionState.LEADING
    assert sorted(zk.get_children(LEADER_DIR)) == ["m-2-0000000001"]


def test_a_stand_whose_reply_was_lost_finds_its_candidate_again(zk: Any, clients: list[Any]) -> None:
    election = FencedElection(clients[0], GROUP, lambda: None)
    path = election.stand("m-1")
    assert election.stand("m-1") == path  # the retry of a create whose reply was lost
    assert zk.get_children(LEADER_DIR) == ["m-1-0000000000"]


def test_a_candidate_deleted_by_hand_stands_again(zk: Any, clients: list[Any]) -> None:
    election = FencedElection(clients[0], GROUP, lambda: None)
    election.stand("m-1")
    zk.delete(f"{LEADER_DIR}/m-1-0000000000")
    assert election.lead() is True
    assert election.candidate_path == f"{LEADER_DIR}/m-1-0000000001"
    assert zk.get_children(LEADER_DIR) == ["m-1-0000000001"]


def test_the_fence_lets_a_leader_write_and_stops_a_deposed_one(
    zk: Any, zk_connect: str, clients: list[Any]
) -> None:
    zk.create("/target", b"v0")
    election = FencedElection(clients[0], GROUP, lambda: None)
    with pytest.raises(GroupError, match="no candidate to fence a write with"):
        election.fenced_transaction()
    election.stand("m-1")
    assert election.lead()
    transaction = election.fenced_transaction()
    transaction.set_data("/target", b"v1", version=0)
    results = transaction.commit()
    assert election.fence_failure(results) is None
    assert zk.get("/target")[0] == b"v1"
    assert zk.get("/target")[1].version == 1
    # the leader's session expires for real: its candidate goes with it, and its write does not land
    expire_session(clients[0], zk_connect)
    wait_until(lambda: clients[0].connected, "the client's new session")
    transaction = election.fenced_transaction()
    transaction.set_data("/target", b"stale", version=1)
    results = transaction.commit()
    failure = election.fence_failure(results)
    assert type(failure).__name__ == "NoNodeError"
    assert zk.get("/target")[0] == b"v1"
    assert zk.get("/target")[1].version == 1
    # a failure of another operation is not the fence's
    other = FencedElection(clients[1], GROUP, lambda: None)
    other.stand("m-2")
    transaction = other.fenced_transaction()
    transaction.set_data("/target", b"x", version=7)
    assert other.fence_failure(transaction.commit()) is None
    assert zk.get("/target")[0] == b"v1"


def test_withdraw_deletes_the_candidate_in_the_leaving_transaction(zk: Any, clients: list[Any]) -> None:
    election = FencedElection(clients[0], GROUP, lambda: None)
    election.stand("m-1")
    zk.create("/leaving", b"")
    transaction = clients[0].transaction()
    election.withdraw(transaction)
    transaction.delete("/leaving")
    transaction.commit()
    assert zk.get_children(LEADER_DIR) == []
    assert zk.exists("/leaving") is None
    election.reset()
    assert (election.state, election.candidate_path) == (ElectionState.IDLE, "")
    with pytest.raises(GroupError, match=r"lead\(\) before stand\(\)"):
        election.lead()
