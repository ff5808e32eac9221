"""Kafka and Lumber behind a SASL_SSL listener, configured the same way, for the security scenarios.

Both brokers get the SASL_SSL listener, PLAINTEXT listener, users and ACL authorizer of one
:class:`~lumber.dev.sasl_ssl_setup.SaslSslSetup` (one test CA; ``SCRAM-SHA-512`` and ``PLAIN``;
``User:ANONYMOUS`` and ``User:admin`` super users), with the users of :data:`PASSWORDS`:

* ``admin`` (a super user);
* ``alice``, granted every operation on every topic and every group by wildcard ACLs (:data:`ALICE_GRANTS`,
  made here as admin once the broker is up);
* ``bob`` (nothing: a scenario grants what it refuses him);
* ``carol`` and ``dave`` (nothing: tests/conformance/test_acls.py grants each what its scenario needs,
  ``carol`` for the denials, ``dave`` for the authorized operations, so that no other scenario's grants
  reach theirs).

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
from dataclasses import dataclass, replace
from pathlib import Path

from lumber.dev.kafka_server import KafkaCluster
from lumber.dev.process import LOOPBACK, free_port
from lumber.dev.sasl_ssl_setup import SaslSslSetup
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
    "carol": "sasl-ssl-carol-Pa55",
    "dave": "sasl-ssl-dave-Pa55",
}
PROBE_TOPIC = "grants-probe"


def binding(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    principal: str,
    *,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    """An ACL for ``principal`` from any host (the scenarios' grants and denials)."""
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


#: alice's ACLs: every operation on every topic and every group (Kafka's wildcard resource name, ``*``)
ALICE_GRANTS = tuple(
    binding(resource_type, "*", AclOperation.ALL, "User:alice")
    for resource_type in (ResourceType.TOPIC, ResourceType.GROUP)
)


@dataclass(frozen=True)
class SecureBroker:
    """A running broker's SASL_SSL listener and what its clients need to reach it."""

    name: str
    address: str
    log_dirs: tuple[Path, ...]
    setup: SaslSslSetup

    @property
    def cafile(self) -> Path:
        return self.setup.cafile

    def target(self, user: str = "alice", mechanism: str = "SCRAM-SHA-512") -> Target:
        """The broker as ``user`` logging in with ``mechanism`` and trusting the test CA."""
        return Target(
            self.name, self.address, self.log_dirs, security=self.setup.client_settings(user, mechanism)
        )


def as_user(target: Target, user: str) -> Target:
    """``target`` logging in as ``user`` of :data:`PASSWORDS` (same mechanism)."""
    return replace(
        target, security={**target.security, "sasl.username": user, "sasl.password": PASSWORDS[user]}
    )


def sasl_ssl_setup(folder: Path) -> SaslSslSetup:
    """The test CA in ``folder``, a server certificate for 127.0.0.1 and localhost, :data:`PASSWORDS`."""
    return SaslSslSetup.create(folder, PASSWORDS)


@contextlib.contextmanager
def sasl_ssl_kafka(base_dir: Path, setup: SaslSslSetup) -> Iterator[SecureBroker]:
    """One Kafka node (KRaft combined) with a SASL_SSL listener, users and grants as above."""
    cluster = KafkaCluster(base_dir, size=1)
    [node] = cluster.nodes
    port = free_port()
    node.settings = setup.kafka_settings(node.address, node.controller_port, port)
    node.format_args = setup.kafka_format_args()
    cluster.start()
    try:
        broker = SecureBroker("kafka", f"{LOOPBACK}:{port}", (node.data_dir,), setup)
        grant_alice(broker)
        yield broker
    finally:
        cluster.stop()


@contextlib.contextmanager
def sasl_ssl_lumber(zk_connect: str, base_dir: Path, setup: SaslSslSetup) -> Iterator[SecureBroker]:
    """One Lumber broker on the chroot ``zk_connect`` with a SASL_SSL listener, users and grants as above."""
    cluster = BrokerCluster(zk_connect, base_dir)
    setup.add_users(cluster.zk)
    plain, port = free_port(), free_port()
    try:
        cluster.add_broker(
            {
                **setup.lumber_settings(plain, port),
                "sasl_max_failed_authentications": 100_000,
                "flush_ms": 1000,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                "group_initial_rebalance_delay_ms": 0,
            },
            port=plain,
        )
        broker = SecureBroker(
            "lumber", f"{LOOPBACK}:{port}", tuple(b.log_dir for b in cluster.brokers), setup
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
