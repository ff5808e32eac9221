"""``lumber acls add|remove|list``: the brokers' ACLs in ZooKeeper (Kafka's ``kafka-acls.sh``, whose options
it keeps).

    lumber acls add --allow-principal User:alice --operation Write --operation Describe --topic orders
    lumber acls add --allow-principal User:etl --operation Read --topic ev- --resource-pattern-type prefixed
    lumber acls add --allow-principal User:etl --operation Read --group etl
    lumber acls add --deny-principal User:* --deny-host 10.0.0.9 --operation All --topic payments
    lumber acls add --allow-principal User:ops --operation Alter --cluster
    lumber acls remove --allow-principal User:alice --topic orders           every operation of alice's
    lumber acls list [--topic orders] [--principal User:alice] [--resource-pattern-type match] [--json]
    lumber acls zookeeper --secure                 the znodes' own ACLs (lumber/cli/zookeeper_acls.py)

Each ``add`` stores one binding per principal x host x operation x resource (``--operation`` defaults to All,
hosts to ``*``; ``--resource-pattern-type`` literal or prefixed). ``remove`` removes every binding matching
its options (an option left out matches anything; a resource is required, ``--resource-pattern-type`` any,
match, literal or prefixed, default literal). ``list`` prints every binding, or those of the named resources
(pattern type default any) and principal. Names are Kafka's: operations Read, Write, Create, Delete, Alter,
Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (``describe_configs`` works too).

Writes go straight to ZooKeeper (:class:`~broker.cluster.acl_store.AclStore`, Kafka's layout) with a change
notification; every broker follows within moments, no restart. The standard admin clients
(CreateAcls/DescribeAcls/DeleteAcls) reach the same ACLs through any broker. Exit codes: 0 done, 1 error
(ZooKeeper), 2 bad input (an unknown operation, no principal, no resource).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from lumber.cli import zookeeper_acls
from lumber.cli.cluster_options import add_cluster_options
from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2


class _BadInputError(Exception):
    """Options that name no valid ACL (the message says which)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("acls", help="ACLs of the brokers' authorizer (in ZooKeeper)")
    sub = parser.add_subparsers(title="acls commands", metavar="COMMAND", required=True)

    add = sub.add_parser("add", help="allow or deny principals operations on resources")
    _entry_options(add)
    _resource_options(add, ("literal", "prefixed"), "literal")
    _common(add)
    add.set_defaults(handler=_run(_add))

    remove = sub.add_parser("remove", help="remove the ACLs matching the options")
    _entry_options(remove)
    _resource_options(remove, ("any", "match", "literal", "prefixed"), "literal")
    _common(remove)
    remove.set_defaults(handler=_run(_remove))

    listing = sub.add_parser("list", help="list ACLs (all, or those of resources and a principal)")
    listing.add_argument("--principal", help="only this principal's ACLs (e.g. User:alice)")
    _resource_options(listing, ("any", "match", "literal", "prefixed"), "any")
    _common(listing)
    listing.set_defaults(handler=_run(_list))
    zookeeper_acls.register(sub)


def _entry_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-principal", action="append", default=[], metavar="P", help="e.g. User:alice")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="P", help="e.g. User:*")
    parser.add_argument("--allow-host", action="append", default=[], metavar="IP", help="default: *")
    parser.add_argument("--deny-host", action="append", default=[], metavar="IP", help="default: *")
    parser.add_argument(
        "--operation", action="append", default=[], metavar="OP", help="Read, Write, ... (repeatable)"
    )


def _resource_options(parser: argparse.ArgumentParser, patterns: tuple[str, ...], default: str) -> None:
    parser.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (or a prefix)")
    parser.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group")
    parser.add_argument(
        "--transactional-id", action="append", default=[], metavar="ID", help="a transactional id"
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    parser.add_argument(
        "--resource-pattern-type", choices=patterns, default=default, help=f"default: {default}"
    )


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the ACLs as JSON")


def _run(handler: Any) -> Any:
    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        from broker.cluster.acl_store import AclStore
        from broker.security.errors import InvalidAclError
        from lumber.cli.zookeeper_session import zookeeper_session

        if not args.debug:
            logging.getLogger("kazoo").setLevel(logging.ERROR)
        try:
            with zookeeper_session(args, config) as client:
                code: int = handler(args, AclStore(client))
                return code
        except (_BadInputError, InvalidAclError) as exc:
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


def _patterns(args: argparse.Namespace, *, required: bool) -> list[tuple[Any, str]]:
    """(resource type, name) of every resource the options name."""
    from broker.security.acl_binding import CLUSTER_NAME, ResourceType

    named = [
        *((ResourceType.TOPIC, n) for n in args.topic),
        *((ResourceType.GROUP, n) for n in args.group),
        *((ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id),
        *([(ResourceType.CLUSTER, CLUSTER_NAME)] if args.cluster else []),
    ]
    if required and not named:
        raise _BadInputError("name a resource: --topic, --group, --transactional-id or --cluster")
    return named


def _entries(args: argparse.Namespace, *, filtering: bool) -> list[tuple[str | None, str | None, Any, Any]]:
    """(principal, host, operation, permission) of every entry the options name; in a filter a missing
    principal, host or operation matches any."""
    from broker.security.acl_binding import AclOperation, AclPermissionType

    operations = [AclOperation.parse(op) for op in args.operation] or [
        AclOperation.ANY if filtering else AclOperation.ALL
    ]
    entries: list[tuple[str | None, str | None, Any, Any]] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in hosts or [None if filtering else "*"]:
                entries.extend((principal, host, op, permission) for op in operations)
    if not entries:
        if not filtering:
            raise _BadInputError("name a principal: --allow-principal or --deny-principal (e.g. User:alice)")
        entries = [(None, None, op, AclPermissionType.ANY) for op in operations]
    return entries


def _add(args: argparse.Namespace, store: Any) -> int:
    from broker.security.acl_binding import AccessControlEntry, AclBinding, PatternType, ResourcePattern

    pattern_type = PatternType.parse(args.resource_pattern_type)
    bindings = [
        AclBinding(
            ResourcePattern(kind, name, pattern_type), AccessControlEntry(p, h or "*", op, perm)
        ).check()
        for kind, name in _patterns(args, required=True)
        for p, h, op, perm in _entries(args, filtering=False)
        if p is not None
    ]
    store.add(bindings)
    _print(args, bindings, "added")
    return 0


def _remove(args: argparse.Namespace, store: Any) -> int:
    from broker.security.acl_binding import AclBindingFilter, PatternType

    pattern_type = PatternType.parse(args.resource_pattern_type)
    removed = []
    for kind, name in _patterns(args, required=True):
        for principal, host, operation, permission in _entries(args, filtering=True):
            removed.extend(
                store.remove(
                    AclBindingFilter(kind, name, pattern_type, principal, host, operation, permission)
                )
            )
    _print(args, removed, "removed")
    return 0


def _list(args: argparse.Namespace, store: Any) -> int:
    from broker.security.acl_binding import AclBindingFilter, PatternType

    cache = store.load()
    pattern_type = PatternType.parse(args.resource_pattern_type)
    resources = _patterns(args, required=False)
    filters = [AclBindingFilter(kind, name, pattern_type, args.principal) for kind, name in resources] or [
        AclBindingFilter(principal=args.principal)
    ]
    seen: set[Any] = set()
    found = []
    for acl_filter in filters:
        for binding in cache.bindings(acl_filter.check()):
            if binding not in seen:
                seen.add(binding)
                found.append(binding)
    _print(args, found, None)
    return 0


def _print(args: argparse.Namespace, bindings: list[Any], done: str | None) -> None:
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "resource_type": b.pattern.resource_type.title,
                        "name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type.title,
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": b.entry.operation.title,
                        "permission_type": b.entry.permission_type.title,
                    }
                    for b in bindings
                ]
            )
        )
        return
    if not bindings:
        print("no ACLs" if done is None else f"no ACLs {done}")
        return
    for b in bindings:
        line = f"{b.pattern}\t{b.entry.principal}\t{b.entry.host}\t{b.entry.permission_type.title}\t"
        print(line + b.entry.operation.title + ("" if done is None else f"\t({done})"))
