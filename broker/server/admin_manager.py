"""Topic administration for CreateTopics, DeleteTopics and Metadata's auto-creation (Kafka's
``ZkAdminManager``): the request's checks, then the ZooKeeper writes through
:class:`~broker.cluster.topic_admin.TopicAdmin`.

A topic gets ``replication_factor`` replicas per partition (-1: ``[broker] default_replication_factor``),
spread as Kafka spreads them, or an explicit assignment; too few live brokers is
INVALID_REPLICATION_FACTOR (the cluster package's error). Per-topic configs are the ones
:mod:`broker.cluster.topic_config` knows, stored in ``/config/topics/<topic>``; any other key, or a value
they do not take, is INVALID_CONFIG naming it (``validate_only`` checks them too). Failures are raised
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
from broker.cluster.topic_config import check_topic_configs
from broker.record.topic_name import validate_topic_name
from broker.server.errors import InvalidRequestError

logger = logging.getLogger(__name__)


class AdminManager:
    """Creates and deletes topics for the admin APIs (see the module docstring)."""

    def __init__(
        self,
        admin: TopicAdmin,
        cluster: ClusterWatcher,
        default_partitions: int,
        default_replication_factor: int = 1,
    ) -> None:
        self._admin = admin
        self._cluster = cluster
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool,
    ) -> tuple[int, int]:
        """Create topic ``name`` (or only check that it could be, with ``validate_only``); returns its
        partition count and replication factor. ``num_partitions`` and ``replication_factor`` are -1 for
        the broker's defaults or when ``assignment`` (partition -> broker ids) places the partitions."""
        validate_topic_name(name)
        if assignment is not None:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError("give either an assignment or partitions and replication factor")
            partitions = len(assignment)
            factor = len(next(iter(assignment.values()), ()))
        else:
            partitions = self._default_partitions if num_partitions == -1 else num_partitions
            factor = self._default_replication_factor if replication_factor == -1 else replication_factor
            if partitions < 1:
                raise InvalidPartitionsError(f"{partitions} partitions: a topic needs at least 1")
        checked = check_topic_configs(name, configs, factor)
        if validate_only:
            if name in self._cluster.refresh().topics:
                raise TopicExistsError(name)
            return partitions, factor
        created = self._admin.create_topic(
            name,
            partitions,
            replication_factor=factor,
            assignment=assignment,
            configs=checked or None,
        )
        logger.info("created topic %r: %s%s", name, created, f", configs {checked}" if checked else "")
        return len(created), factor

    def auto_create_topic(self, name: str) -> None:
        """Create ``name`` with the default partitions (Metadata's auto-creation); one that exists is fine."""
        validate_topic_name(name)
        with contextlib.suppress(TopicExistsError):
            self._admin.create_topic(
                name, self._default_partitions, replication_factor=self._default_replication_factor
            )
        logger.info(
            "auto-created topic %r with %d partitions of %d replicas",
            name,
            self._default_partitions,
            self._default_replication_factor,
        )

    def delete_topic(self, name: str) -> None:
        validate_topic_name(name)
        self._admin.delete_topic(name)
        logger.info("deleted topic %r", name)
