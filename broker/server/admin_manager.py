"""Topic administration for CreateTopics, DeleteTopics, Metadata's auto-creation, DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs (Kafka's ``ZkAdminManager`` and ``ConfigAdminManager``): the
request's checks, then the ZooKeeper writes through :class:`~broker.cluster.topic_admin.TopicAdmin` and
:class:`~broker.cluster.topic_config_store.TopicConfigStore`.

A topic gets ``replication_factor`` replicas per partition (-1: ``[broker] default_replication_factor``),
spread as Kafka spreads them, or an explicit assignment; too few live brokers is
INVALID_REPLICATION_FACTOR (the cluster package's error). Per-topic configs are the ones
:mod:`broker.cluster.topic_config` knows, stored in ``/config/topics/<topic>``; any other key, or a value
they do not take, is INVALID_CONFIG naming it (``validate_only`` checks them too). Failures are raised
(:class:`~broker.server.errors.ServerError`, :class:`~broker.cluster.errors.ClusterError`,
:class:`~broker.log.errors.InvalidTopicError`) and answered through :mod:`broker.server.error_codes`.

Configs, one resource at a time (the API layer answers each resource on its own):

* **describe**: a topic's configs (:func:`~broker.server.config_entries.topic_config_entries`, read from
  ZooKeeper, so a describe right after an alter on any broker sees it), or this broker's, read-only
  (:func:`~broker.server.config_entries.broker_config_entries`);
* **alter** (AlterConfigs): the topic's overrides become exactly the ones given (a null value is left
  out, as Kafka reads it); every key not named goes back to the broker's setting;
* **incremental alter** (IncrementalAlterConfigs, KIP-339): SET and DELETE any key; APPEND and SUBTRACT
  only a list-typed key (``cleanup.policy``), starting from the topic's value (its override, else the
  broker's), APPEND adding the members not there yet, as Kafka's ``prepareIncrementalConfigs`` does.

A key named twice in one resource is INVALID_REQUEST (Kafka's "duplicate config keys"); a key Lumber does
not read or a value it does not take is INVALID_CONFIG naming the topic, key and value; ``validate_only``
checks everything and writes nothing. Writes are compare-and-set on the config znode
(:class:`~broker.cluster.topic_config_store.TopicConfigStore`), so concurrent alters lose no key. A broker
resource cannot be altered: Lumber's broker configs live in ``lumber.toml``.
Thread-safe: stateless between calls (ZooKeeper orders concurrent creations and alters).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import InvalidPartitionsError, InvalidTopicConfigError, TopicExistsError
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.topic_config import TOPIC_CONFIG_KEYS, broker_value, check_topic_configs
from broker.cluster.topic_config_store import TopicConfigStore
from broker.config import BrokerConfig, LogConfig
from broker.protocol.messages.config_resource import AlterConfigOp
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from broker.server.config_entries import ConfigEntry, broker_config_entries, topic_config_entries
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
        *,
        configs: TopicConfigStore,
        broker_config: BrokerConfig,
        log_config: LogConfig,
    ) -> None:
        self._admin = admin
        self._cluster = cluster
        self._default_partitions = default_partitions
        self._default_replication_factor = default_replication_factor
        self._configs = configs
        self._broker_config = broker_config
        self._log_config = log_config

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool,
    ) -> tuple[int, int, dict[str, str]]:
        """Create topic ``name`` (or only check that it could be, with ``validate_only``); returns its
        partition count, replication factor and config overrides (checked, as stored). ``num_partitions``
        and ``replication_factor`` are -1 for the broker's defaults or when ``assignment`` (partition ->
        broker ids) places the partitions."""
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
            return partitions, factor, checked
        created = self._admin.create_topic(
            name,
            partitions,
            replication_factor=factor,
            assignment=assignment,
            configs=checked or None,
        )
        logger.info("created topic %r: %s%s", name, created, f", configs {checked}" if checked else "")
        return len(created), factor, checked

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

    def add_partitions(
        self, name: str, count: int, assignment: Sequence[Sequence[int]] | None, *, validate_only: bool
    ) -> dict[int, tuple[int, ...]]:
        """CreatePartitions: grow ``name`` to ``count`` partitions (TopicAdmin.add_partitions)."""
        validate_topic_name(name)
        added = self._admin.add_partitions(name, count, assignment, validate_only=validate_only)
        if not validate_only:
            logger.info("topic %r: added partitions %s", name, added)
        return added

    def request_preferred_election(self, partitions: Sequence[TopicPartition]) -> None:
        """ElectLeaders: ask the controller to make each partition's first replica its leader
        (``/admin/preferred_replica_election``: TopicAdmin.request_preferred_election); a request still
        pending is a retriable ZooKeeperError."""
        self._admin.request_preferred_election(partitions)

    def delete_topic(self, name: str) -> None:
        validate_topic_name(name)
        self._admin.delete_topic(name)
        logger.info("deleted topic %r", name)

    # ------------------------------------------------------------------------------------ configs

    def describe_topic_configs(self, topic: str, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """The topic's configs (those in ``keys``; None or empty: all); UnknownTopicError if it does not
        exist."""
        validate_topic_name(topic)
        return topic_config_entries(
            self._admin.topic_config(topic), self._log_config, self._broker_config, keys
        )

    def topic_configs_of(self, overrides: Mapping[str, str]) -> list[ConfigEntry]:
        """Every config of a topic with ``overrides`` (CreateTopics v5+ answers with them)."""
        return topic_config_entries(overrides, self._log_config, self._broker_config)

    def describe_broker_configs(self, name: str, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """This broker's configs under Kafka's names, read-only; ``name`` is its id (empty: the cluster's
        dynamic defaults, of which Lumber has none). Another broker's id is INVALID_REQUEST, as in Kafka."""
        if name == "":
            return []
        self._check_own_broker(name)
        return broker_config_entries(self._log_config, self._broker_config, keys)

    def refuse_broker_alter(self, name: str) -> None:
        """A broker resource cannot be altered: always raises InvalidRequestError saying why."""
        if name:
            self._check_own_broker(name)
        raise InvalidRequestError(
            f"broker {name or '(cluster default)'}: Lumber's broker configs are read-only over the protocol; "
            "they live in lumber.toml ([broker] and [log]): change them there and restart the broker"
        )

    def _check_own_broker(self, name: str) -> None:
        own = self._broker_config.broker_id
        if name.strip() != str(own):
            raise InvalidRequestError(f"unexpected broker id {name!r}: expected {own} or an empty string")

    def alter_topic_configs(
        self, topic: str, configs: Sequence[tuple[str, str | None]], *, validate_only: bool
    ) -> dict[str, str]:
        """AlterConfigs: the topic's overrides become ``configs`` (null values left out); returns them."""
        validate_topic_name(topic)
        _check_no_duplicates(topic, [name for name, _ in configs])
        wanted = {name: value for name, value in configs if value is not None}
        return self._configs.alter(topic, lambda _current, _rf: wanted, validate_only=validate_only)

    def incremental_alter_topic_configs(
        self, topic: str, changes: Sequence[tuple[str, int, str | None]], *, validate_only: bool
    ) -> dict[str, str]:
        """IncrementalAlterConfigs: apply each ``(key, operation, value)`` to the topic's overrides in
        order; returns the result."""
        validate_topic_name(topic)
        _check_no_duplicates(topic, [name for name, _, _ in changes])
        checked: list[tuple[str, AlterConfigOp, str | None]] = []
        for name, op, value in changes:
            try:
                operation = AlterConfigOp(op)
            except ValueError:
                raise InvalidRequestError(
                    f"topic {topic!r}: {name}: unknown config operation {op} (expected 0 SET, 1 DELETE, "
                    "2 APPEND or 3 SUBTRACT)"
                ) from None
            if operation is AlterConfigOp.SET and value is None:
                raise InvalidRequestError(f"topic {topic!r}: {name}: SET needs a value, got null")
            if name not in TOPIC_CONFIG_KEYS:
                check_topic_configs(topic, {name: value}, 1)  # raises naming the key and the accepted ones
            checked.append((name, operation, value))

        def change(current: Mapping[str, str], _replication_factor: int) -> dict[str, str | None]:
            new: dict[str, str | None] = dict(current)
            for name, operation, value in checked:
                key = TOPIC_CONFIG_KEYS[name]
                if operation is AlterConfigOp.SET:
                    new[name] = value
                elif operation is AlterConfigOp.DELETE:
                    new.pop(name, None)
                else:
                    if not key.is_list:
                        raise InvalidTopicConfigError(
                            f"topic {topic!r}: {name}: {operation.name} is only for list configs "
                            f"({', '.join(k.name for k in TOPIC_CONFIG_KEYS.values() if k.is_list)}); "
                            "use SET"
                        )
                    base = new.get(name)
                    if base is None:
                        base = broker_value(key, self._log_config, self._broker_config)
                    members = [m for m in base.split(",") if m]
                    given = [m.strip() for m in (value or "").split(",") if m.strip()]
                    if operation is AlterConfigOp.APPEND:
                        members += [m for m in given if m not in members]
                    else:
                        members = [m for m in members if m not in given]
                    new[name] = ",".join(members)
            return new

        return self._configs.alter(topic, change, validate_only=validate_only)


def _check_no_duplicates(topic: str, names: Sequence[str]) -> None:
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InvalidRequestError(f"topic {topic!r}: duplicate config keys {twice} in one request")
