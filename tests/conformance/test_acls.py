"""ACL denials on Kafka and on Lumber, both with SCRAM users and an authorizer: the same error codes for
the same refusals.

Both run on the session's SASL_SSL brokers (``sasl_ssl_brokers``, :mod:`tests.conformance.secure_targets`:
one Kafka KRaft node and one Lumber broker, SCRAM-SHA-512 users made by the storage tool's ``--add-scram``
and by the store ``lumber users`` uses, Kafka's ``StandardAuthorizer`` and Lumber's ``authorizer = "acl"``,
``User:ANONYMOUS`` and ``User:admin`` super users). Each scenario grants a user of its own that no other
scenario grants anything (``carol``, ``dave``) and names its topics and groups after its topic, so the
other scenarios' ACLs on those brokers do not reach its transcript.

``acl_denials``: as ``User:admin``, create the scenario's topics and ACLs for ``User:carol`` (Write and Read
on the topic, Write on a prefix with a Deny of one name under it, Read on one group, Describe only on
another); then, as carol, the outcome of: producing to the topic, to a topic without ACLs, to the denied
name under the prefix; consuming in the readable and in the describe-only group; creating a topic;
creating and describing ACLs; listing the scenario's topics; asking Metadata for a topic she may not
describe. And the ACLs as admin's DescribeAcls lists them.

``authorized_operations_with_acls`` (KIP-430): as ``User:admin``, topics and ACLs for ``User:dave`` (Read
and Describe on one topic, Write on a prefix, Describe on one group, Read on another, nothing on the
cluster) and one group made to exist by a committed offset; then what confluent-kafka's ``describe_topics``,
``describe_cluster`` and ``describe_consumer_groups`` with ``include_authorized_operations`` tell dave and
admin (a super user: every supported operation) of them and of a topic and a group without ACLs.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from tests.conformance.authorized_operations import (
    EVERY_CLUSTER_OPERATION,
    EVERY_GROUP_OPERATION,
    EVERY_TOPIC_OPERATION,
    commit_offset,
    described_operations,
)
from tests.conformance.clients import error_name
from tests.conformance.conformance import Transcript, conform
from tests.conformance.secure_targets import SecureBroker, as_user, binding
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
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


@pytest.fixture
def admins(sasl_ssl_brokers: tuple[SecureBroker, SecureBroker]) -> tuple[Target, Target]:
    """Kafka's and Lumber's SASL_SSL brokers as ``admin`` (Kafka first)."""
    kafka, lumber = sasl_ssl_brokers
    return kafka.target("admin"), lumber.target("admin")


def settings(target: Target, user: str) -> dict[str, Any]:
    """confluent-kafka's settings of ``user`` on ``target``."""
    return as_user(target, user).client_config


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
    admin = KafkaAdminClient(**as_user(target, user).kafka_python_config)
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
    principal = "User:carol"
    bindings = [
        binding(ResourceType.TOPIC, topic, AclOperation.WRITE, principal),
        binding(ResourceType.TOPIC, topic, AclOperation.READ, principal),
        binding(
            ResourceType.TOPIC, prefix, AclOperation.WRITE, principal, pattern=ResourcePatternType.PREFIXED
        ),
        binding(
            ResourceType.TOPIC, denied_name, AclOperation.WRITE, principal, permission=AclPermissionType.DENY
        ),
        binding(ResourceType.GROUP, f"{topic}-ok", AclOperation.READ, principal),
        binding(ResourceType.GROUP, f"{topic}-describe-only", AclOperation.DESCRIBE, principal),
    ]
    for future in admin.create_acls(bindings).values():
        assert _result(future) is None
    carol = settings(target, "carol")
    # the ACLs are in force once carol may write the topic (Kafka applies them from its metadata log)
    deadline = time.monotonic() + 30
    first = _produce(carol, topic)
    while first is not None and time.monotonic() < deadline:
        time.sleep(0.2)
        first = _produce(carol, topic)
    carol_admin = AdminClient(carol)
    listed = carol_admin.list_topics(timeout=30)
    asked = carol_admin.list_topics(topic=other, timeout=30).topics[other]
    described = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            principal,
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(30)
    return {
        "produce_allowed": first,
        "produce_no_acl": _produce(carol, other),
        "produce_prefixed": _produce(carol, f"{prefix}ok"),
        "produce_denied_under_prefix": _produce(carol, denied_name),
        "consume_readable_group": _consume_error(carol, topic, f"{topic}-ok"),
        "consume_describe_only_group": _consume_error(carol, topic, f"{topic}-describe-only"),
        "create_topic": _result(carol_admin.create_topics([NewTopic(f"{topic}-new", 1, 1)])[f"{topic}-new"]),
        "create_acls": _result(carol_admin.create_acls([bindings[0]])[bindings[0]]),
        "describe_acls": _describe_acls_error(target, "carol"),
        "listed_topics": sorted(t.replace(topic, "<topic>") for t in listed.topics if t.startswith(topic)),
        "metadata_of_undescribable": None if asked.error is None else str(asked.error.name()),
        "acls": sorted(str(b).replace(topic, "<topic>") for b in described),
    }


def test_acl_denials_match_kafkas(admins: tuple[Target, Target]) -> None:
    transcript = conform(acl_denials, admins)
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
    principal = "User:dave"
    bindings = [
        binding(ResourceType.TOPIC, topic, AclOperation.READ, principal),
        binding(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, principal),
        binding(
            ResourceType.TOPIC,
            f"{topic}-p-",
            AclOperation.WRITE,
            principal,
            pattern=ResourcePatternType.PREFIXED,
        ),
        binding(ResourceType.GROUP, described_group, AclOperation.DESCRIBE, principal),
        binding(ResourceType.GROUP, readable_group, AclOperation.READ, principal),
    ]
    for future in admin.create_acls(bindings).values():
        assert _result(future) is None
    commit_offset(admin_config, described_group, topic)
    dave = settings(target, "dave")
    # the ACLs are in force once dave may describe the topic (Kafka applies them from its metadata log)
    deadline = time.monotonic() + 30
    dave_admin = AdminClient(dave)
    while (refused := _result(dave_admin.describe_topics(TopicCollection([topic]))[topic])) is not None:
        assert time.monotonic() < deadline, (
            f"{target.name}: dave may not describe the topic after 30 s: {refused}"
        )
        time.sleep(0.2)
    rename = {
        name: name.replace(topic, "<topic>")
        for name in (topic, prefixed, other, described_group, readable_group, f"{topic}-no-acl")
    }
    topics, groups = [topic, prefixed, other], [described_group, readable_group, f"{topic}-no-acl"]
    return {
        "dave": described_operations(dave, topics, groups, rename),
        "admin": described_operations(admin_config, topics, groups, rename),
    }


def test_authorized_operations_with_acls_match_kafkas(admins: tuple[Target, Target]) -> None:
    transcript = conform(authorized_operations_with_acls, admins)
    dave = transcript["dave"]["asked"]
    assert dave["topics"] == {
        "<topic>": ["DESCRIBE", "READ"],
        "<topic>-other": "TOPIC_AUTHORIZATION_FAILED",
        "<topic>-p-x": ["DESCRIBE", "WRITE"],
    }
    assert dave["cluster"] is None  # 0 without Describe on the cluster: librdkafka reports no list
    assert dave["groups"] == {
        "<topic>-described": ["DESCRIBE"],
        "<topic>-no-acl": "GROUP_AUTHORIZATION_FAILED",
        "<topic>-readable": ["DESCRIBE", "READ"],  # no such group (Dead): its ACLs still answer
    }
    admin = transcript["admin"]["asked"]
    assert admin["topics"]["<topic>"] == EVERY_TOPIC_OPERATION
    assert admin["cluster"] == EVERY_CLUSTER_OPERATION
    assert admin["groups"]["<topic>-described"] == EVERY_GROUP_OPERATION
