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
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
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
    assert TOPIC_CONFIG_KEYS["compression.zstd.level"].bounds() == (-131072, 22)
    assert TOPIC_CONFIG_KEYS["compression.gzip.level"].broker_name == "compression.gzip.level"


def test_codec_levels_take_kafkas_ranges() -> None:
    """Kafka's CompressionType: gzip 1 to 9 or -1 (the default), lz4 1 to 17, zstd -131072 to 22; stored
    as plain integers."""
    assert check_topic_configs(
        "t",
        {
            "compression.gzip.level": " -1 ",
            "compression.lz4.level": "017",
            "compression.zstd.level": "-131072",
        },
        1,
    ) == {"compression.gzip.level": "-1", "compression.lz4.level": "17", "compression.zstd.level": "-131072"}
    for key, value in (("compression.gzip.level", "1"), ("compression.gzip.level", "9")):
        assert check_topic_configs("t", {key: value}, 1) == {key: value}
    config = topic_log_config(
        "t",
        LogConfig(),
        {"compression.type": "zstd", "compression.zstd.level": "19", "compression.gzip.level": "1"},
    )
    assert (config.compression_level, config.compression_gzip_level, config.compression_lz4_level) == (
        19,
        1,
        9,
    )
    assert LogConfig(compression_type="gzip").compression_level == -1
    assert LogConfig(compression_type="snappy").compression_level is None
    assert LogConfig().compression_level is None  # producer: each batch keeps its own
    with pytest.raises(ValueError, match=r"log.compression_gzip_level must be from 1 to 9, or -1 .*not 0"):
        LogConfig(compression_gzip_level=0)
    with pytest.raises(ValueError, match="compression_lz4_level"):
        LogConfig(compression_lz4_level=18)


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
        (
            "compression.gzip.level",
            "0",
            "topic 't': compression.gzip.level='0': expected an integer from 1 to 9, or -1",
        ),
        (
            "compression.gzip.level",
            "10",
            "compression.gzip.level='10': expected an integer from 1 to 9, or -1",
        ),
        (
            "compression.gzip.level",
            "-2",
            "compression.gzip.level='-2': expected an integer from 1 to 9, or -1",
        ),
        ("compression.lz4.level", "0", "compression.lz4.level='0': expected an integer from 1 to 17"),
        ("compression.lz4.level", "18", "compression.lz4.level='18': expected an integer from 1 to 17"),
        (
            "compression.zstd.level",
            "23",
            "compression.zstd.level='23': expected an integer from -131072 to 22",
        ),
        (
            "compression.zstd.level",
            "-131073",
            "compression.zstd.level='-131073': expected an integer from -131072 to 22",
        ),
        ("compression.zstd.level", "fast", "compression.zstd.level='fast': expected an integer from -131072"),
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
