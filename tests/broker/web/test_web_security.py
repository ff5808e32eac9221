"""broker/web/web_security.py: the 127.0.0.1 rule. A server bound beyond this machine without users is refused
with one line naming the keys; allow_unauthenticated lets it start with a warning; passwords without TLS are
warned about; a certificate that cannot be loaded is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.web.errors import TlsConfigError, UnsafeBindError, UsersFileError
from broker.web.web_security import WebSecurity, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("", False),
        ("::", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_beyond_loopback_without_users_is_refused_naming_the_keys() -> None:
    security = WebSecurity("lumber console", "console", "0.0.0.0")
    with pytest.raises(UnsafeBindError) as caught:
        security.check()
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        "lumber console: [console] host = '0.0.0.0' reaches beyond 127.0.0.1 and [console] users_file is "
        "not set: give it users (lumber http-users add) or set [console] allow_unauthenticated = true"
    )


def test_prefixed_keys_and_a_flag_are_named() -> None:
    metrics = WebSecurity("broker 3's metrics", "broker", "10.0.0.7", prefix="metrics_")
    with pytest.raises(UnsafeBindError, match=r"\[broker\] metrics_allow_unauthenticated = true"):
        metrics.check()
    flag = WebSecurity("lumber lag exporter", "lag_exporter", "0.0.0.0", host_key="--metrics-host")
    with pytest.raises(UnsafeBindError, match=r"--metrics-host = '0.0.0.0' reaches beyond"):
        flag.check()


def test_allowed_unauthenticated_starts_with_a_warning() -> None:
    security = WebSecurity("lumber console", "console", "0.0.0.0", allow_unauthenticated=True)
    assert security.check() == [
        (
            "lumber console: serving '0.0.0.0' WITHOUT authentication "
            "([console] allow_unauthenticated = true): anyone who reaches it is served"
        )
    ]


def test_loopback_needs_nothing_and_users_without_tls_are_warned_about() -> None:
    assert WebSecurity("lumber console", "console", "127.0.0.1").check() == []
    [warning] = WebSecurity("lumber console", "console", "0.0.0.0", users_file="u").check()
    assert "without TLS" in warning
    assert "[console] ssl_certfile" in warning
    assert WebSecurity("c", "console", "0.0.0.0", users_file="u", ssl_certfile="c.pem").check() == []


def test_a_certificate_that_cannot_be_loaded_is_named(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    security = WebSecurity("lumber console", "console", "127.0.0.1", ssl_certfile=str(tmp_path / "cert.pem"))
    with pytest.raises(TlsConfigError, match=r"cannot load \[console\] ssl_certfile '.*cert.pem'"):
        security.ssl_context()


def test_a_users_file_that_cannot_be_read_is_named_with_its_key(tmp_path: Path) -> None:
    security = WebSecurity(
        "broker 0's metrics", "broker", "0.0.0.0", users_file=str(tmp_path / "none"), prefix="metrics_"
    )
    with pytest.raises(UsersFileError) as caught:
        security.authenticator()
    assert str(caught.value) == (
        f"broker 0's metrics: [broker] metrics_users_file: users file '{tmp_path / 'none'}': "
        "No such file or directory"
    )
