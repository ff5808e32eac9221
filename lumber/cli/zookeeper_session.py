"""A kazoo session for one CLI command: ``--zookeeper-connect`` or ``[zookeeper] connect``, closed after."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.errors import ZooKeeperError
from broker.cluster.zookeeper_auth import new_zookeeper_client

if TYPE_CHECKING:
    from lumber.config import LumberConfig


@contextmanager
def zookeeper_session(args: argparse.Namespace, config: LumberConfig) -> Iterator[KazooClient]:
    """A started client; :class:`ZooKeeperError` (retriable) when ZooKeeper cannot be reached."""
    connect = args.zookeeper_connect or config.zookeeper.connect
    client = new_zookeeper_client(hosts=connect, timeout=config.zookeeper.session_timeout_ms / 1000)
    try:
        client.start(timeout=config.zookeeper.connect_timeout_ms / 1000)
    except (KazooTimeoutError, KazooException) as exc:
        client.close()
        raise ZooKeeperError(
            f"zookeeper {connect}: cannot connect: {exc!r}", path="/", retriable=True
        ) from exc
    try:
        yield client
    finally:
        client.stop()
        client.close()
