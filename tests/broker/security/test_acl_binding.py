"""ACL bindings and filters (broker/security/acl_binding.py): Kafka's names in text, the checks of what may
be stored, and the filters' matching (ANY, MATCH, exact names), each with an exact expectation."""

from __future__ import annotations

import pytest

from broker.security.acl_binding import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.errors import InvalidAclError

TOPIC = ResourceType.TOPIC
ENTRY = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Read", AclOperation.READ),
        ("read", AclOperation.READ),
        ("DESCRIBE_CONFIGS", AclOperation.DESCRIBE_CONFIGS),
        ("describe-configs", AclOperation.DESCRIBE_CONFIGS),
        ("DescribeConfigs", AclOperation.DESCRIBE_CONFIGS),
        ("idempotent_write", AclOperation.IDEMPOTENT_WRITE),
    ],
)
def test_operations_parse_from_kafka_and_snake_names(text: str, expected: AclOperation) -> None:
    assert AclOperation.parse(text) is expected


def test_names_in_text_are_kafkas() -> None:
    assert AclOperation.CLUSTER_ACTION.title == "ClusterAction"
    assert ResourceType.TRANSACTIONAL_ID.title == "TransactionalId"
    assert AclPermissionType.ALLOW.title == "Allow"
    with pytest.raises(InvalidAclError, match=r"AclOperation 'Fly' is not one of All, Read, Write"):
        AclOperation.parse("Fly")


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (AclBinding(ResourcePattern(ResourceType.ANY, "t"), ENTRY), "resource type Any cannot be stored"),
        (AclBinding(ResourcePattern(TOPIC, "t", PatternType.MATCH), ENTRY), "pattern type Match cannot"),
        (AclBinding(ResourcePattern(TOPIC, ""), ENTRY), "the resource name is empty"),
        (AclBinding(ResourcePattern(ResourceType.CLUSTER, "c"), ENTRY), "the literal 'kafka-cluster'"),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t"),
                AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "principal 'alice' is not type:name",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t"),
                AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
            ),
            "operation Any cannot be stored",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t"),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY),
            ),
            "permission Any cannot be stored",
        ),
        (
            AclBinding(
                ResourcePattern(TOPIC, "t"),
                AccessControlEntry("User:a", "", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "the host is empty",
        ),
    ],
)
def test_bindings_that_cannot_be_stored(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAclError) as info:
        binding.check()
    assert message in str(info.value)


def test_the_cluster_binding_is_valid() -> None:
    binding = AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME), ENTRY)
    assert binding.check() is binding


PATTERNS = [
    ResourcePattern(TOPIC, "orders"),
    ResourcePattern(TOPIC, "*"),
    ResourcePattern(TOPIC, "ord", PatternType.PREFIXED),
    ResourcePattern(TOPIC, "orders", PatternType.PREFIXED),
    ResourcePattern(TOPIC, "x", PatternType.PREFIXED),
    ResourcePattern(ResourceType.GROUP, "orders"),
]


@pytest.mark.parametrize(
    ("acl_filter", "matched"),
    [
        (AclBindingFilter(), [0, 1, 2, 3, 4, 5]),
        (AclBindingFilter(resource_type=TOPIC), [0, 1, 2, 3, 4]),
        (AclBindingFilter(name="orders"), [0, 3, 5]),  # ANY: either type, the exact name
        (AclBindingFilter(name="orders", pattern_type=PatternType.LITERAL), [0, 5]),
        (AclBindingFilter(name="orders", pattern_type=PatternType.PREFIXED), [3]),
        (AclBindingFilter(resource_type=TOPIC, name="orders", pattern_type=PatternType.MATCH), [0, 1, 2, 3]),
        (AclBindingFilter(pattern_type=PatternType.PREFIXED), [2, 3, 4]),
    ],
)
def test_pattern_filters(acl_filter: AclBindingFilter, matched: list[int]) -> None:
    assert [i for i, p in enumerate(PATTERNS) if acl_filter.matches_pattern(p)] == matched


def test_entry_filters() -> None:
    deny = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
    assert AclBindingFilter().matches_entry(deny)
    assert AclBindingFilter(principal="User:bob", host="10.0.0.1").matches_entry(deny)
    assert not AclBindingFilter(principal="User:alice").matches_entry(deny)
    assert not AclBindingFilter(host="*").matches_entry(deny)  # a filter's host is exact, not a wildcard
    assert AclBindingFilter(
        operation=AclOperation.WRITE, permission_type=AclPermissionType.DENY
    ).matches_entry(deny)
    assert not AclBindingFilter(operation=AclOperation.ALL).matches_entry(deny)
    with pytest.raises(InvalidAclError, match="operation UNKNOWN"):
        AclBindingFilter(operation=AclOperation.UNKNOWN).check()
