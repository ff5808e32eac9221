"""Reading the nodes of :mod:`broker.cluster.zk_paths`, optionally leaving a watch behind.

Reads of many nodes (:func:`read_states`, :func:`read_assignments`) are pipelined: every request is sent
(``get_async``) before the first reply is awaited, so 1,000 nodes cost about one round trip plus
ZooKeeper's work, not 1,000 round trips. A node that is missing gets an ``exists`` watch instead (when a
watch is given), so its creation is seen.

Shared by :class:`~broker.cluster.topic_admin.TopicAdmin` (plain reads) and
:class:`~broker.cluster.cluster_watcher.ClusterWatcher` (every read also sets the watch, so a change after
the read is never missed). kazoo exceptions propagate unchanged: callers map them at their boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.cluster import zk_paths
from broker.cluster.broker_info import BrokerInfo
from broker.cluster.partition_state import PartitionState
from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition

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
    return BrokerInfo(broker_id, host, port, zk_paths.decode_broker_rack(path, data))


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


#: How long one pipelined reply is awaited before the read fails (kazoo's own timeouts usually come first).
ASYNC_REPLY_TIMEOUT_S = 30.0


def _get_many(client: KazooClient, paths: list[str], watch: Watch | None) -> list[tuple[bytes, int] | None]:
    """``(data, znode version)`` of each path, None where it does not exist (pipelined, see the module)."""
    pending = [client.get_async(path, watch=watch) for path in paths]
    found: list[tuple[bytes, int] | None] = []
    missing: list[int] = []
    for index, result in enumerate(pending):
        try:
            data, stat = result.get(timeout=ASYNC_REPLY_TIMEOUT_S)
        except NoNodeError:
            found.append(None)
            missing.append(index)
            continue
        found.append((data, stat.version))
    if watch is not None and missing:
        exists = [(index, client.exists_async(paths[index], watch=watch)) for index in missing]
        for index, result in exists:
            if result.get(timeout=ASYNC_REPLY_TIMEOUT_S) is not None:
                # created between the get and the exists: read it (the get watch is set by this read)
                try:
                    data, stat = client.get(paths[index], watch=watch)
                except NoNodeError:
                    continue
                found[index] = (data, stat.version)
    return found


def read_states(
    client: KazooClient,
    partitions: list[TopicPartition],
    watch: Watch | None = None,
    *,
    skip_bad: bool = False,
) -> dict[TopicPartition, PartitionState | None]:
    """The state of each partition, None where it has no state node (pipelined).

    A node that does not hold a state raises :class:`~broker.cluster.zk_paths.ZkDataError`, or with
    ``skip_bad`` is logged and left out of the result.
    """
    paths = [zk_paths.partition_state_path(tp.topic, tp.partition) for tp in partitions]
    states: dict[TopicPartition, PartitionState | None] = {}
    for tp, path, found in zip(partitions, paths, _get_many(client, paths, watch), strict=True):
        if found is None:
            states[tp] = None
            continue
        try:
            states[tp] = zk_paths.decode_partition_state(path, found[0], found[1])
        except zk_paths.ZkDataError as exc:
            if not skip_bad:
                raise
            logger.error("cluster: partition %s: %s", tp, exc)  # noqa: TRY400 - bad data, no traceback
    return states


class TopicNode(NamedTuple):
    """A topic node as read: partition -> replicas, the partitions moving (partition -> ``(adding,
    removing)``, :func:`~broker.cluster.zk_paths.decode_moving`) and the znode version."""

    assignment: dict[int, tuple[int, ...]]
    moving: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]
    zk_version: int


def read_assignments(
    client: KazooClient, topics: list[str], watch: Watch | None = None
) -> dict[str, TopicNode | zk_paths.ZkDataError | None]:
    """Each topic's node (pipelined): None if it does not exist, the ZkDataError if its node does not hold
    an assignment."""
    paths = [zk_paths.topic_path(topic) for topic in topics]
    result: dict[str, TopicNode | zk_paths.ZkDataError | None] = {}
    for topic, path, found in zip(topics, paths, _get_many(client, paths, watch), strict=True):
        if found is None:
            result[topic] = None
            continue
        try:
            assignment = zk_paths.decode_assignment(path, found[0])
            moving = zk_paths.decode_moving(path, found[0])
        except zk_paths.ZkDataError as exc:
            result[topic] = exc
            continue
        result[topic] = TopicNode(assignment, moving, found[1])
    return result


def read_topic_configs(
    client: KazooClient, topics: list[str], watch: Watch | None = None
) -> dict[str, dict[str, str] | None]:
    """Each topic's config overrides (pipelined); None where it has no config node or an unreadable one
    (logged)."""
    paths = [zk_paths.topic_config_path(topic) for topic in topics]
    configs: dict[str, dict[str, str] | None] = {}
    for topic, path, found in zip(topics, paths, _get_many(client, paths, watch), strict=True):
        if found is None:
            configs[topic] = None
            continue
        try:
            configs[topic] = zk_paths.decode_topic_config(path, found[0])
        except zk_paths.ZkDataError as exc:
            logger.error("cluster: topic %r: %s; using no overrides", topic, exc)  # noqa: TRY400
            configs[topic] = None
    return configs


def read_topic_config(client: KazooClient, topic: str, watch: Watch | None = None) -> dict[str, str] | None:
    """The topic's config overrides; None if it has no config node. Raises ZkDataError if unreadable."""
    path = zk_paths.topic_config_path(topic)
    for _ in range(_CHILDREN_TRIES):
        try:
            data, _ = client.get(path, watch=watch)
        except NoNodeError:
            if watch is None or client.exists(path, watch=watch) is None:
                return None
            continue  # created between the two calls: read it
        return zk_paths.decode_topic_config(path, data)
    return None


def read_controller(client: KazooClient, watch: Watch | None = None) -> int:
    """The controller's broker id from ``/controller``; -1 if there is none or the node is unreadable
    (logged). With a watch, a missing node gets an ``exists`` watch so the next election is seen."""
    path = zk_paths.CONTROLLER_PATH
    for _ in range(_CHILDREN_TRIES):
        try:
            data, _ = client.get(path, watch=watch)
        except NoNodeError:
            if watch is None or client.exists(path, watch=watch) is None:
                return -1
            continue  # elected between the two calls: read it
        try:
            return zk_paths.decode_controller(path, data)
        except zk_paths.ZkDataError as exc:
            logger.error("cluster: %s; no controller", exc)  # noqa: TRY400 - bad data, no traceback
            return -1
    return -1
