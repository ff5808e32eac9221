"""The ``[mirror]`` section: read from ``lumber.toml`` and the environment, overridden by ``lumber mirror``'s
flags (the flags' run against real clusters is ``test_mirror.py``'s killed-mirror test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lumber.config import config_from_mapping, load_config, render_defaults
from mirror.mirror import Mirror
from mirror.mirror_config import MirrorConfig
from mirror.mirror_errors import MirrorConfigError
from pipeline.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lumber.toml"
    path.write_text(text)
    return path


def test_the_section_is_read_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[mirror]\ntopics = "page_view|click"\ngroup = "offline"\nstreams = 3\n'
        "max_in_flight_records = 5000\naudit_interval_ms = 0\n",
    )
    config = load_config(path, env={"LUMBER_MIRROR__STREAMS": "4", "LUMBER_MIRROR__TOPIC_REFRESH_MS": "0"})
    assert config.mirror == MirrorConfig(
        topics="page_view|click",
        group="offline",
        streams=4,
        max_in_flight_records=5000,
        audit_interval_ms=0,
        topic_refresh_ms=0,
        # the audit keys are every tier's: filled in from [audit] and [registry]
        audit_topic=config.audit.topic,
        audit_window_ms=config.audit.window_ms,
        audit_registry_url=config.registry.url,
    )
    assert config.mirror.matches("click")
    assert not config.mirror.matches("clicks")


def test_defaults_leave_the_topics_to_be_given() -> None:
    config = config_from_mapping({})
    mirror = config.mirror
    assert mirror == MirrorConfig(audit_registry_url=config.registry.url)
    assert mirror.topics == ""
    assert mirror.group == "lumber-mirror"
    assert mirror.audit_interval_ms == 10_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # the audit's topic, window and registry are every tier's, not the mirror's own keys
        ('[mirror]\naudit_topic = "x"\n', "unknown key 'mirror.audit_topic'"),
        ('[mirror]\naudit_registry_url = "http://r:1"\n', "unknown key 'mirror.audit_registry_url'"),
        ("[mirror]\nstreams = 0\n", "key 'mirror.streams' must be at least 1, got 0"),
        ('[mirror]\ntopics = "("\n', "section [mirror]: MirrorConfig.topics: not a regular expression"),
    ],
)
def test_bad_keys_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path, env={})
    assert str(excinfo.value).startswith(f"{path}: ")
    assert message in str(excinfo.value)


def test_config_defaults_lists_the_section() -> None:
    text = render_defaults()
    section = text[text.index("[mirror]\n") :]
    section = section[: section.find("\n\n")]
    keys = [
        line.split(" = ")[0] for line in section.splitlines() if " = " in line and not line.startswith("#")
    ]
    assert keys == [
        "topics",
        "group",
        "streams",
        "max_records_per_poll",
        "max_in_flight_records",
        "max_in_flight_bytes",
        "topic_refresh_ms",
        "poll_timeout_ms",
        "send_retry_backoff_ms",
        "audit_interval_ms",
    ]


def run_mirror(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "mirror", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_lumber_mirror_without_topics_says_where_to_give_them(tmp_path: Path) -> None:
    result = run_mirror(
        write(tmp_path, "[mirror]\nstreams = 2\n"),
        "--source-zookeeper", "127.0.0.1:1/a", "--target-zookeeper", "127.0.0.1:1/b",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "lumber mirror: no topics to mirror: give --topics-regex REGEX or set [mirror] topics"
    )


def test_a_flag_is_checked_as_the_key_it_overrides(tmp_path: Path) -> None:
    result = run_mirror(
        write(tmp_path, '[mirror]\ntopics = "t"\n'),
        "--source-zookeeper", "127.0.0.1:1/a", "--target-zookeeper", "127.0.0.1:1/b", "--streams", "0",
    )  # fmt: skip
    assert result.returncode == 2
    assert "lumber mirror: MirrorConfig.streams must be at least 1, got 0" in result.stderr


def test_a_mirror_that_audits_needs_a_registry() -> None:
    with pytest.raises(
        MirrorConfigError, match="audit_interval_ms > 0 needs an audit_topic and an audit_registry_url"
    ):
        Mirror(MirrorConfig(topics="t"), source_zookeeper="127.0.0.1:1", target_zookeeper="127.0.0.1:1")
    with pytest.raises(
        MirrorConfigError, match=r"audit_interval_ms > 0 needs the registry's client settings"
    ):
        Mirror(
            MirrorConfig(topics="t", audit_registry_url="https://r:8081"),
            source_zookeeper="127.0.0.1:1",
            target_zookeeper="127.0.0.1:1",
        )
    with pytest.raises(MirrorConfigError, match="no topics to mirror"):
        Mirror(
            MirrorConfig(audit_interval_ms=0), source_zookeeper="127.0.0.1:1", target_zookeeper="127.0.0.1:1"
        )
