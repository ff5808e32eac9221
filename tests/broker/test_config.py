from __future__ import annotations

import pytest

from broker.config import LogConfig
from lumber.config import config_from_mapping, render_defaults
from pipeline.errors import ConfigError


def test_defaults() -> None:
    config = LogConfig()
    assert config.log_dirs == [".lumber/logs"]
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.index_interval_bytes == 4096
    assert (config.flush_messages, config.flush_ms) == (10_000, 1000)
    assert config.expose == "appended"
    assert (config.retention_ms, config.retention_bytes) == (7 * 24 * 3600 * 1000, -1)
    assert config.max_message_bytes == 1024 * 1024 + 12


def test_every_key_is_documented() -> None:
    for name, info in LogConfig.model_fields.items():
        assert info.description, name
    text = render_defaults()
    assert "[log]" in text
    assert 'expose = "appended"' in text


def test_read_from_the_lumber_config() -> None:
    config = config_from_mapping(
        {"log": {"log_dirs": ["/data/a", "/data/b"], "expose": "appended", "segment_bytes": 4096}},
        env={"LUMBER_LOG__FLUSH_MS": "250"},
    )
    assert config.log == LogConfig(
        log_dirs=["/data/a", "/data/b"], expose="appended", segment_bytes=4096, flush_ms=250
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"expose": "sometimes"}, "'log.expose' must be one of 'flushed', 'appended'"),
        ({"log_dirs": []}, "log_dirs must name at least one folder"),
        ({"log_dirs": ["/a", "/a"]}, "names a folder twice"),
        ({"segment_bytes": 10}, "'log.segment_bytes' must be at least 128"),
        ({"retention_ms": -2}, "'log.retention_ms' must be at least -1"),
    ],
)
def test_bad_values_are_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_mapping({"log": table})
