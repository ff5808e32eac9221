from __future__ import annotations

import pytest

from lumber.config import config_from_mapping, render_defaults
from pipeline.errors import ConfigError
from schemas.registry.config import RegistryConfig


def test_defaults() -> None:
    config = config_from_mapping({}).registry
    assert config == RegistryConfig()
    assert (config.host, config.port, config.url) == ("127.0.0.1", 8081, "http://127.0.0.1:8081")
    assert config.zookeeper_path == "/schema_registry"
    assert config.default_compatibility == "BACKWARD"
    assert "[registry]" in render_defaults()
    assert 'default_compatibility = "BACKWARD"' in render_defaults()


def test_file_and_environment() -> None:
    config = config_from_mapping(
        {"registry": {"port": 9999, "default_compatibility": "FULL"}},
        env={"LUMBER_REGISTRY__ZOOKEEPER_PATH": "/lumber/registry"},
    ).registry
    assert (config.port, config.default_compatibility, config.zookeeper_path) == (
        9999,
        "FULL",
        "/lumber/registry",
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"port": 0}, "key 'registry.port' must be at least 1, got 0"),
        (
            {"default_compatibility": "LOOSE"},
            "key 'registry.default_compatibility' must be one of 'BACKWARD'",
        ),
        ({"zookeeper_path": "schema_registry"}, "zookeeper_path must be an absolute ZooKeeper path"),
        ({"zookeeper_path": "/"}, "zookeeper_path must be an absolute ZooKeeper path"),
        ({"url": "127.0.0.1:8081"}, "url must start with http:// or https://"),
        ({"max_schema_bytes": 2_000_000}, "key 'registry.max_schema_bytes' must be at most 1000000"),
    ],
)
def test_bad_values(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        config_from_mapping({"registry": table}, where="lumber.toml")
