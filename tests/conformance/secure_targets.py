"""Kafka and Lumber behind a SASL_SSL listener, configured the same way, for the security scenarios.

Both brokers get:

* a **SASL_SSL** listener: TLS with a server certificate for ``127.0.0.1`` and ``localhost`` from one test
  CA (:class:`~lumber.dev.dev_certificates.CertificateAuthority`, as the security tests make theirs; ECDSA
  P-256, the key unencrypted), SASL with ``SCRAM-SHA-512`` and ``PLAIN`` enabled;
* a PLAINTEXT listener (where each talks to itself: the Kafka node's inter-broker and controller traffic, a
  Lumber broker's registration address), whose principal ``User:ANONYMOUS`` is a super user, as is
  ``User:admin``;
* an ACL authorizer (Kafka's ``StandardAuthorizer``, Lumber's ``authorizer = "acl"``) with
  ``allow.everyone.if.no.acl.found`` false (both defaults);
* the users of :data:`PASSWORDS`: ``admin`` (a super user), ``alice`` (granted every operation on every
  topic and every group by wildcard ACLs, :data:`ALICE_GRANTS`, made here as admin once the broker is up),
  ``bob`` (nothing: a scenario grants what it refuses him).

How each stores the users: Kafka's SCRAM credentials come from the storage tool (``--add-scram``), its PLAIN
passwords from the listener's JAAS line (``user_<name>="<password>"``); Lumber keeps one SCRAM credential per
user in ZooKeeper and checks PLAIN against it (docs/security.md). Kafka reads its certificate and key as an
inline PEM keystore (``ssl.keystore.type=PEM``, ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``
in ``server.properties``, newlines escaped as Java properties read them: an unencrypted key needs no key
password that way); Lumber reads the same two PEM files (``ssl_certfile``, ``ssl_keyfile``).

Lumber's ``sasl_max_failed_authentications`` is raised to 100,000: its throttle refuses a host that failed
ten logins within a minute, every login from it, and the refusal scenarios fail on purpose from 127.0.0.1,
as every other scenario logs in (Kafka delays each failed login's answer by 100 ms instead).

:class:`SecureBroker` is one such broker; :meth:`SecureBroker.target` the :class:`Target` a scenario gets: the
SASL_SSL address and the client settings of one user and mechanism.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker.cluster.user_credential_store import UserCredentialStore
from broker.network.scram_credential import ScramCredential, ScramMechanism
from lumber.dev.dev_certificates import CertificateAuthority, IssuedCertificate
from lumber.dev.kafka_server import KafkaCluster
from lumber.dev.process import LOOPBACK, free_port
from tests.conformance.target import Target
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

PASSWORDS = {
    "admin": "sasl-ssl-admin-Pa55",
    "alice": "sasl-ssl-alice-Pa55",
    "bob": "sasl-ssl-bob-Pa55",
}
MECHANISMS = ("SCRAM-SHA-512", "PLAIN")
PROBE_TOPIC = "grants-probe"
SUPER_USERS = ("User:ANONYMOUS", "User:admin")
#: alice's ACLs: every operation on every topic and every group (Kafka's wildcard resource name, ``*``)
ALICE_GRANTS = (
    AclBinding(
        ResourceType.TOPIC,
        "*",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    ),
    AclBinding(
        ResourceType.GROUP,
        "*",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    ),
)


@dataclass(frozen=True)
class SecureBroker:
    """A running broker's SASL_SSL listener and what its clients need to reach it."""

    name: str
    address: str
    log_dirs: tuple[Path, ...]
    cafile: Path

    def target(self, user: str = "alice", mechanism: str = "SCRAM-SHA-512") -> Target:
        """The broker as ``user`` logging in with ``mechanism`` and trusting the test CA."""
        return Target(
            self.name,
            self.address,
            self.log_dirs,
            security={
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.cafile),
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": PASSWORDS[user],
            },
        )


def server_certificate(folder: Path) -> tuple[CertificateAuthority, IssuedCertificate]:
    """The test CA in ``folder`` and a server certificate for 127.0.0.1 and localhost."""
    ca = CertificateAuthority(folder)
    return ca, ca.issue("broker")


def _properties_value(pem: str) -> str:
    """A PEM block as one ``server.properties`` value (Java properties read ``\\n`` as a newline)."""
    return pem.strip().replace("\n", "\\n")


@contextlib.contextmanager
def sasl_ssl_kafka(
    base_dir: Path, ca: CertificateAuthority, server: IssuedCertificate
) -> Iterator[SecureBroker]:
    """One Kafka node (KRaft combined) with a SASL_SSL listener, users and grants as above."""
    cluster = KafkaCluster(base_dir, size=1)
    [node] = cluster.nodes
    port = free_port()
    plain_users = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    node.settings = {
        "listeners": f"PLAINTEXT://{LOOPBACK}:{node.port},CONTROLLER://{LOOPBACK}:{node.controller_port},"
        f"SASL_SSL://{LOOPBACK}:{port}",
        "advertised.listeners": f"PLAINTEXT://{node.address},SASL_SSL://{LOOPBACK}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
        ),
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.key": _properties_value(server.keyfile.read_text()),
        "listener.name.sasl_ssl.ssl.keystore.certificate.chain": _properties_value(
            server.certfile.read_text()
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(SUPER_USERS),
    }
    node.format_args = tuple(
        arg
        for user, password in PASSWORDS.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")
    )
    cluster.start()
    try:
        broker = SecureBroker("kafka", f"{LOOPBACK}:{port}", (node.data_dir,), ca.cafile)
        grant_alice(broker)
        yield broker
    finally:
        cluster.stop()


@contextlib.contextmanager
def sasl_ssl_lumber(
    zk_connect: str, base_dir: Path, ca: CertificateAuthority, server: IssuedCertificate
) -> Iterator[SecureBroker]:
    """One Lumber broker on the chroot ``zk_connect`` with a SASL_SSL listener, users and grants as above."""
    cluster = BrokerCluster(zk_connect, base_dir)
    users = UserCredentialStore(cluster.zk)
    for user, password in PASSWORDS.items():
        users.upsert(
            user,
            {ScramMechanism.SCRAM_SHA_512: ScramCredential.generate(password, ScramMechanism.SCRAM_SHA_512)},
        )
    plain, port = free_port(), free_port()
    try:
        cluster.add_broker(
            {
                "listeners": [f"PLAINTEXT://{LOOPBACK}:{plain}", f"SASL_SSL://{LOOPBACK}:{port}"],
                "ssl_certfile": str(server.certfile),
                "ssl_keyfile": str(server.keyfile),
                "sasl_enabled_mechanisms": list(MECHANISMS),
                "sasl_max_failed_authentications": 100_000,
                "authorizer": "acl",
                "super_users": list(SUPER_USERS),
                "flush_ms": 1000,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                "group_initial_rebalance_delay_ms": 0,
            },
            port=plain,
        )
        broker = SecureBroker(
            "lumber", f"{LOOPBACK}:{port}", tuple(b.log_dir for b in cluster.brokers), ca.cafile
        )
        grant_alice(broker)
        yield broker
    finally:
        cluster.stop()


def grant_alice(broker: SecureBroker, timeout_s: float = 60.0) -> None:
    """Create :data:`ALICE_GRANTS` as admin, then wait until they are in force (Kafka applies ACLs from its
    metadata log): until alice's Metadata shows a topic admin made, ``grants-probe``, without an error."""
    admin = AdminClient(broker.target("admin").client_config)
    for future in admin.create_acls(list(ALICE_GRANTS)).values():
        future.result(30)
    admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)], operation_timeout=30)[PROBE_TOPIC].result(60)
    alice = AdminClient(broker.target("alice").client_config)
    deadline = time.monotonic() + timeout_s
    while True:
        found = alice.list_topics(PROBE_TOPIC, timeout=10).topics.get(PROBE_TOPIC)
        if found is not None and found.error is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{broker.name}: alice's grants not in force after {timeout_s} s: Metadata of {PROBE_TOPIC} "
                f"answers {found.error if found is not None else 'nothing'}"
            )
        time.sleep(0.2)
