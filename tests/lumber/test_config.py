from __future__ import annotations

from pathlib import Path

import pytest

from lumber.config import LumberConfig, config_from_mapping, dump_config, load_config, render_defaults
from pipeline.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(text)
    return path


def test_defaults_when_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config == LumberConfig()
    assert config.zookeeper.connect == "127.0.0.1:2181"
    assert config.zookeeper.session_timeout_ms == 10_000
    assert config.dev.zookeeper_port == 2181
    assert config.source == "<defaults>"


def test_file_values_and_env_override(tmp_path: Path) -> None:
    path = write(tmp_path, '[zookeeper]\nconnect = "zk1:2181/lumber"\n\n[dev]\nzookeeper_port = 2999\n')
    config = load_config(
        path, env={"LUMBER_DEV__ZOOKEEPER_PORT": "3001", "LUMBER_ZOOKEEPER__CONNECT": "a:1,b:2/x"}
    )
    assert config.zookeeper.connect == "a:1,b:2/x"
    assert config.dev.zookeeper_port == 3001
    assert config.source == str(path)


def test_env_selects_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[dev]\nstate_dir = '/tmp/elsewhere'\n")
    assert load_config(env={"LUMBER_CONFIG": str(path)}).dev.state_dir == "/tmp/elsewhere"


def test_local_lumber_toml_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "[zookeeper]\nsession_timeout_ms = 4000\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).zookeeper.session_timeout_ms == 4000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[zookeeper]\nconect = 'x'\n", "unknown key 'zookeeper.conect'"),
        ("[zookeper]\nconnect = 'x'\n", "unknown section [zookeper]"),
        ("[dev]\nzookeeper_port = 'high'\n", "key 'dev.zookeeper_port' must be an integer, got 'high'"),
        ("[dev]\nzookeeper_port = 70000\n", "key 'dev.zookeeper_port' must be at most 65535, got 70000"),
        ("[dev]\nzookeeper_port = 0\n", "key 'dev.zookeeper_port' must be at least 1, got 0"),
        ("[dev]\nzookeeper_port = true\n", "key 'dev.zookeeper_port' must be an integer, got True"),
        ("[zookeeper]\nconnect = 5\n", "key 'zookeeper.connect' must be a string, got 5"),
        ("zookeeper = 3\n", "[zookeeper] must be a table, got 3"),
        ("[dev\n", "not valid TOML"),
    ],
)
def test_bad_file_names_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, env={})
    assert str(excinfo.value).startswith(f"{path}: ")
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"LUMBER_DEV__ZOOKEEPER_PORT": "abc"},
            "environment variable LUMBER_DEV__ZOOKEEPER_PORT: cannot read 'abc'",
        ),
        (
            {"LUMBER_DEV__ZOOKEEPER_PORT": "0"},
            "LUMBER_DEV__ZOOKEEPER_PORT: key 'dev.zookeeper_port' must be at least 1",
        ),
        ({"LUMBER_DEV__NOPE": "1"}, "environment variable LUMBER_DEV__NOPE: unknown key 'dev.nope'"),
        ({"LUMBER_NOPE__X": "1"}, "environment variable LUMBER_NOPE__X: unknown section [nope]"),
    ],
)
def test_bad_env_names_variable_and_key(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        config_from_mapping({}, env=env)
    assert message in str(excinfo.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml", env={})


def test_unrelated_env_is_ignored() -> None:
    assert (
        config_from_mapping({}, env={"LUMBER_CONFIGX": "1", "LUMBERJACK": "2", "PATH": "/bin"})
        == LumberConfig()
    )


def test_dump_reads_back_equal(tmp_path: Path) -> None:
    config = config_from_mapping({"zookeeper": {"connect": 'h:1/"q"'}, "dev": {"zookeeper_heap_mb": 128}})
    path = write(tmp_path, dump_config(config))
    assert load_config(path, env={}) == config


def test_rendered_defaults_are_valid_and_documented(tmp_path: Path) -> None:
    text = render_defaults()
    assert "# ZooKeeper connect string" in text
    assert load_config(write(tmp_path, text), env={}) == LumberConfig()
