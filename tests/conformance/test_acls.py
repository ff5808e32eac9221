"""ACL denials on Kafka and on Lumber, both with SCRAM users and an authorizer: the same error codes for
the same refusals.

* Kafka: one KRaft node with a SASL_PLAINTEXT listener (SCRAM-SHA-512, the users made by the storage tool's
  ``--add-scram``) and ``StandardAuthorizer``; its PLAINTEXT and CONTROLLER listeners, where the node talks
  to itself, are ``User:ANONYMOUS``, a super user with ``User:admin``.
* Lumber: one broker with the same listeners and ``authorizer = "acl"``, the same super users, the users
  written to ZooKeeper by the store ``lumber users`` uses.

``acl_denials``: as ``User:admin``, create the scenario's topics and ACLs for ``User:alice`` (Write and Read
on the topic, Write on a prefix with a Deny of one name under it, Read on one group, Describe only on
another); then, as alice, the outcome of: producing to the topic, to a topic without ACLs, to the denied
name under the prefix; consuming in the readable and in the describe-only group; creating a topic;
creating and describing ACLs; listing the scenario's topics; asking Metadata for a topic she may not
describe. And the ACLs as admin's DescribeAcls lists them.

``authorized_operations_with_acls`` (KIP-430): as ``User:admin``, topics and ACLs for ``User:bob`` (Read
and Describe on one topic, Write on a prefix, Describe on one group, Read on another, nothing on the
cluster) and one group made to exist by a committed offset; then what confluent-kafka's ``describe_topics``,
``describe_cluster`` and ``describe_consumer_groups`` with ``include_authorized_operations`` tell bob and
admin (a super user: every supported operation) of them and of a topic and a group without ACLs.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cluster.user_credential_store import UserCredentialStore
from broker.network.scram_credential import ScramCredential, ScramMechanism
from lumber.dev.kafka_server import KafkaCluster
from lumber.dev.process import LOOPBACK, free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.conformance.authorized_operations import (
    EVERY_CLUSTER_OPERATION,
    EVERY_GROUP_OPERATION,
    EVERY_TOPIC_OPERATION,
    commit_offset,
    described_operations,
)
from tests.conformance.clients import error_name
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KafkaResourceType
    from kafka.errors import KafkaError as KafkaPythonError

pytestmark = [pytest.mark.interop, pytest.mark.zookeeper]

PASSWORDS = {
    "admin": "conformance-admin-Pa55",
    "alice": "conformance-alice-Pa55",
    "bob": "conformance-bob-Pa55",
}


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-acl"), size=1)
    [node] = cluster.nodes
    sasl_port = free_port()
    node.settings = {
        "listeners": f"PLAINTEXT://{LOOPBACK}:{node.port},CONTROLLER://{LOOPBACK}:{node.controller_port},"
        f"SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://{node.address},SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    }
    node.format_args = tuple(
        arg
        for user, password in PASSWORDS.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")
    )
    cluster.start()
    try:
        yield Target("kafka", f"{LOOPBACK}:{sasl_port}", (node.data_dir,))
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def secure_lumber(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    cluster = BrokerCluster(
        make_chroot(zookeeper_server.connect, "conformance-acls"), tmp_path_factory.mktemp("lumber-acl")
    )
    users = UserCredentialStore(cluster.zk)
    for user, password in PASSWORDS.items():
        users.upsert(
            user,
            {ScramMechanism.SCRAM_SHA_512: ScramCredential.generate(password, ScramMechanism.SCRAM_SHA_512)},
        )
    plain, sasl_port = free_port(), free_port()
    try:
        cluster.add_broker(
            {
                "listeners": [f"PLAINTEXT://{LOOPBACK}:{plain}", f"SASL_PLAINTEXT://{LOOPBACK}:{sasl_port}"],
                "sasl_enabled_mechanisms": ["SCRAM-SHA-512"],
                "authorizer": "acl",
                "super_users": ["User:ANONYMOUS", "User:admin"],
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                "group_initial_rebalance_delay_ms": 0,
            },
            port=plain,
        )
        yield Target("lumber", f"{LOOPBACK}:{sasl_port}", tuple(b.log_dir for b in cluster.brokers))
    finally:
        cluster.stop()


def settings(target: Target, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": target.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
    }


def _binding(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    principal: str = "User:alice",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def _produce(config: dict[str, Any], topic: str) -> str | None:
    errors: list[str | None] = []
    producer = Producer({**config, "message.timeout.ms": 8000})
    producer.produce(
        topic,
        b"v",
        partition=0,
        on_delivery=lambda err, _m: errors.append(None if err is None else err.name()),
    )
    producer.flush(20)
    return errors[0] if errors else "no delivery report"


def _consume_error(config: dict[str, Any], topic: str, group: str) -> str | None:
    """The first error a subscribing consumer meets within 20 s (None: it got a record)."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            return None if error is None else str(error.name())
        return "nothing within 20 s"
    finally:
        consumer.close()


def _result(future: Any) -> str | None:
    try:
        future.result(30)
    except KafkaException as exc:
        return error_name(exc)
    return None


def _describe_acls_error(target: Target, user: str) -> str | None:
    """DescribeAcls through kafka-python (librdkafka drops the response's error and answers no ACLs)."""
    admin = KafkaAdminClient(
        bootstrap_servers=target.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=user,
        sasl_plain_password=PASSWORDS[user],
    )
    try:
        admin.describe_acls(
            ACLFilter(
                None,
                None,
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
            )
        )
    except KafkaPythonError as exc:
        return type(exc).__name__
    finally:
        admin.close()
    return None


def acl_denials(target: Target, topic: str) -> Transcript:
    admin = AdminClient(settings(target, "admin"))
    other, prefix = f"{topic}-other", f"{topic}-p-"
    denied_name = f"{prefix}denied"
    names = [topic, other, f"{prefix}ok", denied_name]
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=30).values():
        assert _result(future) is None
    bindings = [
        _binding(ResourceType.TOPIC, topic, AclOperation.WRITE),
        _binding(ResourceType.TOPIC, topic, AclOperation.READ),
        _binding(ResourceType.TOPIC, prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        _binding(ResourceType.TOPIC, denied_name, AclOperation.WRITE, AclPermissionType.DENY),
        _binding(ResourceType.GROUP, f"{topic}-ok", AclOperation.READ),
        _binding(ResourceType.GROUP, f"{topic}-describe-only", AclOperation.DESCRIBE),
    ]
    for future in admin.create_acls(bindings).values():
        assert _result(future) is None
    alice = settings(target, "alice")
    # the ACLs are in force once alice may write the topic (Kafka applies them from its metadata log)
    deadline = time.monotonic() + 30
    first = _produce(alice, topic)
    while first is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        first = _produce(alice, topic)
    alice_admin = AdminClient(alice)
    listed = alice_admin.list_topics(timeout=30)
    asked = alice_admin.list_topics(topic=other, timeout=30).topics[other]
    described = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            "User:alice",
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(30)
    return {
        "produce_allowed": first,
        "produce_no_acl": _produce(alice, other),
        "produce_prefixed": _produce(alice, f"{prefix}ok"),
        "produce_denied_under_prefix": _produce(alice, denied_name),
        "consume_readable_group": _consume_error(alice, topic, f"{topic}-ok"),
        "consume_describe_only_group": _consume_error(alice, topic, f"{topic}-describe-only"),
        "create_topic": _result(alice_admin.create_topics([NewTopic(f"{topic}-new", 1, 1)])[f"{topic}-new"]),
        "create_acls": _result(alice_admin.create_acls([bindings[0]])[bindings[0]]),
        "describe_acls": _describe_acls_error(target, "alice"),
        "listed_topics": sorted(t.replace(topic, "<topic>") for t in listed.topics if t.startswith(topic)),
        "metadata_of_undescribable": None if asked.error is None else str(asked.error.name()),
        "acls": sorted(str(b).replace(topic, "<topic>") for b in described),
    }


def test_acl_denials_match_kafkas(secure_kafka: Target, secure_lumber: Target) -> None:
    transcript = conform(acl_denials, (secure_kafka, secure_lumber))
    assert transcript["produce_allowed"] is None
    assert transcript["produce_no_acl"] == "TOPIC_AUTHORIZATION_FAILED"
    assert transcript["produce_denied_under_prefix"] == "TOPIC_AUTHORIZATION_FAILED"
    assert transcript["consume_describe_only_group"] == "GROUP_AUTHORIZATION_FAILED"
    assert transcript["create_acls"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert transcript["describe_acls"] == "ClusterAuthorizationFailedError"
    assert len(transcript["acls"]) == 6


def authorized_operations_with_acls(target: Target, topic: str) -> Transcript:
    admin_config = settings(target, "admin")
    admin = AdminClient(admin_config)
    prefixed, other = f"{topic}-p-x", f"{topic}-other"
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in (topic, prefixed, other)]).values():
        assert _result(future) is None
    described_group, readable_group = f"{topic}-described", f"{topic}-readable"
    bindings = [
        _binding(ResourceType.TOPIC, topic, AclOperation.READ, principal="User:bob"),
        _binding(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, principal="User:bob"),
        _binding(
            ResourceType.TOPIC,
            f"{topic}-p-",
            AclOperation.WRITE,
            pattern=ResourcePatternType.PREFIXED,
            principal="User:bob",
        ),
        _binding(ResourceType.GROUP, described_group, AclOperation.DESCRIBE, principal="User:bob"),
        _binding(ResourceType.GROUP, readable_group, AclOperation.READ, principal="User:bob"),
    ]
    for future in admin.create_acls(bindings).values():
        assert _result(future) is None
    commit_offset(admin_config, described_group, topic)
    bob = settings(target, "bob")
    # the ACLs are in force once bob may describe the topic (Kafka applies them from its metadata log)
    deadline = time.monotonic() + 30
    bob_admin = AdminClient(bob)
    while (refused := _result(bob_admin.describe_topics(TopicCollection([topic]))[topic])) is not None:
        assert time.monotonic() < deadline, (
            f"{target.name}: bob may not describe the topic after 30 s: {refused}"
        )
        time.sleep(0.2)
    rename = {
        name: name.replace(topic, "<topic>")
        for name in (topic, prefixed, other, described_group, readable_group, f"{topic}-no-acl")
    }
    topics, groups = [topic, prefixed, other], [described_group, readable_group, f"{topic}-no-acl"]
    return {
        "bob": described_operations(bob, topics, groups, rename),
        "admin": described_operations(admin_config, topics, groups, rename),
    }


def test_authorized_operations_with_acls_match_kafkas(secure_kafka: Target, secure_lumber: Target) -> None:
    transcript = conform(authorized_operations_with_acls, (secure_kafka, secure_lumber))
    bob = transcript["bob"]["asked"]
    assert bob["topics"] == {
        "<topic>": ["DESCRIBE", "READ"],
        "<topic>-other": "TOPIC_AUTHORIZATION_FAILED",
        "<topic>-p-x": ["DESCRIBE", "WRITE"],
    }
    assert bob["cluster"] is None  # 0 without Describe on the cluster: librdkafka reports no list
    assert bob["groups"] == {
        "<topic>-described": ["DESCRIBE"],
        "<topic>-no-acl": "GROUP_AUTHORIZATION_FAILED",
        "<topic>-readable": ["DESCRIBE", "READ"],  # no such group (Dead): its ACLs still answer
    }
    admin = transcript["admin"]["asked"]
    assert admin["topics"]["<topic>"] == EVERY_TOPIC_OPERATION
    assert admin["cluster"] == EVERY_CLUSTER_OPERATION
    assert admin["groups"]["<topic>-described"] == EVERY_GROUP_OPERATION
