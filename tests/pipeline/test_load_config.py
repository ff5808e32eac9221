from __future__ import annotations

import pytest

from lumber.config import config_from_mapping, render_defaults
from pipeline.errors import ConfigError
from pipeline.load_config import LoadConfig


def test_defaults_select_every_topic_but_internal_ones() -> None:
    load = LoadConfig()
    assert (load.job, load.start, load.on_out_of_range, load.window_ms) == (
        "hourly",
        "earliest",
        "fail",
        600_000,
    )
    assert load.topic_selected("page_view")
    assert not load.topic_selected("_audit")
    assert "[load]" in render_defaults()


def test_allow_and_deny_match_whole_names_and_deny_wins() -> None:
    load = LoadConfig(topics_allow=["page_.*", "click"], topics_deny=["page_view_test"])
    assert load.topic_selected("page_view")
    assert load.topic_selected("click")
    assert not load.topic_selected("clicks")  # whole-name match
    assert not load.topic_selected("page_view_test")


def test_event_time_fields_by_topic() -> None:
    config = config_from_mapping({"load": {"event_time_fields": ["page_view=timestamp_ms", "click=ts"]}})
    assert config.load.event_time_by_topic() == {"page_view": "timestamp_ms", "click": "ts"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"job": "a/b"}, "load.job must be"),
        ({"topics_allow": ["("]}, "load.topics_allow: '(' is not a regular expression"),
        ({"event_time_fields": ["page_view"]}, "expected 'TOPIC=FIELD'"),
        ({"event_time_fields": ["a=x", "a=y"]}, "listed twice"),
        ({"spark_conf": ["spark.x"]}, "expected 'key=value'"),
        ({"start": "middle"}, "load.start"),
        ({"on_out_of_range": "latest"}, "load.on_out_of_range"),
        ({"min_partitions": 0}, "at least 1"),
    ],
)
def test_bad_values_name_the_file_and_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=r"lumber\.toml") as caught:
        config_from_mapping({"load": table}, where="lumber.toml")
    assert message in str(caught.value)


def test_environment_overrides_reach_the_section() -> None:
    config = config_from_mapping(
        {}, env={"LUMBER_LOAD__FAULT_INJECTION": '["commit:manifest"]', "LUMBER_LOAD__JOB": "nightly"}
    )
    assert config.load.fault_injection == ["commit:manifest"]
    assert config.load.job == "nightly"
