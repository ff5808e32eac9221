"""What DescribeConfigs (and CreateTopics v5+) answer for a topic or a broker: every config with its value,
where the value comes from, and its synonyms (Kafka's ``ConfigHelper``).

**A topic** has every key of :data:`~broker.cluster.topic_config.TOPIC_CONFIG_KEYS`, never read-only.
Its value is the topic's override if it has one, else the broker's own setting; its synonyms, most
important first, as Kafka lists them: the override (``TOPIC_CONFIG``), the broker setting under Kafka's
broker name (``log.segment.bytes``) when ``lumber.toml`` gives it a value other than the built-in default
(``STATIC_BROKER_CONFIG``), and the built-in default (``DEFAULT_CONFIG``). The config's source is its first
synonym's.

**A broker** (this broker's id as the resource name) has the ``[log]`` and ``[broker]`` settings that
Kafka has a broker config for, under Kafka's names (:data:`BROKER_CONFIG_NAMES`), all read-only: Lumber's
broker configs live in ``lumber.toml`` and change with a restart. Settings Kafka has no name for
(``expose``, ``flush_on_ack``...) are left out. Kafka's empty resource name (the cluster-wide dynamic
defaults) has no configs: Lumber has no dynamic broker configs.

Where Lumber differs from Kafka: a broker setting is ``STATIC_BROKER_CONFIG`` when its value differs from
the built-in default, not when the file names it (a ``lumber.toml`` that repeats a default reads as
``DEFAULT_CONFIG``). Pure functions: thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from broker.cluster.topic_config import TOPIC_CONFIG_KEYS, ConfigType, config_string
from broker.config import BrokerConfig, LogConfig
from broker.protocol.messages.config_resource import ConfigSource


@dataclass(frozen=True)
class ConfigSynonym:
    """One of the settings a config's value may come from (DescribeConfigs v1+ ``synonyms``)."""

    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One config as DescribeConfigs describes it."""

    name: str
    value: str
    source: ConfigSource
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: ConfigType
    documentation: str


@dataclass(frozen=True)
class BrokerConfigName:
    """A broker setting under Kafka's name."""

    section: Literal["log", "broker"]
    field: str
    type: ConfigType


#: Kafka's broker config name -> the ``lumber.toml`` setting it is, sorted by name. The synonyms of the
#: topic configs come from :data:`TOPIC_CONFIG_KEYS`, so the two tables cannot disagree.
BROKER_CONFIG_NAMES: Mapping[str, BrokerConfigName] = dict(
    sorted(
        {
            **{
                key.broker_name: BrokerConfigName(key.section, key.field, key.type)
                for key in TOPIC_CONFIG_KEYS.values()
            },
            "log.dirs": BrokerConfigName("log", "log_dirs", "LIST"),
            "log.index.interval.bytes": BrokerConfigName("log", "index_interval_bytes", "INT"),
            "log.flush.interval.messages": BrokerConfigName("log", "flush_messages", "LONG"),
            "log.flush.interval.ms": BrokerConfigName("log", "flush_ms", "LONG"),
            "log.retention.check.interval.ms": BrokerConfigName("log", "retention_check_interval_ms", "LONG"),
            "log.flush.offset.checkpoint.interval.ms": BrokerConfigName(
                "log", "recovery_checkpoint_interval_ms", "INT"
            ),
            "log.cleaner.threads": BrokerConfigName("log", "cleaner_threads", "INT"),
            "log.cleaner.dedupe.buffer.size": BrokerConfigName("log", "cleaner_dedupe_buffer_bytes", "LONG"),
            "log.cleaner.io.buffer.size": BrokerConfigName("log", "cleaner_io_buffer_bytes", "INT"),
            "log.cleaner.backoff.ms": BrokerConfigName("log", "cleaner_backoff_ms", "LONG"),
            "log.segment.delete.delay.ms": BrokerConfigName("log", "file_delete_delay_ms", "LONG"),
            "broker.id": BrokerConfigName("broker", "broker_id", "INT"),
            "num.network.threads": BrokerConfigName("broker", "num_network_threads", "INT"),
            "num.io.threads": BrokerConfigName("broker", "num_io_threads", "INT"),
            "queued.max.requests": BrokerConfigName("broker", "queued_max_requests", "INT"),
            "socket.request.max.bytes": BrokerConfigName("broker", "socket_request_max_bytes", "INT"),
            "connections.max.idle.ms": BrokerConfigName("broker", "connections_max_idle_ms", "LONG"),
            "auto.create.topics.enable": BrokerConfigName("broker", "auto_create_topics", "BOOLEAN"),
            "num.partitions": BrokerConfigName("broker", "num_partitions", "INT"),
            "producer.id.expiration.ms": BrokerConfigName("broker", "producer_id_expiration_ms", "INT"),
            "default.replication.factor": BrokerConfigName("broker", "default_replication_factor", "INT"),
            "replica.lag.time.max.ms": BrokerConfigName("broker", "replica_lag_time_max_ms", "LONG"),
            "replica.fetch.wait.max.ms": BrokerConfigName("broker", "replica_fetch_wait_max_ms", "INT"),
            "max.incremental.fetch.session.cache.slots": BrokerConfigName(
                "broker", "max_incremental_fetch_session_cache_slots", "INT"
            ),
            "replica.fetch.max.bytes": BrokerConfigName("broker", "replica_fetch_max_bytes", "INT"),
            "replica.fetch.backoff.ms": BrokerConfigName("broker", "replica_fetch_backoff_ms", "INT"),
            "num.replica.fetchers": BrokerConfigName("broker", "num_replica_fetchers", "INT"),
            "auto.leader.rebalance.enable": BrokerConfigName("broker", "auto_leader_rebalance", "BOOLEAN"),
            "controlled.shutdown.enable": BrokerConfigName("broker", "controlled_shutdown", "BOOLEAN"),
        }.items()
    )
)


def _setting(
    section: Literal["log", "broker"], field: str, log: LogConfig, broker: BrokerConfig
) -> tuple[str, str, str]:
    """``(value, built-in default, documentation)`` of a ``lumber.toml`` setting, as config strings."""
    config: LogConfig | BrokerConfig = log if section == "log" else broker
    info = type(config).model_fields[field]
    default = info.get_default(call_default_factory=True)
    return config_string(getattr(config, field)), config_string(default), info.description or ""


def _broker_synonyms(
    broker_name: str, section: Literal["log", "broker"], field: str, log: LogConfig, broker: BrokerConfig
) -> tuple[list[ConfigSynonym], str]:
    value, default, documentation = _setting(section, field, log, broker)
    synonyms = []
    if value != default:
        synonyms.append(ConfigSynonym(broker_name, value, ConfigSource.STATIC_BROKER_CONFIG))
    synonyms.append(ConfigSynonym(broker_name, default, ConfigSource.DEFAULT_CONFIG))
    return synonyms, documentation


def _wanted(names: Iterable[str], keys: Sequence[str] | None) -> list[str]:
    """``names`` filtered by a request's keys (None or empty: all, as Kafka reads them; unknown keys are
    left out)."""
    return [name for name in names if not keys or name in keys]


def topic_config_entries(
    overrides: Mapping[str, str], log: LogConfig, broker: BrokerConfig, keys: Sequence[str] | None = None
) -> list[ConfigEntry]:
    """Every topic config (or those in ``keys``) of a topic with ``overrides`` (see the module docstring)."""
    entries = []
    for name in _wanted(sorted(TOPIC_CONFIG_KEYS), keys):
        key = TOPIC_CONFIG_KEYS[name]
        synonyms, documentation = _broker_synonyms(key.broker_name, key.section, key.field, log, broker)
        if name in overrides:
            synonyms.insert(0, ConfigSynonym(name, overrides[name], ConfigSource.TOPIC_CONFIG))
        first = synonyms[0]
        entries.append(
            ConfigEntry(name, first.value, first.source, False, tuple(synonyms), key.type, documentation)
        )
    return entries


def broker_config_entries(
    log: LogConfig, broker: BrokerConfig, keys: Sequence[str] | None = None
) -> list[ConfigEntry]:
    """Every broker config Kafka has a name for (or those in ``keys``), read-only."""
    entries = []
    for name in _wanted(BROKER_CONFIG_NAMES, keys):
        setting = BROKER_CONFIG_NAMES[name]
        synonyms, documentation = _broker_synonyms(name, setting.section, setting.field, log, broker)
        first = synonyms[0]
        entries.append(
            ConfigEntry(name, first.value, first.source, True, tuple(synonyms), setting.type, documentation)
        )
    return entries
