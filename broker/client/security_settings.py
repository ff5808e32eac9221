"""The security keys every client section shares (``[producer]``, ``[consumer]``, ``[load]``): Kafka's client
settings under Lumber's names.

========================  =================================  ================================================
key                       Kafka's                            what
========================  =================================  ================================================
security_protocol         security.protocol                  PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
sasl_mechanism            sasl.mechanism                     PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
sasl_username             sasl.username (librdkafka)         the user of ``lumber users add``
sasl_password             sasl.password (librdkafka)         a secret: prefer the next two
sasl_password_file        (none)                             a file whose first line is the password
sasl_password_env         (none)                             an environment variable holding it
ssl_cafile                ssl.ca.location                    CA certificates (PEM) the broker's must chain to
ssl_certfile              ssl.certificate.location           the client's certificate (PEM): mutual TLS
ssl_keyfile               ssl.key.location                   its private key (PEM)
ssl_key_password          ssl.key.password                   a secret: or ssl_key_password_file / _env
ssl_check_hostname        ssl.endpoint.identification...     the broker's certificate must name its host
========================  =================================  ================================================

A secret is given at most one way. A secret in the file itself is a :class:`pydantic.SecretStr`: the
section's ``repr`` shows stars, ``lumber config show`` masks it, and it is never on a command line (there is
no flag for it). A file or a variable is read when a client is made
(:meth:`SecuritySettings.client_security`); a file that cannot be read, or an empty one, is a
:class:`~broker.client.errors.ClientConfigError` naming the key and the file or variable, never the value.

:class:`SecuritySettings` is a base of the sections (pydantic fields are inherited), so every section says
the same thing the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Self

from pydantic import SecretStr, model_validator

from broker.client.client_security import ClientSecurity
from broker.client.errors import ClientConfigError
from broker.config_section import ConfigSection, setting
from broker.endpoint import SecurityProtocol

SecurityProtocolName = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanismName = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

#: The keys whose values are secrets: masked by ``lumber config show``.
SECRET_KEYS = ("sasl_password", "ssl_key_password")


class SecuritySettings(ConfigSection):
    """How a client reaches a broker's listener (see the module docstring)."""

    security_protocol: SecurityProtocolName = setting(
        "PLAINTEXT",
        "The listener's security protocol: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (a SASL login, "
        "inside TLS for SASL_SSL). Clients that learn the cluster from ZooKeeper connect to each broker's "
        "first listener of this protocol.",
    )
    sasl_mechanism: SaslMechanismName = setting(
        "SCRAM-SHA-512",
        "SASL mechanism: PLAIN (the password itself, use TLS), SCRAM-SHA-256 or SCRAM-SHA-512.",
    )
    sasl_username: str = setting("", "SASL user (made by `lumber users add`).")
    sasl_password: SecretStr = setting(
        SecretStr(""),
        "SASL password (a secret: masked by `lumber config show`; prefer sasl_password_file or "
        "sasl_password_env).",
    )
    sasl_password_file: str = setting("", "A file whose first line is the SASL password (keep it mode 0600).")
    sasl_password_env: str = setting("", "An environment variable holding the SASL password.")
    ssl_cafile: str = setting(
        "", "CA certificates (PEM) the broker's certificate must chain to; empty: the system's trusted CAs."
    )
    ssl_certfile: str = setting(
        "", "The client's certificate (PEM), for brokers that ask for one (mutual TLS)."
    )
    ssl_keyfile: str = setting("", "The client certificate's private key (PEM); empty: inside ssl_certfile.")
    ssl_key_password: SecretStr = setting(
        SecretStr(""), "Password of an encrypted ssl_keyfile (a secret; or ssl_key_password_file / _env)."
    )
    ssl_key_password_file: str = setting("", "A file whose first line is the password of ssl_keyfile.")
    ssl_key_password_env: str = setting("", "An environment variable holding the password of ssl_keyfile.")
    ssl_check_hostname: bool = setting(
        True, "Whether the broker's certificate must name the host the client connects to."
    )

    @model_validator(mode="after")
    def _check_security(self) -> Self:
        for key in SECRET_KEYS:
            given = [
                name
                for name, value in (
                    (key, getattr(self, key).get_secret_value()),
                    (f"{key}_file", getattr(self, f"{key}_file")),
                    (f"{key}_env", getattr(self, f"{key}_env")),
                )
                if value
            ]
            if len(given) > 1:
                raise ValueError(f"give at most one of {', '.join(given)}")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile needs ssl_certfile (the certificate the key belongs to)")
        return self

    def client_security(self, section: str) -> ClientSecurity:
        """These settings with their secrets read (see the module docstring); ``section`` names them in
        errors (``producer``)."""
        return ClientSecurity(
            protocol=SecurityProtocol(self.security_protocol),
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=self._secret(section, "sasl_password")
            if SecurityProtocol(self.security_protocol).uses_sasl
            else "",
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            key_password=self._secret(section, "ssl_key_password"),
            check_hostname=self.ssl_check_hostname,
            section=section,
        )

    def security_settings(self) -> dict[str, object]:
        """The security keys and their values (secrets as they are held: :class:`SecretStr`), to copy them to
        another section with ``replace(**...)``."""
        return {key: getattr(self, key) for key in SecuritySettings.model_fields}

    def with_secrets_read(self, section: str) -> Self:
        """A copy whose secrets are held in it (read now from their files or variables, which are then
        left out): for a process that has neither, such as a Spark task on another machine."""
        security = self.client_security(section)
        return self.replace(
            sasl_password=SecretStr(security.sasl_password),
            sasl_password_file="",
            sasl_password_env="",
            ssl_key_password=SecretStr(security.key_password),
            ssl_key_password_file="",
            ssl_key_password_env="",
        )

    def _secret(self, section: str, key: str) -> str:
        inline: SecretStr = getattr(self, key)
        path: str = getattr(self, f"{key}_file")
        variable: str = getattr(self, f"{key}_env")
        if path:
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ClientConfigError(f"{section}.{key}_file: cannot read {path!r}: {reason}") from None
            if not lines or not lines[0]:
                raise ClientConfigError(f"{section}.{key}_file: the first line of {path!r} is empty")
            return lines[0]
        if variable:
            value = os.environ.get(variable, "")
            if not value:
                raise ClientConfigError(
                    f"{section}.{key}_env: the environment variable {variable} is not set or empty"
                )
            return value
        return inline.get_secret_value()
