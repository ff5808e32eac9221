"""ACLs in ZooKeeper, Kafka's layout (Kafka's ``ZkAclStore``, ``AclAuthorizer``'s storage half): reading,
adding and removing them, and telling every broker (``lumber acls``, CreateAcls, DeleteAcls).

The znodes (relative to the chroot; :mod:`broker.cluster.zk_paths` points here)::

    /kafka-acl/<ResourceType>/<name>                      persistent, the LITERAL ACLs of one resource
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    persistent, the PREFIXED ACLs of one prefix
        {"acls": [{"host": "*", "operation": "Write", "permissionType": "Allow", "principal": "User:alice"}],
         "version": 1}
        <ResourceType> is Kafka's name (Topic, Group, Cluster, TransactionalId); the cluster's node is
        /kafka-acl/Cluster/kafka-cluster; a node is deleted with its last ACL.
    /kafka-acl-changes/acl_changes_<10-digit sequence>           persistent sequential, a LITERAL change
        Topic:orders                                             (Kafka's text: ResourceType:name)
    /kafka-acl-extended-changes/acl_changes_<sequence>           persistent sequential, a PREFIXED change
        {"name": "orders-", "patternType": "Prefixed", "resourceType": "Topic", "version": 1}

Writes (:meth:`AclStore.add`, :meth:`AclStore.remove`): each resource node is read and set at the version
read (created if absent, deleted at the version read when its last ACL goes), retried when another writer
came between, so two administrators changing one resource at once both keep their changes; then a change
notification naming the resource is created. Every broker's :class:`~broker.cluster.acl_watcher.AclWatcher`
sees the notification and reads that resource's node again; notifications older than 15 minutes are deleted
by the brokers (Kafka's ``ZkNodeChangeNotificationListener``). A name holding ``/`` has no node of its own:
refused (Kafka writes it and breaks; see docs/security.md).

Thread-safe (every operation is its own ZooKeeper transaction).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.errors import ClusterError, zookeeper_error
from broker.security.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.acl_cache import AclCache
from broker.security.errors import InvalidAclError

logger = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
PREFIXED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: How long a change notification stays (Kafka's ``ZkNodeChangeNotificationListener`` 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_VERSION = 1
_TRIES = 10


def acl_root(pattern_type: PatternType) -> str:
    return LITERAL_ACL_PATH if pattern_type is PatternType.LITERAL else PREFIXED_ACL_PATH


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type is PatternType.LITERAL else PREFIXED_CHANGES_PATH


def resource_path(pattern: ResourcePattern) -> str:
    """The node of ``pattern``'s ACLs; :class:`InvalidAclError` for a name no znode can have."""
    if "/" in pattern.name or pattern.name in (".", ".."):
        raise InvalidAclError(f"{pattern}: a resource name cannot hold '/' or be '.' or '..' (ZooKeeper)")
    return f"{acl_root(pattern.pattern_type)}/{pattern.resource_type.title}/{pattern.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "host": e.host,
            "operation": e.operation.title,
            "permissionType": e.permission_type.title,
            "principal": e.principal,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"acls": acls, "version": _VERSION}, sort_keys=True).encode()


def decode_entries(path: str, data: bytes) -> frozenset[AccessControlEntry]:
    """A resource node's ACLs; :class:`InvalidAclError` naming ``path`` and the bad entry."""
    try:
        value = json.loads(data.decode("utf-8")) if data else {"acls": []}
        return frozenset(
            AccessControlEntry(
                principal=str(acl["principal"]),
                host=str(acl["host"]),
                operation=AclOperation.parse(str(acl["operation"])),
                permission_type=AclPermissionType.parse(str(acl["permissionType"])),
            ).check()
            for acl in value["acls"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidAclError(f"{path}: not an ACL node ({exc})") from exc


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.title}:{pattern.name}".encode()
    change = {
        "name": pattern.name,
        "patternType": pattern.pattern_type.title,
        "resourceType": pattern.resource_type.title,
        "version": _VERSION,
    }
    return json.dumps(change, sort_keys=True).encode()


def decode_change(pattern_type: PatternType, path: str, data: bytes) -> ResourcePattern:
    """The resource a change notification names; :class:`InvalidAclError` naming ``path``."""
    text = data.decode("utf-8", "replace")
    if pattern_type is PatternType.LITERAL:
        kind, sep, name = text.partition(":")
        if not sep:
            raise InvalidAclError(f"{path}: {text!r} is not ResourceType:name")
        return ResourcePattern(ResourceType.parse(kind), name, PatternType.LITERAL)
    try:
        value: dict[str, Any] = json.loads(text)
        return ResourcePattern(
            ResourceType.parse(str(value["resourceType"])),
            str(value["name"]),
            PatternType.parse(str(value["patternType"])),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidAclError(f"{path}: not an ACL change notification ({exc})") from exc


class AclStore:
    """The ACL znodes through ``client`` (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def read(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """``pattern``'s ACLs as ZooKeeper has them now (empty: none)."""
        path = resource_path(pattern)
        try:
            data, _stat = self._client.get(path)
        except NoNodeError:
            return frozenset()
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
        return decode_entries(path, data)

    def load(self) -> AclCache:
        """Every ACL of the cluster (a node that does not decode is logged and left out)."""
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = acl_root(pattern_type)
            for kind in self._children(root):
                try:
                    resource_type = ResourceType.parse(kind)
                except InvalidAclError:
                    logger.warning(
                        "%s/%s: not a resource type Lumber knows; its ACLs are ignored", root, kind
                    )
                    continue
                for name in self._children(f"{root}/{kind}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        acls[pattern] = self.read(pattern)
                    except InvalidAclError as exc:
                        logger.warning("ACLs ignored: %s", exc)
        return AclCache(acls)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Store every binding (checked first: :class:`InvalidAclError` stores none); adding one that
        exists changes nothing."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            binding.check()
            resource_path(binding.pattern)
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda current, new=frozenset(entries): current | new)

    def remove(self, acl_filter: AclBindingFilter, cache: AclCache | None = None) -> list[AclBinding]:
        """Remove every binding ``acl_filter`` matches; the bindings removed. The patterns are found in
        ``cache`` when given (the broker's copy), else read from ZooKeeper."""
        acl_filter.check()
        patterns = (cache if cache is not None else self.load()).patterns()
        removed: list[AclBinding] = []
        for pattern in patterns:
            if not acl_filter.matches_pattern(pattern):
                continue
            gone: list[AccessControlEntry] = []

            def keep(
                current: frozenset[AccessControlEntry], gone: list[AccessControlEntry] = gone
            ) -> frozenset[AccessControlEntry]:
                gone.clear()
                gone.extend(sorted(e for e in current if acl_filter.matches_entry(e)))
                return current - frozenset(gone)

            self._update(pattern, keep)
            removed.extend(AclBinding(pattern, entry) for entry in gone)
        return removed

    def _update(self, pattern: ResourcePattern, change: Any) -> None:
        """Read ``pattern``'s node, apply ``change`` (current entries -> new entries), write it back at the
        version read, then notify; retried when another writer came between."""
        path = resource_path(pattern)
        try:
            for _ in range(_TRIES):
                try:
                    data, stat = self._client.get(path)
                except NoNodeError:
                    new = change(frozenset())
                    if not new:
                        return
                    try:
                        self._client.create(path, encode_entries(new), makepath=True)
                    except NodeExistsError:
                        continue
                    break
                current = decode_entries(path, data)
                new = change(current)
                if new == current:
                    return
                try:
                    if new:
                        self._client.set(path, encode_entries(new), stat.version)
                    else:
                        self._client.delete(path, stat.version)
                except (BadVersionError, NoNodeError, NotEmptyError):
                    continue
                break
            else:
                raise ClusterError(f"{path}: changed by another writer {_TRIES} times in a row; try again")
            self._client.create(
                f"{changes_path(pattern.pattern_type)}/{CHANGE_PREFIX}",
                encode_change(pattern),
                sequence=True,
                makepath=True,
            )
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("write", path, exc) from exc

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._client.get_children(path))
        except NoNodeError:
            return []
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", path, exc) from exc
