from __future__ import annotations

import pytest

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import ClientConfigError
from broker.client.producer.producer_config import ProducerConfig
from lumber.config import config_from_mapping
from pipeline.errors import ConfigError


def test_defaults_and_acks_value() -> None:
    assert ProducerConfig().acks_value == -1  # Kafka's defaults: acks=all, idempotent
    assert ProducerConfig().enable_idempotence
    assert ProducerConfig(acks="1", enable_idempotence=False).acks_value == 1
    assert ProducerConfig(acks="all").acks_value == -1
    assert ProducerConfig(acks="0", enable_idempotence=False).acks_value == 0
    assert ConsumerConfig().auto_offset_reset == "latest"


def test_idempotence_refuses_settings_it_cannot_keep() -> None:
    with pytest.raises(
        ClientConfigError,
        match=r"enable_idempotence = true needs acks = 'all', got acks = '1'; set enable_idempotence = false",
    ):
        ProducerConfig(acks="1")
    with pytest.raises(
        ClientConfigError,
        match=r"allows at most 5 max_in_flight_requests_per_connection, got 6",
    ):
        ProducerConfig(max_in_flight_requests_per_connection=6)
    assert ProducerConfig(max_in_flight_requests_per_connection=6, enable_idempotence=False).acks == "all"
    with pytest.raises(ConfigError, match=r"needs acks = 'all', got acks = '0'"):
        config_from_mapping({"producer": {"acks": "0"}})


def test_limits_hold_for_sections_built_in_python() -> None:
    with pytest.raises(ClientConfigError, match=r"ProducerConfig.linger_ms must be at least 0, got -1"):
        ProducerConfig(linger_ms=-1)
    with pytest.raises(
        ClientConfigError, match=r"ProducerConfig.acks must be one of '0', '1', 'all', got '2'"
    ):
        ProducerConfig(acks="2")  # type: ignore[arg-type]
    with pytest.raises(ClientConfigError, match=r"'localhost' is not host:port"):
        ConsumerConfig(bootstrap_servers=["localhost"])
    with pytest.raises(
        ClientConfigError, match=r"request_timeout_ms \(500\) must exceed .*fetch_max_wait_ms \(500\)"
    ):
        ConsumerConfig(request_timeout_ms=500, fetch_max_wait_ms=500)


def test_sections_load_from_toml_tables() -> None:
    config = config_from_mapping(
        {
            "producer": {"acks": "all", "compression_type": "zstd", "bootstrap_servers": ["127.0.0.1:9092"]},
            "consumer": {"auto_offset_reset": "earliest", "max_prefetch_bytes": 1024},
        }
    )
    assert (config.producer.acks, config.producer.compression_type) == ("all", "zstd")
    assert config.producer.bootstrap_servers == ["127.0.0.1:9092"]
    assert (config.consumer.auto_offset_reset, config.consumer.max_prefetch_bytes) == ("earliest", 1024)
    with pytest.raises(ConfigError, match=r"key 'producer.compression_type' must be one of"):
        config_from_mapping({"producer": {"compression_type": "brotli"}})
    with pytest.raises(ConfigError, match=r"section \[consumer\]: consumer.request_timeout_ms"):
        config_from_mapping({"consumer": {"request_timeout_ms": 100}})


def test_producer_codec_levels_take_kafkas_ranges() -> None:
    """compression.gzip.level, compression.lz4.level, compression.zstd.level (KIP-390, Java producer 3.8+):
    [producer] compression_gzip_level and so on, with Kafka's defaults and ranges."""
    config = config_from_mapping({"producer": {"compression_type": "zstd", "compression_zstd_level": 19}})
    assert (config.producer.compression_level, config.producer.compression_gzip_level) == (19, -1)
    assert ProducerConfig().compression_level is None  # none
    assert ProducerConfig(compression_type="lz4").compression_level == 9
    assert ProducerConfig(compression_type="snappy").compression_level is None
    with pytest.raises(ClientConfigError, match=r"compression_gzip_level must be from 1 to 9, or -1 .*not 0"):
        ProducerConfig(compression_gzip_level=0)
    with pytest.raises(ConfigError, match=r"key 'producer.compression_zstd_level'"):
        config_from_mapping({"producer": {"compression_zstd_level": 23}})
    with pytest.raises(ConfigError, match=r"key 'producer.compression_lz4_level'"):
        config_from_mapping({"producer": {"compression_lz4_level": 0}})
