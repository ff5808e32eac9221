"""The cluster of tests/broker/server/test_authorizer.py: two brokers with the ACL authorizer, the users'
passwords, the ACLs' helpers, and clients for each principal (unmodified confluent-kafka and kafka-python)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cluster.user_credential_store import UserCredentialStore
from broker.network.scram_credential import ScramCredential, ScramMechanism
from broker.protocol.messages.describe_acls import DescribeAclsRequest
from broker.server.inter_broker_send import InterBrokerSend
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

PASSWORDS = {
    "admin": "admin-Pa55-never-shown",
    "broker": "broker-Pa55-never-shown",
    "alice": "alice-Pa55-never-shown",
    "bob": "bob-Pa55-never-shown",
    "carol": "carol-Pa55-never-shown",
    "dave": "dave-Pa55-never-shown",
    "erin": "erin-Pa55-never-shown",
}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ANY_ACL = AclBindingFilter(
    ResourceType.ANY,
    None,  # type: ignore[arg-type]  # None matches any (confluent-kafka's stubs say str)
    ResourcePatternType.ANY,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)


class AclCluster:
    """Two brokers with the ACL authorizer, users in ZooKeeper, clients for each principal."""

    def __init__(self, cluster: BrokerCluster, ports: list[int], admin_password: str) -> None:
        self.cluster = cluster
        self.ports = ports
        #: a file holding the admin's password (Lumber's own connection reads it from a file)
        self.admin_password = admin_password

    def bootstrap(self, broker: int | None = None) -> str:
        ports = self.ports if broker is None else [self.ports[broker]]
        return ",".join(f"127.0.0.1:{p}" for p in ports)

    def confluent(self, user: str, broker: int | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap(broker),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
        }

    def kafka_python(self, user: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap(),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": PASSWORDS[user],
        }

    def admin(self, broker: int | None = None) -> AdminClient:
        return AdminClient(self.confluent("admin", broker))

    def allow(self, *bindings: AclBinding) -> None:
        admin = self.admin()  # kept until the futures are done: its handle answers them
        futures = admin.create_acls(list(bindings))
        for future in futures.values():
            assert future.result(30) is None
        self.wait_seen(list(bindings))

    def wait_seen(self, bindings: list[AclBinding]) -> None:
        """Wait until every broker's copy of the ACLs has ``bindings`` (each broker follows ZooKeeper's
        change notifications: a moment after the one that wrote them). Each broker is asked itself, on a
        connection of its own: an admin client bootstrapped to one broker may send DescribeAcls to another
        it learnt from Metadata (librdkafka picks any broker it is connected to): the likeliest reason
        alice's first produce in a CI run was refused by a leader (TOPIC_AUTHORIZATION_FAILED) after the
        admin client's check had passed."""
        wanted = {wire_binding(b) for b in bindings}
        any_acl = DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
        )  # ANY of each
        for broker, port in enumerate(self.ports):
            send = InterBrokerSend(
                broker,
                "127.0.0.1",
                port,
                client_id="acl-probe",
                sasl=("SCRAM-SHA-512", "admin", self.admin_password),
            )
            try:
                deadline = time.monotonic() + 20
                while True:
                    response = send.send_and_receive(any_acl)
                    assert response.error_code == 0, response
                    described = {
                        (
                            r.resource_type,
                            r.resource_name,
                            r.pattern_type,
                            a.principal,
                            a.host,
                            a.operation,
                            a.permission_type,
                        )
                        for r in response.resources
                        for a in r.acls
                    }
                    if described >= wanted:
                        break
                    assert time.monotonic() < deadline, f"broker {broker} has not seen {bindings}"
                    time.sleep(0.05)
            finally:
                send.close()

    def log_end(self, topic: str, partition: int = 0) -> int:
        consumer = Consumer({**self.confluent("admin"), "group.id": "log-end-probe"})
        try:
            return int(consumer.get_watermark_offsets(ConfluentPartition(topic, partition), timeout=10)[1])
        finally:
            consumer.close()


def wire_binding(binding: Any) -> tuple[int, str, int, str, str, int, int]:
    """A confluent-kafka ``AclBinding`` as DescribeAcls answers it (its enums hold Kafka's codes)."""
    return (
        binding.restype.value,
        binding.name,
        binding.resource_pattern_type.value,
        binding.principal,
        binding.host,
        binding.operation.value,
        binding.permission_type.value,
    )


def acl(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    pattern: ResourcePatternType = LITERAL,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def produce(settings: dict[str, Any], topic: str, count: int, **extra: Any) -> list[int]:
    """Produce ``count`` records to partition 0; each delivery's error code (0: delivered). A fatal error
    (an idempotent producer refused its producer id) is raised as librdkafka's ``KafkaException``."""
    producer = Producer({**settings, "acks": "all", "message.timeout.ms": 8000, **extra})
    codes: list[int] = []
    for i in range(count):
        producer.produce(
            topic,
            b"v%d" % i,
            partition=0,
            on_delivery=lambda err, _m: codes.append(0 if err is None else err.code()),
        )
    try:
        producer.flush(30)
    except SystemError as exc:
        # confluent-kafka raises the fatal error inside flush, then calls the record's delivery callback
        # with it still set, which Python reports as a SystemError caused by it (when the refusal comes
        # after the record was queued: always when this test runs alone)
        if isinstance(exc.__cause__, KafkaException):
            raise exc.__cause__ from None
        raise
    return codes


@pytest.fixture(scope="module")
def acl_cluster(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AclCluster]:
    base = tmp_path_factory.mktemp("acl-cluster")
    cluster = BrokerCluster(make_chroot(zookeeper_server.connect, "test_authorizer"), base)
    users = UserCredentialStore(cluster.zk)
    for user, password in PASSWORDS.items():
        users.upsert(
            user, {m: ScramCredential.generate(password, m, iterations=4096) for m in ScramMechanism}
        )
    password_file = base / "broker.password"
    password_file.write_text(PASSWORDS["broker"] + "\n")
    ports = [free_port(), free_port()]
    try:
        for port in ports:
            cluster.add_broker(
                {
                    "listeners": [f"SASL_PLAINTEXT://127.0.0.1:{port}"],
                    "sasl_enabled_mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                    "sasl_max_failed_authentications": 100_000,
                    "authorizer": "acl",
                    "super_users": ["User:admin", "User:broker"],
                    "inter_broker_sasl_mechanism": "SCRAM-SHA-512",
                    "inter_broker_sasl_username": "broker",
                    "inter_broker_sasl_password_file": str(password_file),
                    "flush_on_ack": True,
                    "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                    "offsets_topic_replication_factor": 1,
                    "group_initial_rebalance_delay_ms": 0,
                },
                port=port,
            )
        admin_password = base / "admin.password"
        admin_password.write_text(PASSWORDS["admin"] + "\n")
        yield AclCluster(cluster, ports, str(admin_password))
    finally:
        cluster.stop()
