from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from lumber.dev.process import free_port, wait_until
from lumber.dev.zookeeper_server import ZooKeeperServer, four_letter_word
from pipeline.errors import DevStackError
from tests.support.zookeeper import expire_session, new_client


def test_server_answers_on_loopback_only(zookeeper_server: ZooKeeperServer) -> None:
    assert four_letter_word(zookeeper_server.port, "ruok") == "imok"
    cfg = (zookeeper_server.base_dir / "zoo.cfg").read_text().splitlines()
    assert "clientPortAddress=127.0.0.1" in cfg
    assert "admin.enableServer=false" in cfg


def test_ephemeral_node_is_gone_after_session_expiry(zk: KazooClient, zk_connect: str) -> None:
    states: list[KazooState] = []
    zk.add_listener(states.append)
    zk.create("/member", b"me", ephemeral=True)
    observer = new_client(zk_connect)
    try:
        data, stat = observer.get("/member")
        assert data == b"me"
        assert stat.ephemeralOwner == zk.client_id[0]
        old_session = zk.client_id[0]
        gone = threading.Event()
        observer.exists("/member", watch=lambda event: gone.set())

        expire_session(zk, zk_connect)

        assert gone.wait(10)
        with pytest.raises(NoNodeError):
            observer.get("/member")
        assert KazooState.LOST in states
        # kazoo reconnects with a brand-new session, in which the node does not come back
        wait_until(lambda: zk.state == KazooState.CONNECTED, 20, "kazoo to reconnect")
        assert zk.client_id[0] != old_session
        assert zk.exists("/member") is None
    finally:
        observer.stop()
        observer.close()


def test_chroots_are_isolated(zk: KazooClient, zk_connect: str, zookeeper_server: ZooKeeperServer) -> None:
    zk.create("/only-here", b"1")
    root = new_client(zookeeper_server.connect)
    try:
        chroot = zk_connect[len(zookeeper_server.connect) :]
        assert root.get(f"{chroot}/only-here")[0] == b"1"
        assert not root.exists("/only-here")
    finally:
        root.stop()
        root.close()


def test_start_refuses_a_taken_port(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    second = ZooKeeperServer(tmp_path_factory.mktemp("zk2"), zookeeper_server.port)
    with pytest.raises(DevStackError, match=rf"port 127.0.0.1:{zookeeper_server.port} is already in use"):
        second.start()


def test_start_and_stop_leave_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zk3"), free_port())
    handle = server.start()
    assert handle.is_running()
    server.stop()
    assert not handle.is_running()
    assert four_letter_word(server.port, "ruok") == ""
