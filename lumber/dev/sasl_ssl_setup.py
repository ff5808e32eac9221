"""One SASL_SSL listener set up the same way on Apache Kafka and on Lumber: the tests' secure brokers
(tests/conformance) and the TLS benchmark (bench/tls.py) share it.

What both brokers get from a :class:`SaslSslSetup`:

* a **SASL_SSL** listener: TLS with a server certificate for ``127.0.0.1`` and ``localhost`` from one CA of
  its own (:class:`~lumber.dev.dev_certificates.CertificateAuthority`: ECDSA P-256, the key unencrypted),
  SASL with the setup's ``mechanisms`` (``SCRAM-SHA-512`` and ``PLAIN`` unless told otherwise);
* a PLAINTEXT listener (where each talks to itself: the Kafka node's inter-broker and controller traffic, a
  Lumber broker's registration address);
* the users of ``passwords``, each with a SCRAM-SHA-512 credential;
* with ``authorizer``: an ACL authorizer (Kafka's ``StandardAuthorizer``, Lumber's ``authorizer = "acl"``)
  with ``allow.everyone.if.no.acl.found`` false (both defaults) and ``super_users`` (the PLAINTEXT
  listener's ``User:ANONYMOUS`` among them, so that the brokers may talk to themselves).

How each stores the users: Kafka's SCRAM credentials come from the storage tool (``--add-scram``,
:meth:`SaslSslSetup.kafka_format_args`), its PLAIN passwords from the listener's JAAS line
(``user_<name>="<password>"``); Lumber keeps one SCRAM credential per user in ZooKeeper
(:meth:`SaslSslSetup.add_users`) and checks PLAIN against it (docs/security.md). Kafka reads its certificate
and key as an inline PEM keystore (``ssl.keystore.type=PEM``, ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain`` in ``server.properties``, newlines escaped as Java properties read them:
an unencrypted key needs no key password that way); Lumber reads the same two PEM files (``ssl_certfile``,
``ssl_keyfile``).

Not for production: the passwords are the caller's constants and the CA is a throwaway (README, "Securing a
cluster").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from lumber.dev.dev_certificates import CertificateAuthority, IssuedCertificate
from lumber.dev.process import LOOPBACK

#: The mechanisms a setup enables unless told otherwise; clients log in with the first by default.
MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
#: The super users of a setup with an authorizer: the PLAINTEXT listener's principal, and ``admin``.
SUPER_USERS = ("User:ANONYMOUS", "User:admin")


def _properties_value(pem: str) -> str:
    """A PEM block as one ``server.properties`` value (Java properties read ``\\n`` as a newline)."""
    return pem.strip().replace("\n", "\\n")


@dataclass(frozen=True)
class SaslSslSetup:
    """A CA and server certificate, users and mechanisms, as both brokers' settings (see the module)."""

    ca: CertificateAuthority
    server: IssuedCertificate
    passwords: Mapping[str, str]
    mechanisms: tuple[str, ...] = MECHANISMS
    authorizer: bool = True
    super_users: tuple[str, ...] = SUPER_USERS

    @classmethod
    def create(cls, folder: Path, passwords: Mapping[str, str], **options: Any) -> SaslSslSetup:
        """A new CA in ``folder`` and its server certificate for 127.0.0.1 and localhost."""
        ca = CertificateAuthority(folder)
        return cls(ca, ca.issue("broker"), dict(passwords), **options)

    @property
    def cafile(self) -> Path:
        return self.ca.cafile

    def client_settings(self, user: str, mechanism: str | None = None) -> dict[str, str]:
        """librdkafka's security settings (kcat's too) of ``user`` logging in with ``mechanism`` (the first
        enabled by default), trusting this setup's CA."""
        return {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.cafile),
            "sasl.mechanism": mechanism or self.mechanisms[0],
            "sasl.username": user,
            "sasl.password": self.passwords[user],
        }

    # -- Kafka --------------------------------------------------------------------------------------------

    def kafka_settings(self, address: str, controller_port: int, port: int) -> dict[str, str]:
        """``server.properties`` of a combined KRaft node whose PLAINTEXT listener is ``address`` (host:port)
        and whose SASL_SSL listener is ``port``."""
        jaas = {
            "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{user}="{password}"' for user, password in self.passwords.items())
            + ";",
        }
        settings = {
            "listeners": f"PLAINTEXT://{address},CONTROLLER://{LOOPBACK}:{controller_port},"
            f"SASL_SSL://{LOOPBACK}:{port}",
            "advertised.listeners": f"PLAINTEXT://{address},SASL_SSL://{LOOPBACK}:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": ",".join(self.mechanisms),
            **{
                f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config": jaas[mechanism]
                for mechanism in self.mechanisms
            },
            "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
            "listener.name.sasl_ssl.ssl.keystore.key": _properties_value(self.server.keyfile.read_text()),
            "listener.name.sasl_ssl.ssl.keystore.certificate.chain": _properties_value(
                self.server.certfile.read_text()
            ),
        }
        if self.authorizer:
            settings["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            settings["super.users"] = ";".join(self.super_users)
        return settings

    def kafka_format_args(self) -> tuple[str, ...]:
        """The storage tool's arguments that make the users' SCRAM-SHA-512 credentials."""
        return tuple(
            arg
            for user, password in self.passwords.items()
            for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")
        )

    # -- Lumber -------------------------------------------------------------------------------------------

    def lumber_settings(self, plain_port: int, port: int) -> dict[str, Any]:
        """``[broker]`` keys of a broker: a PLAINTEXT listener on ``plain_port``, SASL_SSL on ``port``."""
        settings: dict[str, Any] = {
            "listeners": [f"PLAINTEXT://{LOOPBACK}:{plain_port}", f"SASL_SSL://{LOOPBACK}:{port}"],
            "ssl_certfile": str(self.server.certfile),
            "ssl_keyfile": str(self.server.keyfile),
            "sasl_enabled_mechanisms": list(self.mechanisms),
        }
        if self.authorizer:
            settings |= {"authorizer": "acl", "super_users": list(self.super_users)}
        return settings

    def add_users(self, client: KazooClient) -> None:
        """Write every user's SCRAM-SHA-512 credential to a Lumber cluster's ZooKeeper (as ``lumber users
        add`` does)."""
        from broker.cluster.user_credential_store import UserCredentialStore  # noqa: PLC0415
        from broker.network.scram_credential import ScramCredential, ScramMechanism  # noqa: PLC0415

        store = UserCredentialStore(client)
        for user, password in self.passwords.items():
            store.upsert(
                user,
                {
                    ScramMechanism.SCRAM_SHA_512: ScramCredential.generate(
                        password, ScramMechanism.SCRAM_SHA_512
                    )
                },
            )
