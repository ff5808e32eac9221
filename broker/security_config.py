"""The ``[broker]`` keys of authorization and of the brokers' own logins to each other.

:class:`BrokerSecurityConfig` is the base of :class:`~broker.config.BrokerConfig` (one ``[broker]`` table;
the keys are kept here so that each module stays one concern). With ``authorizer = ""`` (the default)
nothing is checked and every request is served as before; ``authorizer = "acl"`` checks every request
against the ACLs in ZooKeeper (:mod:`broker.server.authorizer`, docs/security.md).

This module must import nothing of Lumber's but the config section base.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from broker.config_section import ConfigSection, setting


class BrokerSecurityConfig(ConfigSection):
    """Authorization (Kafka's ``authorizer.class.name``, ``super.users``) and the inter-broker login."""

    authorizer: Literal["", "acl"] = setting(
        "",
        "'acl': every request is checked against the ACLs in ZooKeeper (`lumber acls`, CreateAcls), as "
        "Kafka's AclAuthorizer/StandardAuthorizer; a refusal answers TOPIC_, GROUP_ or "
        "CLUSTER_AUTHORIZATION_FAILED. Empty: no authorization, everyone may do everything.",
    )
    super_users: list[str] = setting(
        [],
        'Principals allowed everything whatever the ACLs say (Kafka\'s super.users), e.g. ["User:admin"]. '
        "The brokers' own principal belongs here (inter_broker_sasl_username's User:<name>, the SSL "
        "certificate's subject, or User:ANONYMOUS over a PLAINTEXT inter-broker listener).",
    )
    allow_everyone_if_no_acl_found: bool = setting(
        False,
        "With the authorizer on, a resource nobody wrote an ACL for is open to everyone (true) or to super "
        "users only (false, Kafka's default).",
    )
    inter_broker_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = setting(
        "SCRAM-SHA-512",
        "The SASL mechanism a broker logs in with at another broker's SASL inter-broker listener "
        "(Kafka's sasl.mechanism.inter.broker.protocol).",
    )
    inter_broker_sasl_username: str = setting(
        "",
        "The user the brokers log in as on a SASL inter-broker listener (a `lumber users add` user); the "
        "brokers then are User:<this name>: name it in super_users. Empty: no SASL between brokers.",
    )
    inter_broker_sasl_password_file: str = setting(
        "",
        "A file holding that user's password (its first line), read at each connection to another broker "
        "(a changed password needs no restart); the password itself is never a config value.",
    )

    @model_validator(mode="after")
    def _check_authorization(self) -> Self:
        for principal in self.super_users:
            kind, sep, name = principal.partition(":")
            if not sep or not kind or not name:
                raise ValueError(
                    f"broker.super_users: {principal!r} is not type:name (e.g. User:admin, User:CN=broker)"
                )
        if self.inter_broker_sasl_username and not self.inter_broker_sasl_password_file:
            raise ValueError("broker.inter_broker_sasl_username needs broker.inter_broker_sasl_password_file")
        return self

    @property
    def inter_broker_principal(self) -> str | None:
        """The brokers' principal on a SASL inter-broker listener (None without a SASL login)."""
        return f"User:{self.inter_broker_sasl_username}" if self.inter_broker_sasl_username else None
