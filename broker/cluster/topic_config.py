"""The per-topic configs Lumber keeps in ``/config/topics/<topic>`` (:mod:`broker.cluster.zk_paths`): which
keys there are, what values they take, and what a topic's config means to the brokers.

:data:`TOPIC_CONFIG_KEYS` is the one table of them: each key (Kafka's topic config name) with the broker
setting it overrides (a ``[log]`` or ``[broker]`` field of ``lumber.toml``), Kafka's name for that broker
setting (its *synonym*, ``log.segment.bytes`` for ``segment.bytes``), Kafka's config type and what values it
takes. The bounds are the broker setting's own (the ``ge``/``le`` of its field in :mod:`broker.config`),
so a topic cannot set what ``lumber.toml`` could not.

Every writer checks a topic's configs with :func:`check_topic_configs` (:meth:`TopicAdmin.create_topic
<broker.cluster.topic_admin.TopicAdmin.create_topic>`, so CreateTopics, ``lumber topics create`` and the dev
stack alike, and :class:`~broker.cluster.topic_config_store.TopicConfigStore`, so AlterConfigs,
IncrementalAlterConfigs and ``lumber topics alter-config``); any other key, or a value a key does not take,
is an :class:`~broker.cluster.errors.InvalidTopicConfigError` naming the topic, the key, the value and what
it takes. The readers: :func:`topic_log_config` gives a topic's effective ``[log]`` config (the broker's
``[log]`` section with the topic's overrides), which the replica manager gives every log of the topic;
:func:`min_insync_replicas` and :func:`unclean_leader_election` the two ``[broker]`` ones (the replica
manager's acks=all check, the controller's unclean election). Pure functions over immutable tables:
thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from annotated_types import Ge, Le

from broker.cluster import zk_paths
from broker.cluster.errors import InvalidTopicConfigError
from broker.config import BrokerConfig, LogConfig
from broker.record.compression import LEVELS, CompressionLevels, CompressionType

logger = logging.getLogger(__name__)

#: Kafka's config types (``ConfigDef.Type``), as DescribeConfigs v3+ numbers them.
ConfigType = Literal["BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST"]
#: The largest value of an INT config.
INT32_MAX = 2**31 - 1
#: The ``cleanup.policy`` list's members.
CLEANUP_POLICIES = ("compact", "delete")
#: The codec level keys and the levels each takes (Kafka's ranges: gzip's -1 is outside its 1 to 9).
CODEC_LEVELS: Mapping[str, CompressionLevels] = {
    zk_paths.COMPRESSION_GZIP_LEVEL: LEVELS[CompressionType.GZIP],
    zk_paths.COMPRESSION_LZ4_LEVEL: LEVELS[CompressionType.LZ4],
    zk_paths.COMPRESSION_ZSTD_LEVEL: LEVELS[CompressionType.ZSTD],
}


@dataclass(frozen=True)
class TopicConfigKey:
    """One topic config: its Kafka name, the broker setting it overrides, and its type."""

    #: Kafka's topic config name, the key in ``/config/topics/<topic>``
    name: str
    #: the ``lumber.toml`` section whose field it overrides
    section: Literal["log", "broker"]
    #: the field of :class:`~broker.config.LogConfig` or :class:`~broker.config.BrokerConfig`
    field: str
    #: Kafka's name of the broker setting (DescribeConfigs' synonym, and the key of a BROKER resource)
    broker_name: str
    #: Kafka's config type
    type: ConfigType

    @property
    def is_list(self) -> bool:
        return self.type == "LIST"

    def bounds(self) -> tuple[float | None, float | None]:
        """``(ge, le)`` of the broker field (None: unbounded)."""
        info = _section(self.section).model_fields[self.field]
        low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
        high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
        if high is None and self.type == "INT":
            high = INT32_MAX  # Kafka's INT is an int32
        return low, high  # type: ignore[return-value]

    def choices(self) -> tuple[str, ...]:
        """The values a STRING key takes: the broker field's ``Literal`` members, Kafka's spelling."""
        return tuple(get_args(_section(self.section).model_fields[self.field].annotation))

    def description(self) -> str:
        """The broker field's documentation (DescribeConfigs' documentation, v3+)."""
        return _section(self.section).model_fields[self.field].description or ""

    def takes(self, replication_factor: int | None = None) -> str:
        """What the key's value must be, in words."""
        if self.name == zk_paths.MIN_INSYNC_REPLICAS:
            return "an integer from 1 to the replication factor" + (
                f" {replication_factor}" if replication_factor is not None else ""
            )
        if self.type == "BOOLEAN":
            return "true or false"
        if self.name in CODEC_LEVELS:
            return CODEC_LEVELS[self.name].describe()
        if self.type == "LIST":
            return "compact, delete, or both separated by a comma"
        if self.type == "STRING":
            return " or ".join(self.choices())
        low, high = self.bounds()
        if self.type == "DOUBLE":
            return "a number from 0 to 1"
        if high is None:
            return f"an integer of at least {int(low)}" if low is not None else "an integer"
        return f"an integer from {int(low or 0)} to {int(high)}"


def _section(section: str) -> type[LogConfig] | type[BrokerConfig]:
    return LogConfig if section == "log" else BrokerConfig


#: Every topic config Lumber reads, by name: the one key <-> field table.
TOPIC_CONFIG_KEYS: Mapping[str, TopicConfigKey] = {
    key.name: key
    for key in (
        TopicConfigKey(zk_paths.CLEANUP_POLICY, "log", "cleanup_policy", "log.cleanup.policy", "LIST"),
        TopicConfigKey(
            zk_paths.COMPRESSION_GZIP_LEVEL, "log", "compression_gzip_level", "compression.gzip.level", "INT"
        ),
        TopicConfigKey(
            zk_paths.COMPRESSION_LZ4_LEVEL, "log", "compression_lz4_level", "compression.lz4.level", "INT"
        ),
        TopicConfigKey(zk_paths.COMPRESSION_TYPE, "log", "compression_type", "compression.type", "STRING"),
        TopicConfigKey(
            zk_paths.COMPRESSION_ZSTD_LEVEL, "log", "compression_zstd_level", "compression.zstd.level", "INT"
        ),
        TopicConfigKey(
            zk_paths.DELETE_RETENTION_MS,
            "log",
            "delete_retention_ms",
            "log.cleaner.delete.retention.ms",
            "LONG",
        ),
        TopicConfigKey(zk_paths.MAX_MESSAGE_BYTES, "log", "max_message_bytes", "message.max.bytes", "INT"),
        TopicConfigKey(
            zk_paths.MESSAGE_TIMESTAMP_TYPE,
            "log",
            "message_timestamp_type",
            "log.message.timestamp.type",
            "STRING",
        ),
        TopicConfigKey(
            zk_paths.MIN_CLEANABLE_DIRTY_RATIO,
            "log",
            "min_cleanable_dirty_ratio",
            "log.cleaner.min.cleanable.ratio",
            "DOUBLE",
        ),
        TopicConfigKey(
            zk_paths.MIN_COMPACTION_LAG_MS,
            "log",
            "min_compaction_lag_ms",
            "log.cleaner.min.compaction.lag.ms",
            "LONG",
        ),
        TopicConfigKey(
            zk_paths.MIN_INSYNC_REPLICAS, "broker", "min_insync_replicas", "min.insync.replicas", "INT"
        ),
        TopicConfigKey(zk_paths.RETENTION_BYTES, "log", "retention_bytes", "log.retention.bytes", "LONG"),
        TopicConfigKey(zk_paths.RETENTION_MS, "log", "retention_ms", "log.retention.ms", "LONG"),
        TopicConfigKey(zk_paths.SEGMENT_BYTES, "log", "segment_bytes", "log.segment.bytes", "INT"),
        TopicConfigKey(zk_paths.SEGMENT_MS, "log", "segment_ms", "log.roll.ms", "LONG"),
        TopicConfigKey(
            zk_paths.UNCLEAN_LEADER_ELECTION_ENABLE,
            "broker",
            "unclean_leader_election",
            "unclean.leader.election.enable",
            "BOOLEAN",
        ),
    )
}

#: Each key with what its value must be (``lumber topics create --help``).
TOPIC_CONFIGS: Mapping[str, str] = {name: key.takes() for name, key in TOPIC_CONFIG_KEYS.items()}


def check_topic_configs(
    topic: str, configs: Mapping[str, str | None], replication_factor: int
) -> dict[str, str]:
    """``configs`` in their stored form (trimmed, lower-case booleans and policies, plain numbers), each
    key one of :data:`TOPIC_CONFIG_KEYS` with a value it takes; InvalidTopicConfigError naming the topic,
    key and value, and what the key takes."""
    checked: dict[str, str] = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            raise InvalidTopicConfigError(
                f"topic {topic!r}: Lumber does not read the topic config {name!r} (accepted: "
                f"{', '.join(TOPIC_CONFIG_KEYS)}); set the others in lumber.toml"
            )
        checked[name] = _stored_value(topic, key, raw, replication_factor)
    return checked


def _stored_value(topic: str, key: TopicConfigKey, raw: str | None, replication_factor: int) -> str:
    value = (raw or "").strip()

    def refuse(why: str = "") -> InvalidTopicConfigError:
        return InvalidTopicConfigError(
            f"topic {topic!r}: {key.name}={raw!r}: expected {key.takes(replication_factor)}{why}"
        )

    if key.type == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise refuse()
        return value.lower()
    if key.type == "LIST":
        members = [m.strip().lower() for m in value.split(",")]
        if not value or any(m not in CLEANUP_POLICIES for m in members):
            raise refuse()
        return ",".join(p for p in CLEANUP_POLICIES if p in members)
    if key.type == "STRING":
        if value not in key.choices():
            raise refuse()
        return value
    if key.type == "DOUBLE":
        try:
            number = float(value)
        except ValueError:
            raise refuse() from None
        if not 0.0 <= number <= 1.0:
            raise refuse()
        return repr(number)
    try:
        integer = int(value)
    except ValueError:
        raise refuse() from None
    low, high = key.bounds()
    if key.name == zk_paths.MIN_INSYNC_REPLICAS and not 1 <= integer <= replication_factor:
        raise InvalidTopicConfigError(
            f"topic {topic!r}: {key.name}={raw!r}: with replication factor {replication_factor} it must "
            f"be an integer from 1 to {replication_factor} (a larger one would refuse every acks=all write)"
        )
    if (low is not None and integer < low) or (high is not None and integer > high):
        raise refuse()
    if key.name in CODEC_LEVELS and not CODEC_LEVELS[key.name].takes(integer):
        raise refuse()
    return str(integer)


def parsed_value(key: TopicConfigKey, value: str) -> Any:
    """A stored value as the broker field's type (``"1048576"`` -> 1048576); ValueError if it is not one."""
    if key.type == "BOOLEAN":
        if value not in ("true", "false"):
            raise ValueError(f"{value!r} is not true or false")
        return value == "true"
    if key.type == "LIST":
        if value not in ("delete", "compact", "compact,delete"):
            raise ValueError(f"{value!r} is not a cleanup policy")
        return value
    if key.type == "STRING":
        if value not in key.choices():
            raise ValueError(f"{value!r} is not one of {', '.join(key.choices())}")
        return value
    if key.type == "DOUBLE":
        number = float(value)
        if not 0.0 <= number <= 1.0:
            raise ValueError(f"{value!r} is not from 0 to 1")
        return number
    integer = int(value)
    low, high = key.bounds()
    if (low is not None and integer < low) or (high is not None and integer > high):
        raise ValueError(f"{value!r} is out of bounds")
    if key.name in CODEC_LEVELS and not CODEC_LEVELS[key.name].takes(integer):
        raise ValueError(f"{value!r} is not {CODEC_LEVELS[key.name].describe()}")
    return integer


def topic_log_config(topic: str, base: LogConfig, configs: Mapping[str, str]) -> LogConfig:
    """The topic's effective ``[log]`` config: ``base`` (the broker's ``[log]`` section) with the topic's
    overrides. A stored value that does not parse (a node written by hand) is skipped with a warning naming
    the topic, key and value: the broker's own setting stands."""
    update: dict[str, Any] = {}
    for name, value in configs.items():
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None or key.section != "log":
            continue
        try:
            update[key.field] = parsed_value(key, value)
        except ValueError as exc:
            logger.warning(
                "topic %r: ignoring the stored config %s=%r (%s); the broker's [log] %s stands",
                topic,
                name,
                value,
                exc,
                key.field,
            )
    return base.model_copy(update=update) if update else base


def broker_value(key: TopicConfigKey, log: LogConfig, broker: BrokerConfig) -> str:
    """The broker's own setting for ``key`` (what a topic without an override has), as a config string."""
    value = getattr(log if key.section == "log" else broker, key.field)
    return config_string(value)


def config_string(value: object) -> str:
    """A setting as Kafka writes config values: lower-case booleans, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def min_insync_replicas(configs: Mapping[str, str], default: int) -> int:
    """The topic's ``min.insync.replicas``, else ``default`` (the broker's)."""
    value = configs.get(zk_paths.MIN_INSYNC_REPLICAS)
    return int(value) if value is not None and value.isdigit() and int(value) >= 1 else default


def unclean_leader_election(configs: Mapping[str, str], default: bool) -> bool:
    """The topic's ``unclean.leader.election.enable``, else ``default`` (the broker's)."""
    value = configs.get(zk_paths.UNCLEAN_LEADER_ELECTION_ENABLE)
    return default if value is None else value.strip().lower() == "true"
