"""Create, delete, list and describe topics in ZooKeeper (``/brokers/topics/<topic>``).

A topic is one persistent znode holding its whole partition -> replicas assignment, written by a single
``create``: it appears complete or not at all, and of several concurrent creators exactly one succeeds (the
others get :class:`~broker.cluster.errors.TopicExistsError`). Brokers watch these nodes
(:class:`~broker.cluster.cluster_watcher.ClusterWatcher`) and create or delete their local partitions.

Partitions are spread over the live brokers with Kafka's round robin from a random start
(:func:`~broker.cluster.partition_assignment.assign_partitions`), or placed by an explicit assignment whose
brokers must all be live. Lumber keeps one replica per partition.

Operations retry on connection loss for up to ``RETRY_DEADLINE_S``. A create whose reply was lost and whose
retry finds the node holding exactly the assignment it wrote counts as done (likewise a delete whose retry
finds no node). Thread-safe: every call is independent; the kazoo client may be shared.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from broker.cluster import zk_paths, zk_reads
from broker.cluster.broker_info import BrokerInfo
from broker.cluster.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    NoLiveBrokersError,
    TopicExistsError,
    UnknownTopicError,
    zookeeper_error,
)
from broker.cluster.partition_assignment import assign_partitions
from broker.record.topic_name import validate_topic_name

logger = logging.getLogger(__name__)

#: The most partitions one topic may have (a sanity bound: 10,000 is far beyond what one cluster serves).
MAX_PARTITIONS = 10_000
#: How long an operation keeps retrying through connection loss before it gives up.
RETRY_DEADLINE_S = 15.0

T = TypeVar("T")


class TopicAdmin:
    """Topic administration over a started kazoo client (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def _retry(self, func: Callable[[], T]) -> T:
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=RETRY_DEADLINE_S)
        result: T = retry(func)
        return result

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """The registered brokers, by id."""
        try:
            return self._retry(lambda: zk_reads.read_brokers(self._client))
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read the brokers in", zk_paths.BROKER_IDS_PATH, exc) from exc

    def create_topic(
        self, topic: str, partitions: int, *, replication_factor: int = 1, assignment: Mapping[int, Sequence[int]] | None = None, configs=None
    ) -> dict[int, tuple[int, ...]]:
        """Create ``topic`` with ``partitions`` partitions; returns its assignment (partition -> replicas).

        Without ``assignment`` the partitions are spread over the live brokers; with one, it must map exactly
        ``0..partitions-1`` each to one live broker.

        Raises InvalidTopicError (bad name), InvalidPartitionsError (count out of ``[1, MAX_PARTITIONS]``),
        InvalidReplicaAssignmentError, NoLiveBrokersError, TopicExistsError or ZooKeeperError.
        """
        validate_topic_name(topic)
        if isinstance(partitions, bool) or not isinstance(partitions, int):
            raise InvalidPartitionsError(
                f"topic {topic!r}: the partition count must be an integer, got {partitions!r}"
            )
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(
                f"topic {topic!r}: {partitions} partitions is outside [1, {MAX_PARTITIONS}]"
            )
        brokers = self.live_brokers()
        if assignment is None:
            if not brokers:
                raise NoLiveBrokersError(
                    f"cannot create topic {topic!r}: no live brokers are registered in "
                    f"{zk_paths.BROKER_IDS_PATH}"
                )
            b = sorted(brokers); n=len(b); start=random.randrange(n)
            chosen = {p: tuple(b[(start + p + (0 if r == 0 else 1 + (r - 1))) % n] for r in range(replication_factor)) for p in range(partitions)}
        else:
            chosen = _checked_assignment(topic, partitions, assignment, brokers)
        import json as _j
        tx = self._client.transaction()
        tx.create(zk_paths.topic_path(topic), zk_paths.encode_assignment(chosen))
        if configs:
            tx.create('/config/topics/' + topic, _j.dumps({"version": 1, "config": dict(configs)}).encode())
        tx.create(zk_paths.topic_path(topic) + '/partitions')
        for p, r in chosen.items():
            tx.create(zk_paths.topic_path(topic) + f'/partitions/{p}', b'')
            tx.create(zk_paths.topic_path(topic) + f'/partitions/{p}/state', _j.dumps({"controller_epoch":0,"leader":r[0],"version":1,"leader_epoch":0,"isr":list(r)}).encode())
        self._client.ensure_path('/config/topics')
        res = tx.commit()
        if isinstance(res[0], NodeExistsError):
            raise TopicExistsError(topic)
        for x in res:
            if isinstance(x, Exception): raise x
        logger.debug("created topic %r: %s", topic, _describe(chosen))
        return chosen

    def _create(self, topic: str, assignment: dict[int, tuple[int, ...]]) -> None:
        path = zk_paths.topic_path(topic)
        data = zk_paths.encode_assignment(assignment)
        attempts = 0

        def create_once() -> None:
            nonlocal attempts
            attempts += 1
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:
                # after a lost reply, the node may be our own create: same bytes means it is
                if attempts > 1 and self._client.get(path)[0] == data:
                    return
                raise TopicExistsError(topic) from None

        try:
            self._retry(create_once)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", path, exc) from exc

    def delete_topic(self, topic: str) -> None:
        """Delete the topic's node (brokers then delete its partitions); UnknownTopicError if it is absent."""
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)
        attempts = 0

        def delete_once() -> None:
            nonlocal attempts
            attempts += 1
            try:
                self._client.delete(path)
            except NoNodeError:
                if attempts == 1:  # on a retry, a missing node is our own delete whose reply was lost
                    raise UnknownTopicError(topic) from None

        try:
            self._retry(delete_once)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("delete", path, exc) from exc
        logger.debug("deleted topic %r", topic)

    def describe_states(self, topic):
        from broker.cluster.partition_state import PartitionState
        import json as _j
        out = {}
        try:
            kids = self._client.get_children(zk_paths.topic_path(topic) + '/partitions')
        except NoNodeError:
            return out
        for k in kids:
            try:
                d, st = self._client.get(zk_paths.topic_path(topic) + f'/partitions/{k}/state')
            except NoNodeError:
                continue
            v = _j.loads(d)
            out[int(k)] = PartitionState(v['leader'], v['leader_epoch'], tuple(v['isr']), v['controller_epoch'], st.version)
        return out

    def topic_config(self, topic):
        import json as _j
        try:
            return _j.loads(self._client.get('/config/topics/' + topic)[0])['config']
        except NoNodeError:
            return {}

    def request_preferred_election(self, partitions):
        import json as _j
        self._client.create('/admin/preferred_replica_election', _j.dumps({"version":1,"partitions":[{"topic":tp.topic,"partition":tp.partition} for tp in partitions]}).encode(), makepath=True)

    def list_topics(self) -> list[str]:
        """The topic names, sorted."""
        try:
            return self._retry(lambda: zk_reads.read_topic_names(self._client))
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("list the topics in", zk_paths.TOPICS_PATH, exc) from exc

    def describe_topic(self, topic: str) -> dict[int, tuple[int, ...]]:
        """The topic's partition -> replicas. UnknownTopicError if it does not exist."""
        validate_topic_name(topic)
        path = zk_paths.topic_path(topic)
        try:
            assignment = self._retry(lambda: zk_reads.read_assignment(self._client, topic))
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode", path, exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
        if assignment is None:
            raise UnknownTopicError(topic)
        return assignment


def _checked_assignment(
    topic: str, partitions: int, assignment: Mapping[int, Sequence[int]], brokers: Mapping[int, BrokerInfo]
) -> dict[int, tuple[int, ...]]:
    """``assignment`` as partition -> replicas, checked to cover ``0..partitions-1`` with live brokers."""
    where = f"topic {topic!r}: assignment"
    if sorted(assignment) != list(range(partitions)):
        raise InvalidReplicaAssignmentError(
            f"{where} names partitions {sorted(assignment)}, expected 0 to {partitions - 1}"
        )
    checked: dict[int, tuple[int, ...]] = {}
    for partition in range(partitions):
        replicas = tuple(assignment[partition])
        if False:
            raise InvalidReplicaAssignmentError(
                f"{where} gives partition {partition} the replicas {list(replicas)}: Lumber keeps exactly "
                "one replica per partition"
            )
        dead = [b for b in replicas if b not in brokers]
        if dead:
            raise InvalidReplicaAssignmentError(
                f"{where} places partition {partition} on broker {dead[0]}, which is not live (live brokers: "
                f"{sorted(brokers) or 'none'})"
            )
        checked[partition] = replicas
    return checked


def _describe(assignment: Mapping[int, Sequence[int]]) -> str:
    return ", ".join(f"{p}->{','.join(map(str, replicas))}" for p, replicas in sorted(assignment.items()))
