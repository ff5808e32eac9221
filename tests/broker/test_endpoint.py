"""Listeners in Kafka's syntax and the [broker] keys that set them (broker/endpoint.py, broker/config.py)."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.endpoint import Endpoint, InvalidListenerError, SecurityProtocol, parse_endpoints


def test_a_listener_names_its_protocol_host_and_port() -> None:
    assert Endpoint.parse("SASL_SSL://0.0.0.0:9094") == Endpoint(
        "SASL_SSL", "0.0.0.0", 9094, SecurityProtocol.SASL_SSL
    )
    assert Endpoint.parse("plaintext://:0") == Endpoint("PLAINTEXT", "", 0, SecurityProtocol.PLAINTEXT)
    ipv6 = Endpoint.parse("INTERNAL://[::1]:9093", {"internal": "ssl"})
    assert ipv6 == Endpoint("INTERNAL", "::1", 9093, SecurityProtocol.SSL)
    assert str(ipv6) == "INTERNAL://[::1]:9093"
    assert SecurityProtocol.SASL_SSL.uses_tls
    assert SecurityProtocol.SASL_SSL.uses_sasl
    assert not SecurityProtocol.SSL.uses_sasl
    assert not SecurityProtocol.SASL_PLAINTEXT.uses_tls


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("127.0.0.1:9092", "is not NAME://host:port"),
        ("EXTERNAL://h:1", "'EXTERNAL' is neither a security protocol"),
        ("PLAINTEXT://h", "has no port"),
        ("PLAINTEXT://h:x", "port 'x' is not a number"),
        ("PLAINTEXT://h:70000", "port 70000 is not in [0, 65535]"),
        ("PLAINTEXT://[::1:9092", "an IPv6 host is written [address]:port"),
    ],
)
def test_a_bad_listener_is_named(text: str, message: str) -> None:
    with pytest.raises(InvalidListenerError) as info:
        Endpoint.parse(text)
    assert str(info.value).startswith(f"listener {text!r}")
    assert message in str(info.value)


def test_a_listener_name_given_twice_is_refused() -> None:
    with pytest.raises(InvalidListenerError, match="PLAINTEXT given more than once"):
        parse_endpoints(["PLAINTEXT://a:1", "plaintext://b:2"])


def test_host_and_port_alone_are_one_plaintext_listener() -> None:
    config = BrokerConfig(host="0.0.0.0", port=9092, advertised_host="broker1")
    assert config.listener_endpoints == [Endpoint("PLAINTEXT", "0.0.0.0", 9092, SecurityProtocol.PLAINTEXT)]
    assert config.advertised_endpoints == [Endpoint("PLAINTEXT", "broker1", 9092, SecurityProtocol.PLAINTEXT)]
    assert config.inter_broker_listener == "PLAINTEXT"


def test_listeners_advertised_listeners_and_the_protocol_map() -> None:
    config = BrokerConfig(
        listeners=["INTERNAL://127.0.0.1:0", "EXTERNAL://0.0.0.0:9094"],
        advertised_listeners=["EXTERNAL://broker1.example.com:9094"],
        listener_security_protocol_map={"INTERNAL": "SSL", "EXTERNAL": "SASL_SSL"},
        inter_broker_listener_name="internal",
        ssl_certfile="broker.pem",
    )
    assert config.advertised_endpoints == [
        Endpoint("INTERNAL", "127.0.0.1", 0, SecurityProtocol.SSL),
        Endpoint("EXTERNAL", "broker1.example.com", 9094, SecurityProtocol.SASL_SSL),
    ]
    assert config.inter_broker_listener == "INTERNAL"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": ["PLAINTEXT://0.0.0.0:9092"]}, "PLAINTEXT://0.0.0.0:9092 cannot be advertised"),
        (
            {"listeners": ["PLAINTEXT://a:1"], "advertised_listeners": ["SSL://b:2"]},
            "advertised listener(s) SSL are not among the listeners",
        ),
        ({"listeners": ["PLAINTEXT://a:1"], "inter_broker_listener_name": "SSL"}, "is not a listener"),
        ({"listeners": ["FOO://a:1"]}, "'FOO' is neither a security protocol"),
    ],
)
def test_listener_settings_that_cannot_work_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        BrokerConfig(**settings)  # type: ignore[arg-type]
    assert message in str(info.value)
