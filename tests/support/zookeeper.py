"""Test helpers for a real ZooKeeper: unique chroots and real session expiry."""

from __future__ import annotations

import threading
import time
import uuid

from kazoo.client import KazooClient, KazooState


def new_client(connect: str, timeout_s: float = 10.0) -> KazooClient:
    """A started kazoo client on ``connect``."""
    client = KazooClient(hosts=connect, timeout=timeout_s)
    client.start(timeout=30)
    return client


def make_chroot(root_connect: str, name: str) -> str:
    """Create a fresh unique chroot for one test; return the connect string that uses it."""
    path = f"/t-{name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "_").replace("]", "_")
    root = new_client(root_connect)
    try:
        root.ensure_path(path)
    finally:
        root.stop()
        root.close()
    return f"{root_connect}{path}"


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
