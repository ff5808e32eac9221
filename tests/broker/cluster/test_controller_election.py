"""Controller election against a real ZooKeeper (broker/cluster/controller_election.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cluster.controller_election import ControllerElection, ElectionState
from tests.broker.cluster.helpers import wait_until
from tests.support.zookeeper import expire_session, new_client

WAIT_S = 15.0


class Events:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def elected(self, epoch: int, version: int) -> None:
        with self.lock:
            self.calls.append(("elected", epoch, version))
            self.threads.add(threading.current_thread().name)

    def resigned(self) -> None:
        with self.lock:
            self.calls.append(("resigned",))


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[Any]]:
    made = [new_client(zk_connect) for _ in range(3)]
    yield made
    for client in made:
        client.stop()
        client.close()


def _controller(zk: Any) -> int:
    return int(json.loads(zk.get("/controller")[0])["brokerid"])


def test_first_election_creates_the_epoch_and_one_of_three_wins(zk: Any, clients: list[Any]) -> None:
    events = [Events() for _ in clients]
    elections = [
        ControllerElection(
            c, i + 1, events[i].elected, events[i].resigned, clock_ms=lambda: 1_700_000_000_000
        )
        for i, c in enumerate(clients)
    ]
    try:
        for election in elections:
            election.start()
        wait_until(lambda: sum(e.is_controller for e in elections) == 1, WAIT_S, "one controller")
        wait_until(
            lambda: all(e.state in (ElectionState.ELECTED, ElectionState.WATCHING) for e in elections), WAIT_S
        )
        winner = next(e for e in elections if e.is_controller)
        assert zk.get("/controller_epoch")[0] == b"1"
        assert zk.get("/controller_epoch")[1].version == 0
        data = zk.get("/controller")[0]
        assert data == b'{"brokerid":%d,"timestamp":"1700000000000","version":1}' % winner.broker_id
        assert (winner.epoch, winner.epoch_zk_version) == (1, 0)
        assert events[winner.broker_id - 1].calls == [("elected", 1, 0)]
        assert events[winner.broker_id - 1].threads == {f"controller-election-{winner.broker_id}"}

        # the winner resigns: one of the two others takes over with epoch 2
        winner.resign()
        assert events[winner.broker_id - 1].calls == [("elected", 1, 0), ("resigned",)]
        others = [e for e in elections if e is not winner]
        wait_until(lambda: sum(e.is_controller for e in others) == 1, WAIT_S, "a second controller")
        second = next(e for e in others if e.is_controller)
        assert zk.get("/controller_epoch")[0] == b"2"
        assert (second.epoch, second.epoch_zk_version) == (2, 1)
        assert _controller(zk) == second.broker_id
        assert not winner.is_controller
        assert winner.state is ElectionState.STOPPED
    finally:
        for election in elections:
            election.resign()
    assert zk.exists("/controller") is None


def test_session_expiry_of_the_controller(zk: Any, zk_connect: str, clients: list[Any]) -> None:
    a_events, b_events = Events(), Events()
    first = ControllerElection(clients[0], 1, a_events.elected, a_events.resigned)
    first.start()
    wait_until(lambda: first.is_controller, WAIT_S, "broker 1 elected")
    second = ControllerElection(clients[1], 2, b_events.elected, b_events.resigned)
    second.start()
    try:
        wait_until(lambda: second.state is ElectionState.WATCHING, WAIT_S, "broker 2 watching")
        expire_session(clients[0], zk_connect)
        # broker 1 resigns; broker 2 (watching) or broker 1 (new session) is elected with epoch 2
        wait_until(lambda: ("resigned",) in a_events.calls, WAIT_S, "broker 1 resigned")
        wait_until(
            lambda: zk.exists("/controller") is not None and zk.get("/controller_epoch")[0] == b"2", WAIT_S
        )
        wait_until(lambda: first.is_controller or second.is_controller, WAIT_S, "a new controller")
        new = first if first.is_controller else second
        assert (new.epoch, new.epoch_zk_version) == (2, 1)
        assert _controller(zk) == new.broker_id
        assert a_events.calls[:2] == [("elected", 1, 0), ("resigned",)]
    finally:
        first.resign()
        second.resign()


def test_a_lost_create_reply_is_found_again(zk: Any) -> None:
    # our session already holds /controller (the multi went through, its reply was lost)
    zk.create("/controller_epoch", b"7")
    zk.set("/controller_epoch", b"7")
    zk.create("/controller", b'{"brokerid":4,"timestamp":"1","version":1}', ephemeral=True)
    events = Events()
    election = ControllerElection(zk, 4, events.elected, events.resigned)
    election.start()
    try:
        wait_until(lambda: election.is_controller, WAIT_S)
        assert events.calls == [("elected", 7, 1)]
        # someone deletes /controller (an operator): the controller resigns and is elected again
        zk.delete("/controller")
        wait_until(lambda: len(events.calls) == 3, WAIT_S)
        assert events.calls == [("elected", 7, 1), ("resigned",), ("elected", 8, 2)]
    finally:
        election.resign()
