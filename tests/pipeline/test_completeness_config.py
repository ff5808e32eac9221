"""The ``[completeness]`` section: defaults, per-topic overrides and their errors."""

from __future__ import annotations

import pytest

from audit.audit_tolerance import Tolerance
from lumber.config import config_from_mapping
from pipeline.completeness_config import CompletenessConfig, CompletenessPolicy
from pipeline.errors import ConfigError


def test_a_topic_override_changes_only_the_keys_it_names() -> None:
    config = CompletenessConfig(
        grace_ms=900_000,
        tolerance="2",
        topic_overrides=["clicks: require=watermark grace_ms=60000", "views: tolerance=0.5%"],
    )
    assert config.policy("clicks") == CompletenessPolicy("watermark", 60_000, Tolerance(count=2))
    assert config.policy("views") == CompletenessPolicy("audit", 900_000, Tolerance(percent=0.5))
    assert config.policy("other") == CompletenessPolicy("audit", 900_000, Tolerance(count=2))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["clicks"], "completeness.topic_overrides: expected 'TOPIC: key=value ...', got 'clicks'"),
        (["clicks: grace=5"], "expected key=value with a key of require, grace_ms, tolerance, got 'grace=5'"),
        (["clicks: require=always"], "require must be one of audit, watermark"),
        (["clicks: grace_ms=10m"], "grace_ms must be a whole number of ms"),
        (["clicks: tolerance=lots"], "completeness.topic_overrides clicks: expected a count of messages"),
        (["a: grace_ms=1", "a: grace_ms=2"], "topic 'a' is listed twice"),
    ],
)
def test_a_bad_override_is_refused_naming_it(overrides: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=r"completeness\.topic_overrides") as caught:
        CompletenessConfig(topic_overrides=overrides)
    assert message in str(caught.value)


def test_the_section_is_read_from_lumber_toml() -> None:
    config = config_from_mapping(
        {"completeness": {"require": "watermark", "grace_ms": 0, "alert_after_ms": 0}}, where="t.toml"
    )
    assert (config.completeness.require, config.completeness.grace_ms) == ("watermark", 0)
    assert config.completeness.topic == "_completeness"
    with pytest.raises(ConfigError, match=r"completeness\.require"):
        config_from_mapping({"completeness": {"require": "hope"}}, where="t.toml")
