"""Change a topic's config overrides in ``/config/topics/<topic>`` (:mod:`broker.cluster.zk_paths`) without
losing a concurrent change (:meth:`broker.cluster.topic_admin.TopicAdmin.topic_config` reads them).

:meth:`TopicConfigStore.alter` is a compare-and-set loop, Kafka's ``AdminZkClient.changeTopicConfig`` made
conditional:

1. read the topic node ``/brokers/topics/<topic>`` (its znode version and the replication factor, which
   bounds ``min.insync.replicas``) and the config node (its data and znode version; it may not exist: a
   topic created without configs);
2. compute the new overrides from the current ones (the caller's ``change``: a full replace for
   AlterConfigs, SET/DELETE/APPEND/SUBTRACT for IncrementalAlterConfigs) and check them
   (:func:`~broker.cluster.topic_config.check_topic_configs`);
3. write them in one multi: ``check(topic node, version read)`` and ``set(config node, data, version
   read)``, or ``create`` when there was none. A multi that fails because another writer got there first
   (BadVersion, NodeExists) or the topic went (NoNode) starts again at step 1 with what is there now, so two
   concurrent alters of different keys both land, and a config is never written for a deleted topic (step
   1 then raises UnknownTopicError).

A retry after a lost reply (connection loss) also starts at step 1; every ``change`` Lumber makes gives
the same result applied twice, so that is safe. Retries end after ``RETRY_DEADLINE_S``. Thread-safe:
every call is independent; the kazoo client may be shared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import ForceRetryError, KazooRetry

from broker.cluster import zk_paths
from broker.cluster.errors import UnknownTopicError, zookeeper_error
from broker.cluster.topic_config import check_topic_configs
from broker.cluster.zk_transactions import first_error
from broker.record.topic_name import validate_topic_name

logger = logging.getLogger(__name__)

#: How long an operation keeps retrying through connection loss and lost races before it gives up.
RETRY_DEADLINE_S = 15.0

#: ``change(current overrides, replication factor)`` -> the new overrides, unchecked.
ConfigChange = Callable[[Mapping[str, str], int], Mapping[str, str | None]]

T = TypeVar("T")


class TopicConfigStore:
    """The topic config nodes over a started kazoo client (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def _retry(self, func: Callable[[], T]) -> T:
        retry = KazooRetry(max_tries=-1, delay=0.02, backoff=2, max_delay=0.5, deadline=RETRY_DEADLINE_S)
        result: T = retry(func)
        return result

    def alter(self, topic: str, change: ConfigChange, *, validate_only: bool = False) -> dict[str, str]:
        """Replace the topic's overrides with ``change(current, replication factor)``, checked, by
        compare-and-set; returns what was stored (with ``validate_only``: what would be, nothing written).

        Raises UnknownTopicError, InvalidTopicConfigError (naming the topic, key and value; nothing
        written), whatever ``change`` raises, or ZooKeeperError.
        """
        validate_topic_name(topic)
        topic_path = zk_paths.topic_path(topic)
        config_path = zk_paths.topic_config_path(topic)

        def alter_once() -> dict[str, str]:
            try:
                topic_data, topic_stat = self._client.get(topic_path)
            except NoNodeError:
                raise UnknownTopicError(topic) from None
            assignment = zk_paths.decode_assignment(topic_path, topic_data)
            replication_factor = len(assignment[0])
            try:
                config_data, config_stat = self._client.get(config_path)
            except NoNodeError:
                current: dict[str, str] = {}
                config_version = None
            else:
                current = zk_paths.decode_topic_config(config_path, config_data)
                config_version = config_stat.version
            stored = check_topic_configs(topic, change(current, replication_factor), replication_factor)
            if validate_only:
                return stored
            data = zk_paths.encode_topic_config(stored)
            transaction = self._client.transaction()
            transaction.check(topic_path, topic_stat.version)
            if config_version is None:
                transaction.create(config_path, data)
            else:
                transaction.set_data(config_path, data, config_version)
            error = first_error(transaction.commit())
            if isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
                logger.debug(
                    "topic %r: the config changed under this alter (%r): reading it again", topic, error
                )
                raise ForceRetryError
            if error is not None:
                raise error
            return stored

        try:
            stored = self._retry(alter_once)
        except zk_paths.ZkDataError as exc:
            raise zookeeper_error("decode", config_path, exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("write", config_path, exc) from exc
        if not validate_only:
            logger.info("topic %r: configs now %s", topic, stored or "{} (the brokers' own)")
        return stored
