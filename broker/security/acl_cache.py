"""Every ACL of a cluster, indexed to answer "may this principal do this?" (Kafka's
``StandardAuthorizerData``, the matching half of its authorizer).

For one request to do *operation* on the resource (*type*, *name*), from principal *P* at *host*:

1. **Which bindings apply to the resource**: the LITERAL ones of exactly *name*, the LITERAL ``*`` of the
   type, and the PREFIXED ones whose prefix starts *name* (each prefix of *name* looked up: a dictionary
   read per character, whatever the number of ACLs).
2. **Which of them apply to the request**: principal *P* or ``User:*`` (the wildcard of *P*'s type), host
   *host* or ``*``, and the operation: ALL, or the operation itself, or, for an ALLOW binding only, one
   that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
   (A DENY of READ does not deny DESCRIBE, as in Kafka.)
3. **The answer** (:class:`Match`): DENY if any applying binding denies (deny beats allow), else ALLOW if
   any allows, else DENY when some binding exists for the resource (step 1 found one, for whoever), else
   NO_ACL: nobody wrote an ACL for the resource, and the authorizer's ``allow_everyone_if_no_acl_found``
   decides. Super users never get here (:mod:`broker.server.authorizer`).

:meth:`AclCache.authorize_by_resource_type` is Kafka's ``Authorizer.authorizeByResourceType``: may the
principal do the operation on *some* resource of a type (an idempotent producer with WRITE on any topic).

Immutable: a change makes a new cache (:meth:`AclCache.with_resource`), which its owner swaps in with one
assignment, so readers on any thread see one whole snapshot or the next, never half a change.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from broker.security.acl_binding import (
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

#: Operations an ALLOW binding grants besides its own (Kafka's IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS).
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = MappingProxyType(
    {
        AclOperation.DESCRIBE: frozenset(
            {
                AclOperation.DESCRIBE,
                AclOperation.READ,
                AclOperation.WRITE,
                AclOperation.DELETE,
                AclOperation.ALTER,
            }
        ),
        AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    }
)

Entries = frozenset[AccessControlEntry]


class Match(enum.Enum):
    """What the ACLs say of one request (see the module docstring, step 3)."""

    ALLOW = "allow"
    DENY = "deny"
    NO_ACL = "no ACL for the resource"


def wildcard_of(principal: str) -> str:
    """``User:*`` for ``User:alice``: the principal every one of its type matches."""
    kind, _, _ = principal.partition(":")
    return f"{kind}:{WILDCARD}"


def _grants(entry: AccessControlEntry, operation: AclOperation) -> bool:
    if entry.operation is AclOperation.ALL or entry.operation is operation:
        return True
    if entry.permission_type is AclPermissionType.ALLOW:
        implied = IMPLIED_BY.get(operation)
        return implied is not None and entry.operation in implied
    return False


class AclCache:
    """An immutable index of ACL bindings by resource pattern (see the module docstring)."""

    def __init__(self, acls: Mapping[ResourcePattern, Entries] | None = None) -> None:
        self._acls: dict[ResourcePattern, Entries] = {p: e for p, e in (acls or {}).items() if e}
        self._literal: dict[tuple[ResourceType, str], Entries] = {}
        self._prefixed: dict[tuple[ResourceType, str], Entries] = {}
        for pattern, entries in self._acls.items():
            index = self._literal if pattern.pattern_type is PatternType.LITERAL else self._prefixed
            index[(pattern.resource_type, pattern.name)] = entries

    def __len__(self) -> int:
        """The number of bindings."""
        return sum(len(e) for e in self._acls.values())

    def entries(self, pattern: ResourcePattern) -> Entries:
        """The entries bound to ``pattern`` (empty when none)."""
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        return sorted(self._acls)

    def with_resource(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> AclCache:
        """A cache like this one with ``pattern``'s entries replaced (none: the pattern dropped)."""
        acls = dict(self._acls)
        acls[pattern] = frozenset(entries)
        return AclCache(acls)

    def bindings(self, acl_filter: AclBindingFilter | None = None) -> Iterator[AclBinding]:
        """Every binding ``acl_filter`` matches (all without one), by pattern then entry."""
        for pattern in sorted(self._acls):
            if acl_filter is not None and not acl_filter.matches_pattern(pattern):
                continue
            for entry in sorted(self._acls[pattern]):
                if acl_filter is None or acl_filter.matches_entry(entry):
                    yield AclBinding(pattern, entry)

    def _applying(self, resource_type: ResourceType, name: str) -> Iterator[Entries]:
        """Step 1: the entries of every pattern that applies to the resource."""
        literal = self._literal.get((resource_type, name))
        if literal:
            yield literal
        if name != WILDCARD:
            wildcard = self._literal.get((resource_type, WILDCARD))
            if wildcard:
                yield wildcard
        prefixed = self._prefixed
        if prefixed:
            for end in range(1, len(name) + 1):
                found = prefixed.get((resource_type, name[:end]))
                if found:
                    yield found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> Match:
        """Steps 1-3 of the module docstring for one request."""
        principals = (principal, wildcard_of(principal))
        found_any = allowed = False
        for entries in self._applying(resource_type, name):
            found_any = True
            for entry in entries:
                if entry.principal not in principals or entry.host not in (host, WILDCARD):
                    continue
                if not _grants(entry, operation):
                    continue
                if entry.permission_type is AclPermissionType.DENY:
                    return Match.DENY
                allowed = True
        if allowed:
            return Match.ALLOW
        return Match.DENY if found_any else Match.NO_ACL

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of ``resource_type`` may exist that the principal may do ``operation`` on:
        an ALLOW (the operation or ALL, no implication) not undone by a DENY of the same literal name, a
        DENY of a prefix of it, or a DENY of ``*`` (Kafka's default ``authorizeByResourceType``)."""
        principals = (principal, wildcard_of(principal))
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for pattern, entries in self._acls.items():
            if pattern.resource_type is not resource_type:
                continue
            for entry in entries:
                if entry.principal not in principals or entry.host not in (host, WILDCARD):
                    continue
                if entry.operation is not operation and entry.operation is not AclOperation.ALL:
                    continue
                if entry.permission_type is AclPermissionType.DENY:
                    if pattern.pattern_type is PatternType.LITERAL:
                        if pattern.name == WILDCARD:
                            return False
                        deny_literal.add(pattern.name)
                    else:
                        deny_prefixed.add(pattern.name)
                else:
                    allow.append((pattern.pattern_type, pattern.name))
        if any(kind is PatternType.LITERAL and name == WILDCARD for kind, name in allow):
            return True
        for kind, name in allow:
            if kind is PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                return True
        return False
