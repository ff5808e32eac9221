"""The topic config table (broker/cluster/topic_config.py): what each key takes, its stored form, and a
topic's effective [log] config. Pure functions: no ZooKeeper."""

from __future__ import annotations

import logging

import pytest

from broker.cluster.errors import InvalidTopicConfigError
from broker.cluster.topic_config import TOPIC_CONFIG_KEYS, check_topic_configs, topic_log_config
from broker.config import BrokerConfig, LogConfig


def test_every_key_overrides_a_real_setting_with_its_bounds() -> None:
    assert sorted(TOPIC_CONFIG_KEYS) == [
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
        "unclean.leader.election.enable",
    ]
    for key in TOPIC_CONFIG_KEYS.values():
        section = LogConfig if key.section == "log" else BrokerConfig
        assert key.field in section.model_fields, key
    assert TOPIC_CONFIG_KEYS["segment.bytes"].bounds() == (128, 2**31 - 1)
    assert TOPIC_CONFIG_KEYS["max.message.bytes"].bounds() == (61, 2**31 - 1)  # INT: an int32
    assert TOPIC_CONFIG_KEYS["retention.ms"].bounds() == (-1, None)


def test_values_are_stored_in_their_checked_form() -> None:
    assert check_topic_configs(
        "t",
        {
            "cleanup.policy": " Delete , compact",
            "min.cleanable.dirty.ratio": "1",
            "segment.bytes": " 128 ",
            "retention.ms": "-1",
            "unclean.leader.election.enable": "TRUE",
            "min.insync.replicas": "03",
        },
        3,
    ) == {
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "1.0",
        "segment.bytes": "128",
        "retention.ms": "-1",
        "unclean.leader.election.enable": "true",
        "min.insync.replicas": "3",
    }


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "segment.bytes",
            "127",
            "topic 't': segment.bytes='127': expected an integer from 128 to 2147483647",
        ),
        ("segment.bytes", "2147483648", "expected an integer from 128 to 2147483647"),
        (
            "segment.bytes",
            "1e6",
            "topic 't': segment.bytes='1e6': expected an integer from 128 to 2147483647",
        ),
        ("max.message.bytes", "60", "topic 't': max.message.bytes='60': expected an integer from 61 to"),
        ("retention.ms", "-2", "topic 't': retention.ms='-2': expected an integer of at least -1"),
        ("segment.ms", "0", "topic 't': segment.ms='0': expected an integer of at least 1"),
        ("delete.retention.ms", "", "topic 't': delete.retention.ms='': expected an integer of at least 0"),
        (
            "min.cleanable.dirty.ratio",
            "1.5",
            "min.cleanable.dirty.ratio='1.5': expected a number from 0 to 1",
        ),
        (
            "min.cleanable.dirty.ratio",
            "nan",
            "min.cleanable.dirty.ratio='nan': expected a number from 0 to 1",
        ),
        ("cleanup.policy", "", "cleanup.policy='': expected compact, delete, or both separated by a comma"),
        ("cleanup.policy", "compact,,delete", "expected compact, delete, or both separated by a comma"),
        ("unclean.leader.election.enable", "1", "unclean.leader.election.enable='1': expected true or false"),
        ("min.insync.replicas", "0", "min.insync.replicas='0': with replication factor 3 it must be"),
        ("compression.type", "brotli", "compression.type='brotli': expected producer or uncompressed or "),
        ("preallocate", "true", "topic 't': Lumber does not read the topic config 'preallocate'"),
    ],
)
def test_a_bad_value_names_topic_key_value_and_what_it_takes(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidTopicConfigError) as refused:
        check_topic_configs("t", {key: value}, 3)
    assert message in str(refused.value)


def test_a_topics_log_config_is_the_brokers_with_its_overrides(caplog: pytest.LogCaptureFixture) -> None:
    base = LogConfig(segment_bytes=4096, retention_ms=1000)
    assert topic_log_config("t", base, {}) is base
    assert topic_log_config("t", base, {"min.insync.replicas": "2"}) is base  # a [broker] key
    config = topic_log_config(
        "t",
        base,
        {"cleanup.policy": "compact,delete", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.1"},
    )
    assert (config.cleanup_policy, config.segment_bytes, config.min_cleanable_dirty_ratio) == (
        "compact,delete",
        1048576,
        0.1,
    )
    assert config.retention_ms == 1000  # the broker's
    assert config.log_dirs == base.log_dirs
    with caplog.at_level(logging.WARNING):
        written_by_hand = topic_log_config("t", base, {"segment.bytes": "12", "retention.ms": "5"})
    assert (written_by_hand.segment_bytes, written_by_hand.retention_ms) == (4096, 5)
    assert "topic 't': ignoring the stored config segment.bytes='12'" in caplog.text
