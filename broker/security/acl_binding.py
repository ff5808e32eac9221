"""ACL bindings and the filters that find them (Kafka's ``AclBinding``, ``ResourcePattern``,
``AccessControlEntry`` and their ``*Filter`` twins).

An ACL binding says: *principal* from *host* is *allowed* (or *denied*) *operation* on the resources
*pattern* names::

    ResourcePattern(TOPIC, "orders-", PREFIXED)  +  AccessControlEntry("User:alice", "*", WRITE, ALLOW)

* **Resource types** (Kafka's codes, which the wire carries): TOPIC 2, GROUP 3, CLUSTER 4 (one resource,
  named ``kafka-cluster``), TRANSACTIONAL_ID 5. ANY (1) exists only in filters.
* **Pattern types**: LITERAL 3 (the name itself, or ``*``: every resource of the type) and PREFIXED 4 (every
  name that starts with it). A filter may also say ANY 1 (either type, the name exactly) or MATCH 2 (every
  pattern that would apply to the name: the literal name, the literal ``*`` and each prefix).
* **Operations**: ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
  DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12; ANY 1 in filters.
* **Permission types**: DENY 2, ALLOW 3; ANY 1 in filters.
* **Supported operations** (:data:`SUPPORTED_OPERATIONS`, Kafka's ``AclEntry.supportedOperations``): the
  operations that mean something on each resource type, the ones an answer of authorized operations (KIP-430)
  may hold: a topic READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS; a group
  READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS; the cluster CREATE, CLUSTER_ACTION,
  DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE; a transactional id DESCRIBE, WRITE.
* **Principal**: ``type:name`` (``User:alice``); ``User:*`` is every user. **Host**: an IP address or ``*``.

Names in text (the CLI, ZooKeeper's JSON) are Kafka's: ``Read``, ``DescribeConfigs``, ``ClusterAction``,
``Allow``, ``Topic``, ``TransactionalId``; parsing also takes ``describe_configs`` and ``DESCRIBE-CONFIGS``.
Value objects; thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Self

from broker.security.errors import InvalidAclError

#: The literal name that matches every resource of its type; also the wildcard host and user name.
WILDCARD = "*"
#: The one cluster resource's name (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


class _AclEnum(enum.IntEnum):
    """An enum of Kafka's ACL codes, named in text by Kafka's camel-case names."""

    @property
    def title(self) -> str:
        """Kafka's name in text (``DescribeConfigs``)."""
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> Self:
        key = text.strip().replace("-", "_").replace(" ", "_")
        for member in cls:
            if key.upper() == member.name or key == member.title or key.lower() == member.title.lower():
                return member
        names = ", ".join(m.title for m in cls if m.name not in ("UNKNOWN", "ANY", "MATCH"))
        raise InvalidAclError(f"{cls.__name__} {text!r} is not one of {names}")


class ResourceType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: The operations each concrete resource type supports (see the module docstring).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = MappingProxyType(
    {
        ResourceType.TOPIC: (
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        ),
        ResourceType.GROUP: (
            AclOperation.READ,
            AclOperation.DELETE,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        ),
        ResourceType.CLUSTER: (
            AclOperation.CREATE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
        ),
        ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    }
)


def operations_bit_field(operations: Iterable[AclOperation]) -> int:
    """``operations`` as the wire's 32-bit field of authorized operations: bit ``1 << code`` for each
    (Kafka's ``Utils.to32BitField``)."""
    field = 0
    for operation in operations:
        field |= 1 << operation
    return field


#: The resource types a binding may name (the wire's ANY and UNKNOWN are filters' and errors').
CONCRETE_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)


def check_principal(principal: str) -> str:
    """``principal`` if it is ``type:name``; :class:`InvalidAclError` naming it otherwise."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"principal {principal!r} is not type:name (e.g. User:alice, User:*)")
    return principal


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """Which resources a binding applies to: a type, a name and how the name matches."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.title}:{self.pattern_type.title}:{self.name}"

    def check(self) -> ResourcePattern:
        """This pattern if a binding may hold it; :class:`InvalidAclError` saying why not."""
        if self.resource_type not in CONCRETE_RESOURCE_TYPES:
            raise InvalidAclError(f"{self}: resource type {self.resource_type.title} cannot be stored")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAclError(f"{self}: pattern type {self.pattern_type.title} cannot be stored")
        if not self.name:
            raise InvalidAclError(f"{self}: the resource name is empty")
        if self.resource_type is ResourceType.CLUSTER and (
            self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL
        ):
            raise InvalidAclError(f"{self}: the cluster resource is the literal {CLUSTER_NAME!r}")
        return self


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return f"{self.principal} from {self.host}: {self.permission_type.title} {self.operation.title}"

    def check(self) -> AccessControlEntry:
        """This entry if a binding may hold it; :class:`InvalidAclError` saying why not."""
        check_principal(self.principal)
        if not self.host:
            raise InvalidAclError(f"{self}: the host is empty (use * for every host)")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAclError(f"{self}: operation {self.operation.title} cannot be stored")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAclError(f"{self}: permission {self.permission_type.title} cannot be stored")
        return self


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"{self.pattern}: {self.entry}"

    def check(self) -> AclBinding:
        """This binding if it may be stored; :class:`InvalidAclError` saying why not."""
        self.pattern.check()
        self.entry.check()
        return self


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls ask for: every field a value to equal, or a match-anything
    (``None`` names, ANY codes); ``pattern_type`` MATCH finds every pattern that applies to ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def check(self) -> AclBindingFilter:
        """This filter if it can match anything; :class:`InvalidAclError` saying why not."""
        for field, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission type", self.permission_type),
        ):
            if value.name == "UNKNOWN":
                raise InvalidAclError(f"ACL filter: {field} UNKNOWN ({int(value)}) matches nothing")
        if self.principal is not None:
            check_principal(self.principal)
        return self

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type is not pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:  # MATCH
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation is entry.operation)
            and (
                self.permission_type is AclPermissionType.ANY or self.permission_type is entry.permission_type
            )
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
