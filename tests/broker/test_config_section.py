"""broker/config_section.py: one validation for every section, in Python and through the loader."""

from __future__ import annotations

import logging

import pytest

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import ClientConfigError
from broker.client.producer.producer_config import ProducerConfig
from broker.config import BrokerConfig, LogConfig
from lumber.config import config_from_mapping
from mirror.mirror_config import MirrorConfig
from mirror.mirror_errors import MirrorConfigError
from pipeline.errors import ConfigError


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"log": {"segment_bytes": 10}}, "f.toml: key 'log.segment_bytes' must be at least 128, got 10"),
        ({"broker": {"port": 65536}}, "f.toml: key 'broker.port' must be at most 65535, got 65536"),
        (
            {"log": {"expose": "never"}},
            "f.toml: key 'log.expose' must be one of 'flushed', 'appended', got 'never'",
        ),
        (
            {"log": {"log_dirs": "/data"}},
            "f.toml: key 'log.log_dirs' must be an array of a string, got '/data'",
        ),
        ({"log": {"log_dirs": ["/a", 5]}}, "f.toml: key 'log.log_dirs[1]' must be a string, got 5"),
        ({"broker": {"broker_id": "1"}}, "f.toml: key 'broker.broker_id' must be an integer, got '1'"),
        (
            {"broker": {"inline_requests": 1}},
            "f.toml: key 'broker.inline_requests' must be true or false, got 1",
        ),
        ({"log": {"log_dirs": []}}, "f.toml: section [log]: log.log_dirs must name at least one folder"),
        (
            {"log": {"segment_bytes": 10, "flush_ms": 0}},
            (
                "f.toml: key 'log.segment_bytes' must be at least 128, got 10; "
                "key 'log.flush_ms' must be at least 1, got 0"
            ),
        ),
    ],
)
def test_the_loader_words_pydantic_errors_exactly(document: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(document, where="f.toml")
    assert str(caught.value) == message


def test_an_unknown_key_lists_the_section_keys_but_not_the_derived_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"registry": {"uri": "http://x"}}, where="f.toml")
    assert str(caught.value) == (
        "f.toml: unknown key 'registry.uri' (section [registry] has: auth_users_file, basic_auth_password, "
        "basic_auth_password_env, basic_auth_password_file, basic_auth_username, default_compatibility, "
        "host, max_schema_bytes, port, request_timeout_ms, ssl_cafile, ssl_certfile, ssl_keyfile, "
        "subject_cache_ttl_ms, url, zookeeper_path)"
    )
    with pytest.raises(
        ConfigError,
        match=r"section \[producer\] has: acks, allow_auto_topic_creation, audit_interval_ms, batch_size,",
    ):
        config_from_mapping({"producer": {"nope": 1}})


def test_sections_built_in_python_raise_their_package_error() -> None:
    with pytest.raises(ClientConfigError) as client:
        ProducerConfig(linger_ms=-1, batch_size=0)
    assert str(client.value) == (
        "ProducerConfig.batch_size must be at least 1, got 0; "
        "ProducerConfig.linger_ms must be at least 0, got -1"
    )
    with pytest.raises(MirrorConfigError) as mirror:
        MirrorConfig(topics="(")
    assert str(mirror.value).startswith("MirrorConfig.topics: not a regular expression: '(': ")
    with pytest.raises(ValueError, match=r"^LogConfig.flush_ms must be at least 1, got 0$"):
        LogConfig(flush_ms=0)
    with pytest.raises(ValueError, match=r"^BrokerConfig.nope is not a key of the section$"):
        BrokerConfig(nope=1)  # type: ignore[call-arg]


def test_sections_are_frozen_and_replace_validates() -> None:
    log = LogConfig()
    with pytest.raises(ValueError, match="frozen"):
        log.flush_ms = 5  # type: ignore[misc]
    assert log.replace(flush_ms=5).flush_ms == 5
    assert log.flush_ms == 1000
    with pytest.raises(ValueError, match=r"LogConfig.flush_ms must be at least 1, got 0"):
        log.replace(flush_ms=0)


def test_old_offset_reset_names_are_read_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert ConsumerConfig(auto_offset_reset="smallest").auto_offset_reset == "earliest"  # type: ignore[arg-type]
        config = config_from_mapping({"consumer": {"auto_offset_reset": "largest"}})
    assert config.consumer.auto_offset_reset == "latest"
    assert [r.getMessage() for r in caplog.records] == [
        "consumer.auto_offset_reset: 'smallest' is deprecated, use 'earliest' (read as 'earliest')",
        "consumer.auto_offset_reset: 'largest' is deprecated, use 'latest' (read as 'latest')",
    ]
    with pytest.raises(ConfigError, match=r"must be one of 'earliest', 'latest', 'none', got 'oldest'"):
        config_from_mapping({"consumer": {"auto_offset_reset": "oldest"}})
