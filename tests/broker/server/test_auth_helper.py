"""The authorized operations of a resource (broker/server/auth_helper.py, KIP-430): the exact bit fields
without an authorizer, for a super user, and for a principal with ACLs (implied DESCRIBE, deny beats allow,
the no-ACL rule, the cluster's DESCRIBE gate). The real ACL cache and authorizer, no broker."""

from __future__ import annotations

from broker.endpoint import SecurityProtocol
from broker.network.session import KafkaPrincipal, Session
from broker.security.acl_binding import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_cache import AclCache
from broker.server.auth_helper import AuthHelper
from broker.server.authorizer import AclAuthorizer

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER

ALICE = Session(KafkaPrincipal.user("alice"), "SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, "10.0.0.1")
ADMIN = Session(KafkaPrincipal.user("admin"), "SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, "10.0.0.2")


def bits(*operations: AclOperation) -> int:
    return sum(1 << int(operation) for operation in set(operations))


EVERY_TOPIC_OPERATION = bits(
    Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS
)
EVERY_GROUP_OPERATION = bits(Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
EVERY_CLUSTER_OPERATION = bits(
    Op.CREATE,
    Op.ALTER,
    Op.DESCRIBE,
    Op.CLUSTER_ACTION,
    Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
    Op.IDEMPOTENT_WRITE,
)


def helper(
    *bindings: tuple[ResourceType, str, PatternType, AclOperation, AclPermissionType], **kw: bool
) -> AuthHelper:
    acls = AclCache()
    for resource_type, name, pattern_type, operation, permission in bindings:
        pattern = ResourcePattern(resource_type, name, pattern_type)
        entry = AccessControlEntry("User:alice", "*", operation, permission)
        acls = acls.with_resource(pattern, acls.entries(pattern) | {entry})
    return AuthHelper(AclAuthorizer(acls=lambda: acls, super_users=["User:admin"], **kw))


def test_without_an_authorizer_every_supported_operation() -> None:
    auth = AuthHelper(None)
    assert auth.authorized_operations(ALICE, TOPIC, "t") == EVERY_TOPIC_OPERATION == 0b1101_1111_1000
    assert auth.authorized_operations(ALICE, GROUP, "g") == EVERY_GROUP_OPERATION == 0b1101_0100_1000
    assert auth.cluster_authorized_operations(ALICE) == EVERY_CLUSTER_OPERATION == 0b1_1111_1010_0000
    assert auth.authorized_operations(ALICE, ResourceType.TRANSACTIONAL_ID, "x") == bits(
        Op.WRITE, Op.DESCRIBE
    )


def test_a_super_user_gets_every_supported_operation() -> None:
    auth = helper((TOPIC, "t", PatternType.LITERAL, Op.READ, ALLOW))
    assert auth.authorized_operations(ADMIN, TOPIC, "t") == EVERY_TOPIC_OPERATION
    assert auth.authorized_operations(ADMIN, GROUP, "g") == EVERY_GROUP_OPERATION
    assert auth.cluster_authorized_operations(ADMIN) == EVERY_CLUSTER_OPERATION


def test_a_principal_gets_what_its_acls_allow() -> None:
    auth = helper(
        (TOPIC, "t", PatternType.LITERAL, Op.READ, ALLOW),
        (TOPIC, "t", PatternType.LITERAL, Op.DESCRIBE, ALLOW),
        (TOPIC, "w-", PatternType.PREFIXED, Op.WRITE, ALLOW),  # WRITE implies DESCRIBE
        (TOPIC, "w-x", PatternType.LITERAL, Op.DESCRIBE, DENY),  # deny beats the implied allow
        (TOPIC, "cfg", PatternType.LITERAL, Op.ALTER_CONFIGS, ALLOW),  # implies DESCRIBE_CONFIGS
        (TOPIC, "all", PatternType.LITERAL, Op.ALL, ALLOW),
        (GROUP, "g", PatternType.LITERAL, Op.DESCRIBE, ALLOW),
    )
    assert auth.authorized_operations(ALICE, TOPIC, "t") == bits(Op.READ, Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, TOPIC, "w-1") == bits(Op.WRITE, Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, TOPIC, "w-x") == bits(Op.WRITE)
    assert auth.authorized_operations(ALICE, TOPIC, "cfg") == bits(Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
    assert auth.authorized_operations(ALICE, TOPIC, "all") == EVERY_TOPIC_OPERATION
    assert auth.authorized_operations(ALICE, TOPIC, "none") == 0
    assert auth.authorized_operations(ALICE, GROUP, "g") == bits(Op.DESCRIBE)
    assert auth.cluster_authorized_operations(ALICE) == 0  # no DESCRIBE on the cluster


def test_the_cluster_needs_describe_before_its_operations_are_told() -> None:
    create_only = helper((CLUSTER, CLUSTER_NAME, PatternType.LITERAL, Op.CREATE, ALLOW))
    assert create_only.authorized_operations(ALICE, CLUSTER, CLUSTER_NAME) == bits(Op.CREATE)
    assert create_only.cluster_authorized_operations(ALICE) == 0
    described = helper(
        (CLUSTER, CLUSTER_NAME, PatternType.LITERAL, Op.CREATE, ALLOW),
        (CLUSTER, CLUSTER_NAME, PatternType.LITERAL, Op.DESCRIBE, ALLOW),
    )
    assert described.cluster_authorized_operations(ALICE) == bits(Op.CREATE, Op.DESCRIBE)


def test_no_acl_found_follows_allow_everyone_if_no_acl_found() -> None:
    auth = helper((TOPIC, "t", PatternType.LITERAL, Op.READ, ALLOW), allow_everyone_if_no_acl_found=True)
    assert auth.authorized_operations(ALICE, TOPIC, "open") == EVERY_TOPIC_OPERATION
    assert auth.authorized_operations(ALICE, TOPIC, "t") == bits(Op.READ, Op.DESCRIBE)
    assert auth.cluster_authorized_operations(ALICE) == EVERY_CLUSTER_OPERATION
