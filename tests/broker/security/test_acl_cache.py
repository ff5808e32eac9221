"""The ACL matching (broker/security/acl_cache.py), each rule with exact expectations: literal, ``*`` and
prefixed patterns, ``User:*``, hosts, implied operations (for ALLOW only), deny beats allow, the no-ACL
answer, and ``authorize_by_resource_type``."""

from __future__ import annotations

import pytest

from broker.security.acl_binding import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_cache import AclCache, Match

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation


def cache(
    *bindings: tuple[ResourceType, str, PatternType, str, str, AclOperation, AclPermissionType],
) -> AclCache:
    built = AclCache()
    for resource_type, name, pattern_type, principal, host, operation, permission in bindings:
        pattern = ResourcePattern(resource_type, name, pattern_type)
        entry = AccessControlEntry(principal, host, operation, permission)
        built = built.with_resource(pattern, built.entries(pattern) | {entry})
    return built


def test_no_acl_for_the_resource_is_its_own_answer() -> None:
    acls = cache((TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, ALLOW))
    assert acls.authorize("User:bob", "10.0.0.1", Op.WRITE, TOPIC, "b") is Match.NO_ACL
    # an ACL for someone else on the resource: refused, not "no ACL"
    assert acls.authorize("User:bob", "10.0.0.1", Op.WRITE, TOPIC, "a") is Match.DENY
    assert acls.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, "a") is Match.ALLOW
    assert acls.authorize("User:alice", "10.0.0.1", Op.WRITE, GROUP, "a") is Match.NO_ACL


def test_literal_wildcard_and_prefixed_patterns() -> None:
    acls = cache(
        (TOPIC, "orders-", PREFIXED, "User:alice", "*", Op.READ, ALLOW),
        (TOPIC, "*", LITERAL, "User:bob", "*", Op.READ, ALLOW),
    )
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu") is Match.ALLOW
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "orders-") is Match.ALLOW
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "orders") is Match.DENY  # bob's * applies
    assert acls.authorize("User:bob", "h", Op.READ, TOPIC, "anything") is Match.ALLOW
    assert acls.authorize("User:bob", "h", Op.READ, GROUP, "anything") is Match.NO_ACL


def test_a_prefix_is_not_a_pattern_of_characters() -> None:
    acls = cache((TOPIC, "a*", PREFIXED, "User:alice", "*", Op.READ, ALLOW))
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "a*b") is Match.ALLOW
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "ab") is Match.NO_ACL


def test_wildcard_principal_and_hosts() -> None:
    acls = cache(
        (TOPIC, "t", LITERAL, "User:*", "10.0.0.1", Op.WRITE, ALLOW),
    )
    assert acls.authorize("User:carol", "10.0.0.1", Op.WRITE, TOPIC, "t") is Match.ALLOW
    assert acls.authorize("User:carol", "10.0.0.2", Op.WRITE, TOPIC, "t") is Match.DENY
    # a principal of another type is not matched by User:*
    assert acls.authorize("Group:ops", "10.0.0.1", Op.WRITE, TOPIC, "t") is Match.DENY


@pytest.mark.parametrize(
    ("granted", "asked", "expected"),
    [
        (Op.READ, Op.DESCRIBE, Match.ALLOW),
        (Op.WRITE, Op.DESCRIBE, Match.ALLOW),
        (Op.DELETE, Op.DESCRIBE, Match.ALLOW),
        (Op.ALTER, Op.DESCRIBE, Match.ALLOW),
        (Op.CREATE, Op.DESCRIBE, Match.DENY),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Match.ALLOW),
        (Op.ALTER_CONFIGS, Op.DESCRIBE, Match.DENY),
        (Op.DESCRIBE, Op.READ, Match.DENY),
        (Op.ALL, Op.IDEMPOTENT_WRITE, Match.ALLOW),
        (Op.READ, Op.WRITE, Match.DENY),
    ],
)
def test_implied_operations(granted: AclOperation, asked: AclOperation, expected: Match) -> None:
    acls = cache((TOPIC, "t", LITERAL, "User:alice", "*", granted, ALLOW))
    assert acls.authorize("User:alice", "h", asked, TOPIC, "t") is expected


def test_a_deny_implies_nothing_and_beats_every_allow() -> None:
    acls = cache(
        (TOPIC, "t", LITERAL, "User:alice", "*", Op.ALL, ALLOW),
        (TOPIC, "t", LITERAL, "User:alice", "*", Op.READ, DENY),
    )
    assert acls.authorize("User:alice", "h", Op.READ, TOPIC, "t") is Match.DENY
    assert (
        acls.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t") is Match.ALLOW
    )  # DENY READ: not describe
    assert acls.authorize("User:alice", "h", Op.WRITE, TOPIC, "t") is Match.ALLOW
    # a deny through a prefix or User:* beats a literal allow
    acls = cache(
        (TOPIC, "pay-eu", LITERAL, "User:alice", "*", Op.WRITE, ALLOW),
        (TOPIC, "pay-", PREFIXED, "User:*", "*", Op.ALL, DENY),
    )
    assert acls.authorize("User:alice", "h", Op.WRITE, TOPIC, "pay-eu") is Match.DENY


def test_changes_make_new_caches() -> None:
    first = cache((TOPIC, "t", LITERAL, "User:alice", "*", Op.READ, ALLOW))
    pattern = ResourcePattern(TOPIC, "t", LITERAL)
    second = first.with_resource(pattern, ())
    assert len(first) == 1
    assert len(second) == 0
    assert second.patterns() == []
    assert first.authorize("User:alice", "h", Op.READ, TOPIC, "t") is Match.ALLOW
    assert second.authorize("User:alice", "h", Op.READ, TOPIC, "t") is Match.NO_ACL


@pytest.mark.parametrize(
    ("bindings", "expected"),
    [
        ([], False),
        ([(TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, ALLOW)], True),
        ([(TOPIC, "a", LITERAL, "User:alice", "*", Op.READ, ALLOW)], False),  # no implication here
        ([(TOPIC, "a", LITERAL, "User:alice", "*", Op.ALL, ALLOW)], True),
        (
            [
                (TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, ALLOW),
                (TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, DENY),
            ],
            False,
        ),
        (
            [
                (TOPIC, "ab", PREFIXED, "User:alice", "*", Op.WRITE, ALLOW),
                (TOPIC, "a", PREFIXED, "User:*", "*", Op.WRITE, DENY),
            ],
            False,
        ),
        (
            [
                (TOPIC, "a", PREFIXED, "User:alice", "*", Op.WRITE, ALLOW),
                (TOPIC, "ab", PREFIXED, "User:alice", "*", Op.WRITE, DENY),
            ],
            True,  # "ac..." may still be written
        ),
        (
            [
                (TOPIC, "*", LITERAL, "User:alice", "*", Op.WRITE, ALLOW),
                (TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, DENY),
            ],
            True,
        ),
        (
            [
                (TOPIC, "a", LITERAL, "User:alice", "*", Op.WRITE, ALLOW),
                (TOPIC, "*", LITERAL, "User:alice", "*", Op.WRITE, DENY),
            ],
            False,
        ),
        ([(GROUP, "a", LITERAL, "User:alice", "*", Op.WRITE, ALLOW)], False),
        ([(TOPIC, "a", LITERAL, "User:alice", "10.9.9.9", Op.WRITE, ALLOW)], False),
    ],
)
def test_authorize_by_resource_type(bindings: list, expected: bool) -> None:  # type: ignore[type-arg]
    acls = cache(*bindings)
    assert acls.authorize_by_resource_type("User:alice", "10.0.0.1", Op.WRITE, TOPIC) is expected
