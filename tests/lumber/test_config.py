from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lumber.config import (
    RENAMED_KEYS,
    LumberConfig,
    config_from_mapping,
    dump_config,
    load_config,
    render_defaults,
)
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


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_old_key_is_read_as_the_new_one_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        tmp_path,
        '[producer]\naudit_topic = "_counts"\naudit_window_ms = 60000\n'
        '[load]\nspark_master = "yarn"\nregistry_url = "http://reg:8081"\n',
    )
    with caplog.at_level(logging.WARNING):
        config = load_config(path, env={})
    assert (config.audit.topic, config.audit.window_ms) == ("_counts", 60_000)
    assert (config.producer.audit_topic, config.producer.audit_window_ms) == ("_counts", 60_000)
    assert config.load.window_ms == 60_000  # one window for every tier
    assert (config.spark.master, config.load.spark_master) == ("yarn", "yarn")
    assert config.registry.url == config.load.registry_url == config.producer.audit_registry_url
    assert config.registry.url == "http://reg:8081"
    assert _warnings(caplog) == [
        (
            f"{path}: [producer] audit_window_ms is deprecated, use [audit] window_ms "
            "(read as [audit] window_ms = 60000)"
        ),
        (
            f"{path}: [producer] audit_topic is deprecated, use [audit] topic "
            "(read as [audit] topic = '_counts')"
        ),
        (
            f"{path}: [load] registry_url is deprecated, use [registry] url (read as [registry] url = "
            "'http://reg:8081')"
        ),
        f"{path}: [load] spark_master is deprecated, use [spark] master (read as [spark] master = 'yarn')",
    ]


def test_the_new_key_wins_when_both_are_set(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, '[producer]\naudit_topic = "_old"\n[audit]\ntopic = "_new"\n')
    with caplog.at_level(logging.WARNING):
        config = load_config(path, env={})
    assert (config.audit.topic, config.producer.audit_topic) == ("_new", "_new")
    assert _warnings(caplog) == [
        (
            f"{path}: [producer] audit_topic is deprecated, use [audit] topic; both are set, "
            "so [audit] topic = '_new' is used and [producer] audit_topic = '_old' ignored"
        )
    ]


def test_two_old_keys_of_one_new_key_the_first_wins(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = config_from_mapping(
            {"producer": {"audit_window_ms": 60_000}, "load": {"window_ms": 120_000}}, where="f.toml"
        )
    assert config.audit.window_ms == 60_000
    assert _warnings(caplog)[-1] == (
        "f.toml: [load] window_ms is deprecated, use [audit] window_ms; both are set, so [producer] "
        "audit_window_ms = 60000 is used and [load] window_ms = 120000 ignored"
    )


def test_an_empty_old_registry_url_meant_inherit(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = config_from_mapping({"load": {"registry_url": ""}}, where="f.toml")
    assert config.load.registry_url == config.registry.url == "http://127.0.0.1:8081"
    assert _warnings(caplog) == [
        "f.toml: [load] registry_url is deprecated and ignored when empty; set [registry] url"
    ]


def test_an_old_environment_variable_is_renamed_too(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = config_from_mapping(
            {"spark": {"master": "local[1]"}}, env={"LUMBER_LOAD__SPARK_MASTER": "yarn"}
        )
    assert config.spark.master == "yarn"  # the environment overrides the file
    assert _warnings(caplog) == [
        (
            "environment variable LUMBER_LOAD__SPARK_MASTER: [load] spark_master is deprecated, "
            "use [spark] master (read as [spark] master = 'yarn')"
        )
    ]
    both = config_from_mapping(
        {}, env={"LUMBER_LOAD__SPARK_MASTER": "yarn", "LUMBER_SPARK__MASTER": "local[3]"}
    )
    assert both.spark.master == "local[3]"


def test_derived_keys_follow_their_key_when_built_in_python() -> None:
    config = LumberConfig()
    changed = config.replace(audit=config.audit.replace(topic="_t", topic_partitions=3))
    assert (changed.producer.audit_topic, changed.producer.audit_topic_partitions) == ("_t", 3)
    assert changed.replace(producer=changed.producer.replace(audit_topic="_x")).producer.audit_topic == "_t"


def test_defaults_list_the_one_keys_and_the_renames_not_the_derived_keys() -> None:
    text = render_defaults()
    assert "[spark]\n" in text
    assert "\naudit_topic = " not in text
    assert "\nspark_master = " not in text
    assert "\nfault_injection = " not in text  # a test hook
    assert "#   [producer] audit_topic -> [audit] topic\n" in text
    assert "#   [load] spark_master -> [spark] master\n" in text
    assert "# Width of the audit windows, for every tier" in text
    assert "(min 1000)" in text


def test_a_saved_config_of_the_old_layout_still_loads(caplog: pytest.LogCaptureFixture) -> None:
    old = {
        "producer": {"audit_topic": "_audit", "audit_window_ms": 600_000, "audit_registry_url": "http://r:1"},
        "load": {"window_ms": 600_000, "registry_url": "", "spark_master": "local[*]", "python": ""},
        "audit": {"window_ms": 0},
        "registry": {"url": "http://r:1"},
    }
    with caplog.at_level(logging.WARNING):
        config = config_from_mapping(old, where="old.toml")
    assert (config.audit.window_ms, config.audit.report_window_ms) == (600_000, 0)
    assert config.producer.audit_registry_url == config.load.registry_url == "http://r:1"
    assert _warnings(caplog)[0] == (
        "old.toml: [audit] window_ms = 0 is read as [audit] report_window_ms = 0 (the width `audit verify` "
        "reports in is now report_window_ms; window_ms is the counting window of every tier)"
    )


def test_every_derived_key_is_a_renamed_key_of_its_one_key() -> None:
    # [mirror] is new: its derived audit keys were never keys of a file, so nothing old is renamed to them;
    # nor was [producer] audit_state_dir (derived from [audit] state_dir since it exists)
    derived = {
        f"{name}.{key}": source
        for name, info in LumberConfig.model_fields.items()
        if name not in ("source", "mirror")
        for key, source in info.annotation.derived_keys().items()  # type: ignore[union-attr]
    }
    assert derived.pop("producer.audit_state_dir") == "audit.state_dir"
    assert derived == RENAMED_KEYS


ZK_PASSWORD = "zk-Secret-in-a-file"


@pytest.mark.parametrize(
    ("zookeeper", "message"),
    [
        (
            "auth_user = 'lumber'",
            "section [zookeeper]: auth_user needs auth_password_file or auth_password_env",
        ),
        ("auth_password_env = 'ZKPW'", "section [zookeeper]: auth_password_env needs auth_user"),
        (
            "auth_user = 'lumber'\nauth_password_env = 'ZKPW'\nauth_password_file = 'f'",
            "give at most one of auth_password_file, auth_password_env",
        ),
        ("auth_user = 'a:b'\nauth_password_env = 'ZKPW'", "auth_user must not contain ':'"),
        ("auth_user = 'lumber'\nauth_password = 'inline'", "unknown key 'zookeeper.auth_password'"),
    ],
)
def test_zookeeper_auth_keys_are_checked(tmp_path: Path, zookeeper: str, message: str) -> None:
    path = write(tmp_path, f"[zookeeper]\n{zookeeper}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, env={})
    assert message in str(excinfo.value)
    assert "inline" not in str(excinfo.value)


def test_zookeeper_auth_from_a_file_or_a_variable_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "zk-password"
    secret.write_text(ZK_PASSWORD + "\nsecond line ignored\n")
    config = load_config(
        write(tmp_path, f"[zookeeper]\nauth_user = 'lumber'\nauth_password_file = '{secret}'\n"), env={}
    )
    auth = config.zookeeper.auth()
    assert auth is not None
    assert (auth.user, auth.password) == ("lumber", ZK_PASSWORD)
    assert auth.auth_data() == [("digest", f"lumber:{ZK_PASSWORD}")]
    for text in (dump_config(config, mask_secrets=True), dump_config(config), repr(config), repr(auth)):
        assert ZK_PASSWORD not in text

    monkeypatch.setenv("LUMBER_TEST_ZKPW", "from-the-env")
    by_env = config.zookeeper.replace(auth_password_file="", auth_password_env="LUMBER_TEST_ZKPW").auth()
    assert by_env is not None
    assert by_env.password == "from-the-env"
    assert LumberConfig().zookeeper.auth() is None


def test_an_unreadable_zookeeper_password_names_the_key_and_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zookeeper = LumberConfig().zookeeper
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as excinfo:
        zookeeper.replace(auth_user="lumber", auth_password_file=str(missing)).auth()
    assert (
        str(excinfo.value)
        == f"zookeeper.auth_password_file: cannot read {str(missing)!r}: No such file or directory"
    )
    empty = tmp_path / "empty"
    empty.write_text("\n" + ZK_PASSWORD)
    with pytest.raises(ConfigError, match=r"the first line of .* is empty") as excinfo:
        zookeeper.replace(auth_user="lumber", auth_password_file=str(empty)).auth()
    assert ZK_PASSWORD not in str(excinfo.value)
    monkeypatch.delenv("LUMBER_TEST_ZKPW_UNSET", raising=False)
    with pytest.raises(ConfigError) as excinfo:
        zookeeper.replace(auth_user="lumber", auth_password_env="LUMBER_TEST_ZKPW_UNSET").auth()
    assert str(excinfo.value) == (
        "zookeeper.auth_password_env: the environment variable LUMBER_TEST_ZKPW_UNSET is not set or empty"
    )
