"""Helpers for the cluster tests: registering a broker node by hand, and bounded waiting."""

from __future__ import annotations

import time
from collections.abc import Callable

from kazoo.client import KazooClient

from broker.cluster import zk_paths


def add_broker(client: KazooClient, broker_id: int, port: int, host: str = "127.0.0.1") -> None:
    """Register ``broker_id`` as an ephemeral node of ``client``'s session, as a broker would."""
    client.create(
        zk_paths.broker_path(broker_id),
        zk_paths.encode_broker(host, port, 1_700_000_000_000),
        ephemeral=True,
        makepath=True,
    )


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout_s} s")
        time.sleep(0.02)
