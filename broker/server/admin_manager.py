"""Topic administration for CreateTopics, DeleteTopics and Metadata's auto-creation (Kafka's
``ZkAdminManager``): the request's checks, then the ZooKeeper writes through
:class:`~broker.cluster.topic_admin.TopicAdmin`.

Lumber keeps one replica per partition, so a replication factor other than 1 (or an assignment naming
more than one broker for a partition) is refused with INVALID_REPLICATION_FACTOR; per-topic configs are
refused with INVALID_CONFIG (they live in ``lumber.toml``). Failures are raised
(:class:`~broker.server.errors.ServerError`, :class:`~broker.cluster.errors.ClusterError`,
:class:`~broker.log.errors.InvalidTopicError`) and answered through :mod:`broker.server.error_codes`.
Thread-safe: stateless between calls (ZooKeeper orders concurrent creations).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import InvalidPartitionsError, TopicExistsError
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_name import validate_topic_name
from broker.server.errors import InvalidConfigError, InvalidReplicationFactorError, InvalidRequestError

logger = logging.getLogger(__name__)


class AdminManager:
    """Creates and deletes topics for the admin APIs (see the module docstring)."""

    def __init__(self, admin: TopicAdmin, cluster: ClusterWatcher, default_partitions: int) -> None:
        self._admin = admin
        self._cluster = cluster
        self._default_partitions = default_partitions

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        config_names: Sequence[str],
        *,
        validate_only: bool,
    ) -> int:
        """Create topic ``name`` (or only check that it could be, with ``validate_only``); returns its
        partition count. ``num_partitions`` and ``replication_factor`` are -1 for the broker's defaults or
        when ``assignment`` (partition -> broker ids) places the partitions."""
        validate_topic_name(name)
        if assignment is not None:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError("give either an assignment or partitions and replication factor")
            if any(len(replicas) != 1 for replicas in assignment.values()):
                raise InvalidReplicationFactorError("Lumber keeps exactly one replica per partition")
            partitions = len(assignment)
        else:
            partitions = self._default_partitions if num_partitions == -1 else num_partitions
            if replication_factor not in (-1, 1):
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor}: Lumber keeps one replica per partition"
                )
            if partitions < 1:
                raise InvalidPartitionsError(f"{partitions} partitions: a topic needs at least 1")
        if config_names:
            raise InvalidConfigError(
                f"per-topic configs are not supported ({', '.join(config_names)}); use lumber.toml"
            )
        if validate_only:
            if name in self._cluster.refresh().topics:
                raise TopicExistsError(name)
            return partitions
        created = self._admin.create_topic(name, partitions, assignment=assignment)
        logger.info("created topic %r: %s", name, created)
        return len(created)

    def auto_create_topic(self, name: str) -> None:
        """Create ``name`` with the default partitions (Metadata's auto-creation); one that exists is fine."""
        validate_topic_name(name)
        with contextlib.suppress(TopicExistsError):
            self._admin.create_topic(name, self._default_partitions)
        logger.info("auto-created topic %r with %d partitions", name, self._default_partitions)

    def delete_topic(self, name: str) -> None:
        validate_topic_name(name)
        self._admin.delete_topic(name)
        logger.info("deleted topic %r", name)
