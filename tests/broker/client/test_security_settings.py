"""The clients' security keys (broker/client/security_settings.py, client_security.py) as the config reads
them: secrets from the file, a file or a variable, one way at a time, never quoted in an error or a repr,
masked by ``lumber config show``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from broker.client.client_security import ClientSecurity
from broker.client.errors import ClientConfigError
from broker.client.producer.producer_config import ProducerConfig
from broker.endpoint import SecurityProtocol
from lumber.config import config_from_mapping, dump_config
from pipeline.errors import ConfigError

SECRET = "S3cret-d41d8c-never-shown"
SASL: dict[str, Any] = {"security_protocol": "SASL_SSL", "sasl_username": "alice"}


def test_the_password_from_the_file_a_file_or_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inline = ProducerConfig(**SASL, sasl_password=SecretStr(SECRET)).client_security("producer")
    path = tmp_path / "pass"
    path.write_text(SECRET + "\nsecond line ignored\n")
    from_file = ProducerConfig(**SASL, sasl_password_file=str(path)).client_security("producer")
    monkeypatch.setenv("ALICE_PASSWORD", SECRET)
    from_env = ProducerConfig(**SASL, sasl_password_env="ALICE_PASSWORD").client_security("producer")
    for security in (inline, from_file, from_env):
        assert security.sasl_password == SECRET
        assert security.protocol is SecurityProtocol.SASL_SSL
        assert SECRET not in repr(security)
    assert repr(inline) == "ClientSecurity(SASL_SSL, SCRAM-SHA-512 as 'alice')"


def test_errors_name_the_key_and_the_source_never_the_value(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="give at most one of sasl_password, sasl_password_file"):
        ProducerConfig(**SASL, sasl_password=SecretStr(SECRET), sasl_password_file="/x")
    with pytest.raises(ClientConfigError, match=r"producer.sasl_password_file: cannot read '/nowhere/pass'"):
        ProducerConfig(**SASL, sasl_password_file="/nowhere/pass").client_security("producer")
    with pytest.raises(ClientConfigError, match="the environment variable NOT_SET_ANYWHERE is not set"):
        ProducerConfig(**SASL, sasl_password_env="NOT_SET_ANYWHERE").client_security("producer")
    with pytest.raises(ClientConfigError, match="needs sasl_username and a password"):
        ProducerConfig(security_protocol="SASL_PLAINTEXT").client_security("producer")
    with pytest.raises(ConfigError) as wrong_type:
        config_from_mapping({"consumer": {"sasl_password": 12345678}}, where="lumber.toml")
    assert "consumer.sasl_password" in str(wrong_type.value)
    assert "12345678" not in str(wrong_type.value)
    assert SECRET not in repr(ProducerConfig(**SASL, sasl_password=SecretStr(SECRET)))


def test_config_show_masks_every_secret_and_the_unmasked_dump_reads_back() -> None:
    config = config_from_mapping(
        {
            "producer": {**SASL, "sasl_password": SECRET},
            "consumer": {"ssl_certfile": "/c.pem", "ssl_key_password": SECRET},
            "registry": {"basic_auth_username": "reader", "basic_auth_password": SECRET},
        }
    )
    shown = dump_config(config, mask_secrets=True)
    assert SECRET not in shown
    assert shown.count('= "********"') == 3
    assert 'sasl_password = ""' in shown  # unset secrets show as they are
    written = dump_config(config)
    assert written.count(SECRET) == 3
    assert config_from_mapping(tomllib.loads(written)) == config


def test_plaintext_needs_nothing_and_builds_no_tls_context() -> None:
    assert ClientSecurity().ssl_context() is None
    assert ProducerConfig().client_security("producer") == ClientSecurity(section="producer")
