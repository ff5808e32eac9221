from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from lumber.config import config_from_mapping, dump_config, render_defaults
from pipeline.errors import ConfigError
from schemas.client import SchemaRegistryClient
from schemas.errors import RegistryCredentialsError
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


SECRET = "Reg-S3cret-0f9e8d-never-shown"


def test_the_clients_password_from_the_file_a_file_or_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "reader.password"
    path.write_text(SECRET + "\nsecond line ignored\n")
    monkeypatch.setenv("READER_PASSWORD", SECRET)
    ways: list[dict[str, object]] = [
        {"basic_auth_password": SECRET},
        {"basic_auth_password_file": str(path)},
        {"basic_auth_password_env": "READER_PASSWORD"},
    ]
    for way in ways:
        config = config_from_mapping(
            {
                "registry": {
                    "url": "https://r:8081",
                    "basic_auth_username": "reader",
                    "ssl_cafile": "/ca.pem",
                    **way,
                }
            }
        )
        assert config.registry.basic_auth() == ("reader", SECRET)
        client = SchemaRegistryClient.from_config(config.registry)
        assert repr(client) == "SchemaRegistryClient('https://r:8081', as 'reader')"
        assert (client.url, client.timeout_s, client.subject_cache_ttl_s) == ("https://r:8081", 10.0, 60.0)
        # what a Spark task gets: the password held, its file and variable left out, through a pickle
        held = pickle.loads(pickle.dumps(config.registry.with_secrets_read()))
        assert (held.basic_auth_password_file, held.basic_auth_password_env) == ("", "")
        assert held.basic_auth() == ("reader", SECRET)
        assert SECRET not in repr(held) + repr(config.registry) + dump_config(config, mask_secrets=True)
    overridden = SchemaRegistryClient.from_config(
        config.registry, "https://other:8081", timeout_s=2.5, subject_cache_ttl_s=0.0
    )
    assert (overridden.url, overridden.timeout_s, overridden.subject_cache_ttl_s) == (
        "https://other:8081",
        2.5,
        0.0,
    )
    assert SchemaRegistryClient.from_config(RegistryConfig()).__getstate__()["_basic_auth"] is None


def test_the_clients_password_errors_name_the_key_and_the_source_never_the_value(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    missing = "registry.basic_auth_password_file: cannot read '/nowhere/pass': No such file or directory"
    blank = f"registry.basic_auth_password_file: the first line of '{empty}' is empty"
    unset = "registry.basic_auth_password_env: the environment variable NOT_SET_ANYWHERE is not set or empty"
    for settings, message in (
        ({"basic_auth_password_file": "/nowhere/pass"}, missing),
        ({"basic_auth_password_file": str(empty)}, blank),
        ({"basic_auth_password_env": "NOT_SET_ANYWHERE"}, unset),
    ):
        config = RegistryConfig(basic_auth_username="reader", **settings)  # type: ignore[arg-type]
        with pytest.raises(RegistryCredentialsError) as caught:
            SchemaRegistryClient.from_config(config)
        assert str(caught.value) == message
    for table, message in (
        (
            {"basic_auth_username": "r", "basic_auth_password": SECRET, "basic_auth_password_env": "X"},
            "give at most one of basic_auth_password, basic_auth_password_env",
        ),
        ({"basic_auth_password_file": "/p"}, "basic_auth_password_file needs basic_auth_username"),
    ):
        with pytest.raises(ConfigError, match=message) as refused:
            config_from_mapping({"registry": table})
        assert SECRET not in str(refused.value)
