"""Reading the brokers and topics of :mod:`broker.cluster.zk_paths`, optionally leaving a watch behind.

Shared by :class:`~broker.cluster.topic_admin.TopicAdmin` (plain reads) and
:class:`~broker.cluster.cluster_watcher.ClusterWatcher` (every read also sets the watch, so a change after
the read is never missed). kazoo exceptions propagate unchanged: callers map them at their boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.cluster import zk_paths
from broker.cluster.broker_info import BrokerInfo
from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_topic_name

logger = logging.getLogger(__name__)

#: A kazoo watch function: called once, on kazoo's callback thread, with a ``WatchedEvent``.
Watch = Callable[[Any], None]

#: Tries of "list the children; the parent is missing; it exists after all" before giving up on a race.
_CHILDREN_TRIES = 3


def read_children(client: KazooClient, path: str, watch: Watch | None = None) -> list[str]:
    """The children of ``path``, sorted; ``[]`` if it does not exist (``watch`` then waits for it)."""
    for _ in range(_CHILDREN_TRIES):
        try:
            children: list[str] = client.get_children(path, watch=watch)
        except NoNodeError:
            if client.exists(path, watch=watch) is None:
                return []
            continue  # created between the two calls: list it
        return sorted(children)
    return []


def read_broker(client: KazooClient, broker_id: int, watch: Watch | None = None) -> BrokerInfo | None:
    """The broker registered as ``broker_id``; None if it is not, or if its node is unreadable (logged)."""
    path = zk_paths.broker_path(broker_id)
    try:
        data, _ = client.get(path, watch=watch)
    except NoNodeError:
        return None
    try:
        host, port = zk_paths.decode_broker(path, data)
    except zk_paths.ZkDataError as exc:
        logger.warning("ignoring broker %d: %s", broker_id, exc)
        return None
    return BrokerInfo(broker_id, host, port)


def read_brokers(client: KazooClient, watch: Watch | None = None) -> dict[int, BrokerInfo]:
    """Every registered broker with a readable node, by id."""
    brokers: dict[int, BrokerInfo] = {}
    for child in read_children(client, zk_paths.BROKER_IDS_PATH, watch):
        try:
            broker_id = int(child)
        except ValueError:
            logger.warning("ignoring %s/%s: not a broker id", zk_paths.BROKER_IDS_PATH, child)
            continue
        info = read_broker(client, broker_id, watch)
        if info is not None:
            brokers[broker_id] = info
    return brokers


def read_topic_names(client: KazooClient, watch: Watch | None = None) -> list[str]:
    """The topics in ``/brokers/topics`` whose names are valid Kafka topic names, sorted (others logged)."""
    names = []
    for child in read_children(client, zk_paths.TOPICS_PATH, watch):
        try:
            validate_topic_name(child)
        except InvalidTopicError as exc:
            logger.warning("ignoring %s/%s: %s", zk_paths.TOPICS_PATH, child, exc)
            continue
        names.append(child)
    return names


def read_assignment(
    client: KazooClient, topic: str, watch: Watch | None = None
) -> dict[int, tuple[int, ...]] | None:
    """The topic's partition -> replicas; None if it does not exist.

    Raises :class:`~broker.cluster.zk_paths.ZkDataError` if the node does not hold an assignment.
    """
    path = zk_paths.topic_path(topic)
    try:
        data, _ = client.get(path, watch=watch)
    except NoNodeError:
        return None
    return zk_paths.decode_assignment(path, data)
