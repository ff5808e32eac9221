"""The numbers DescribeConfigs, AlterConfigs and IncrementalAlterConfigs share, with Kafka's names and values
(``ConfigResource.Type``, ``DescribeConfigsResponse.ConfigSource`` and ``ConfigType``, ``AlterConfigOp``)."""

from __future__ import annotations

from enum import IntEnum


class ConfigResourceType(IntEnum):
    """What a config resource is: Lumber answers TOPIC and BROKER."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a config's value comes from (DescribeConfigs v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1  # Kafka's DYNAMIC_TOPIC_CONFIG: the topic's override
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4  # the broker's config file (lumber.toml)
    DEFAULT_CONFIG = 5  # the built-in default
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """A config's data type (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(IntEnum):
    """An IncrementalAlterConfigs operation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
