"""Test helpers for a real ZooKeeper: unique chroots and real session expiry."""

from __future__ import annotations

import threading
import time

from kazoo.client import KazooClient, KazooState

from lumber.dev.zookeeper_server import make_chroot, new_client

__all__ = ["expire_session", "make_chroot", "new_client"]


def expire_session(client: KazooClient, connect: str, timeout_s: float = 30.0) -> None:
    """Really expire ``client``'s session on the server, and wait until the client has seen it (LOST).

    A second client attaches to the same session id and password, then closes it: the server ends the
    session, its ephemeral nodes go, and the first client is told SESSION_EXPIRED when it reconnects.
    If the first client won the session back before the close, the attempt is repeated (bounded).
    """
    lost = threading.Event()

    def watch(state: KazooState) -> None:
        if state == KazooState.LOST:
            lost.set()

    client.add_listener(watch)
    try:
        deadline = time.monotonic() + timeout_s
        while not lost.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"session 0x{client.client_id[0]:x} did not expire in {timeout_s} s")
            session_id, password = client.client_id
            thief = KazooClient(
                hosts=connect, client_id=(session_id, password), timeout=client._session_timeout / 1000
            )
            thief.start(timeout=10)
            thief.stop()
            thief.close()
            lost.wait(3.0)
    finally:
        client.remove_listener(watch)
