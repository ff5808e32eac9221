"""The [broker] authorization keys (broker/security_config.py): defaults (no authorizer: nothing checked),
the checks of principals and of the brokers' SASL login, each refusal naming the key."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig


def test_defaults_check_nothing() -> None:
    config = BrokerConfig()
    assert config.authorizer == ""
    assert config.super_users == []
    assert config.allow_everyone_if_no_acl_found is False
    assert config.inter_broker_principal is None


def test_an_authorizer_with_a_sasl_inter_broker_listener() -> None:
    config = BrokerConfig(
        listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
        authorizer="acl",
        super_users=["User:admin", "User:broker"],
        inter_broker_sasl_username="broker",
        inter_broker_sasl_password_file="/run/secrets/broker",
    )
    assert config.inter_broker_principal == "User:broker"
    assert config.inter_broker_sasl_mechanism == "SCRAM-SHA-512"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"super_users": ["admin"]}, "broker.super_users: 'admin' is not type:name"),
        ({"inter_broker_sasl_username": "broker"}, "needs broker.inter_broker_sasl_password_file"),
        (
            {"listeners": ["SASL_PLAINTEXT://127.0.0.1:0"]},
            "uses SASL: set broker.inter_broker_sasl_username and inter_broker_sasl_password_file",
        ),
        ({"authorizer": "simple"}, "authorizer"),
    ],
)
def test_settings_that_cannot_work_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        BrokerConfig(**settings)  # type: ignore[arg-type]
    assert message in str(info.value)
