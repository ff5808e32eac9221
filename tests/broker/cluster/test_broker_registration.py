"""Broker registration in ZooKeeper, including real session expiry (broker/cluster/broker_registration.py)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from broker.cluster import zk_reads
from broker.cluster.broker_registration import BrokerRegistration
from broker.cluster.errors import BrokerIdTakenError, ClusterError
from tests.broker.cluster.helpers import add_broker, wait_until
from tests.support.zookeeper import expire_session, new_client

PATH = "/brokers/ids/1"


def registration(client: Any, port: int = 9092, broker_id: int = 1) -> BrokerRegistration:
    return BrokerRegistration(client, broker_id, "127.0.0.1", port, clock_ms=lambda: 1_700_000_000_000)


def owner(client: Any, path: str = PATH) -> int | None:
    stat = client.exists(path)
    return None if stat is None else int(stat.ephemeralOwner)


def test_register_creates_the_ephemeral_node_and_deregister_deletes_it(zk: Any, zk_connect: str) -> None:
    reg = registration(zk)
    reg.register()
    reg.register()  # a second call is a no-op
    data, stat = zk.get(PATH)
    assert data == b'{"host":"127.0.0.1","port":9092,"timestamp_ms":1700000000000,"version":1}'
    assert stat.ephemeralOwner == zk.client_id[0]
    assert reg.registered is True
    reg.deregister()
    assert zk.exists(PATH) is None
    reg.deregister()  # idempotent
    with pytest.raises(ClusterError, match="deregistered; make a new one"):
        reg.register()


def test_a_taken_id_is_refused_naming_the_holder(zk: Any, zk_connect: str) -> None:
    registration(zk, port=9092).register()
    other = new_client(zk_connect)
    try:
        with pytest.raises(BrokerIdTakenError) as info:
            registration(other, port=9999).register()
        assert str(info.value) == (
            "broker id 1 is taken: /brokers/ids/1 is registered by a live broker at 127.0.0.1:9092 "
            f"(session 0x{zk.client_id[0]:x}); give this broker another broker id"
        )
        assert info.value.holder == "127.0.0.1:9092"
        # the refused registration left the holder's node alone, also when asked to deregister
        loser = registration(other, port=9999)
        loser.deregister()
        assert owner(other) == zk.client_id[0]
    finally:
        other.stop()
        other.close()
    assert zk.get(PATH)[0] == b'{"host":"127.0.0.1","port":9092,"timestamp_ms":1700000000000,"version":1}'


def test_our_own_node_from_a_lost_reply_counts_as_registered(zk: Any) -> None:
    # what kazoo's retry of a create whose reply was lost finds: the node, owned by our own session
    add_broker(zk, 1, 9092)
    reg = registration(zk)
    reg.register()
    assert owner(zk) == zk.client_id[0]
    reg.deregister()
    assert zk.exists(PATH) is None


def test_invalid_arguments(zk: Any) -> None:
    with pytest.raises(ClusterError, match="broker id -1 is not a non-negative integer"):
        BrokerRegistration(zk, -1, "h", 1)
    with pytest.raises(ClusterError, match="broker 1: port 0 is not a TCP port"):
        BrokerRegistration(zk, 1, "h", 0)
    with pytest.raises(ClusterError, match="broker 1: the advertised host is empty"):
        BrokerRegistration(zk, 1, "", 1)


def test_registers_again_after_the_session_expires(zk: Any, zk_connect: str) -> None:
    reg = registration(zk)
    reg.register()
    first_session = zk.client_id[0]
    observer = new_client(zk_connect)
    try:
        expire_session(zk, zk_connect)
        wait_until(lambda: zk.connected and zk.client_id[0] != first_session, what="a new session")
        wait_until(lambda: owner(observer) == zk.client_id[0], what="registration in the new session")
        wait_until(lambda: reg.registered, what="registered is true again")
        assert observer.get(PATH)[0] == (
            b'{"host":"127.0.0.1","port":9092,"timestamp_ms":1700000000000,"version":1}'
        )
        reg.deregister()
        assert observer.exists(PATH) is None
    finally:
        observer.stop()
        observer.close()


def test_keeps_retrying_while_another_broker_holds_the_id(
    zk: Any, zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="broker.cluster.broker_registration")
    reg = registration(zk)
    reg.register()
    intruder = new_client(zk_connect)
    try:
        # another broker takes the id while ours is still registered (by hand: delete, then create)
        intruder.delete(PATH)
        add_broker(intruder, 1, 7777, host="10.0.0.7")
        expire_session(zk, zk_connect)
        wait_until(
            lambda: any(
                "10.0.0.7:7777" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records
            ),
            what="the error naming the holder",
        )
        assert owner(intruder) == intruder.client_id[0]
        message = next(r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
        assert message.startswith(
            "broker 1 cannot register again: broker id 1 is taken: /brokers/ids/1 is registered by a live "
            "broker at 10.0.0.7:7777"
        )
        # the other broker goes away: ours takes its id back within the backoff
        intruder.delete(PATH)
        wait_until(
            lambda: owner(intruder) == zk.client_id[0], timeout_s=10, what="registration after release"
        )
        wait_until(
            lambda: any(
                r.getMessage() == f"broker 1 registered again at {PATH} as 127.0.0.1:9092"
                for r in caplog.records
            ),
            what="the log of the registration",
        )
        reg.deregister()
        assert intruder.exists(PATH) is None
    finally:
        intruder.stop()
        intruder.close()


def test_a_declared_rack_is_in_the_node_and_read_back(zk: Any, zk_connect: str) -> None:
    client = new_client(zk_connect)
    try:
        BrokerRegistration(client, 7, "127.0.0.1", 9097, rack="r2", clock_ms=lambda: 5).register()
        assert json.loads(zk.get("/brokers/ids/7")[0]) == {
            "host": "127.0.0.1",
            "port": 9097,
            "rack": "r2",
            "timestamp_ms": 5,
            "version": 1,
        }
        assert zk_reads.read_broker(zk, 7).rack == "r2"  # type: ignore[union-attr]
        BrokerRegistration(client, 8, "127.0.0.1", 9098).register()
        assert zk_reads.read_broker(zk, 8).rack is None  # type: ignore[union-attr]
    finally:
        client.stop()
        client.close()
