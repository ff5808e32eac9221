"""``lumber schemas serve|register|get|check|list``: run the Avro schema registry, and talk to it.

``serve`` runs the registry in the foreground on ``[registry] host:port`` (default 127.0.0.1:8081), stored in
the ZooKeeper of ``[zookeeper] connect``. The other commands are clients of ``[registry] url`` (or ``--url``).
Exit codes: 0 done, 1 error (message on stderr) or, for ``check``, the schema is incompatible.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.verbosity import serves
from schemas.client import SchemaRegistryClient
from schemas.errors import SchemaError

if TYPE_CHECKING:
    from lumber.config import LumberConfig

INCOMPATIBLE_EXIT_CODE = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schemas", help="run the Avro schema registry and register / inspect schemas"
    )
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    serve = sub.add_parser("serve", help="run the registry in the foreground (Ctrl-C or SIGTERM stops it)")
    serve.add_argument("--host", help="address to listen on (default: [registry] host)")
    serve.add_argument("--port", type=int, help="port to listen on (default: [registry] port)")
    add_cluster_options(serve, bootstrap=False)
    serve.set_defaults(handler=_serve)
    serves(serve)

    reg = sub.add_parser("register", help="register a schema file under a subject; print its id and version")
    reg.add_argument("subject")
    reg.add_argument("file", type=Path, metavar="FILE.avsc")
    _client_options(reg)
    reg.set_defaults(handler=_register)

    get = sub.add_parser("get", help="print a version of a subject (default: the latest)")
    get.add_argument("subject")
    get.add_argument("--version", default="latest", help="version number or 'latest' (default)")
    get.add_argument("--deleted", action="store_true", help="also find soft-deleted versions")
    _client_options(get)
    get.set_defaults(handler=_get)

    check = sub.add_parser(
        "check",
        help="test a schema file against a subject's compatibility level (registers nothing; exit 1 if "
        "incompatible)",
    )
    check.add_argument("subject")
    check.add_argument("file", type=Path, metavar="FILE.avsc")
    check.add_argument("--version", default="latest", help="version to test against (default: latest)")
    _client_options(check)
    check.set_defaults(handler=_check)

    listing = sub.add_parser("list", help="list the subjects")
    listing.add_argument("--deleted", action="store_true", help="include subjects that are soft-deleted")
    _client_options(listing)
    listing.set_defaults(handler=_list)


def _client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="registry URL (default: [registry] url)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _client(args: argparse.Namespace, config: LumberConfig) -> SchemaRegistryClient:
    if not args.debug:  # httpx logs each request at INFO: noise in a command's output
        logging.getLogger("httpx").setLevel(logging.WARNING)
    return SchemaRegistryClient.from_config(config.registry, url=args.url)


def _read_schema(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read the schema file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SchemaError(f"{path}: the schema file is not UTF-8: {exc}") from exc


def _serve(args: argparse.Namespace, config: LumberConfig) -> int:
    from schemas.registry.server import serve

    registry = config.registry
    if args.host is not None:
        registry = registry.replace(host=args.host)
    if args.port is not None:
        registry = registry.replace(port=args.port)
    serve(
        registry,
        args.zookeeper_connect or config.zookeeper.connect,
        session_timeout_ms=config.zookeeper.session_timeout_ms,
        connect_timeout_ms=config.zookeeper.connect_timeout_ms,
    )
    return 0


def _register(args: argparse.Namespace, config: LumberConfig) -> int:
    text = _read_schema(args.file)
    with _client(args, config) as client:
        schema_id = client.register(args.subject, text)
        found = client.lookup(args.subject, text)
    if args.json:
        print(json.dumps({"subject": found.subject, "version": found.version, "id": schema_id}))
    else:
        print(f"{args.file} is version {found.version} of subject {found.subject!r}, schema id {schema_id}")
    return 0


def _get(args: argparse.Namespace, config: LumberConfig) -> int:
    with _client(args, config) as client:
        found = client.get_version(args.subject, args.version, deleted=args.deleted)
    if args.json:
        print(json.dumps(found.to_json()))
    else:
        print(f"subject {found.subject!r} version {found.version}, schema id {found.schema_id}:")
        print(json.dumps(json.loads(found.schema), indent=2))
    return 0


def _check(args: argparse.Namespace, config: LumberConfig) -> int:
    text = _read_schema(args.file)
    with _client(args, config) as client:
        result = client.check_compatibility(args.subject, text, args.version)
        level = client.get_compatibility(args.subject, default_to_global=True)
    if args.json:
        print(
            json.dumps(
                {"is_compatible": result.is_compatible, "level": level, "messages": list(result.messages)}
            )
        )
    elif result.is_compatible:
        print(f"{args.file} is compatible with subject {args.subject!r} ({level})")
    else:
        print(f"{args.file} is NOT compatible with subject {args.subject!r} ({level}):")
        for message in result.messages:
            print(f"  - {message}")
    return 0 if result.is_compatible else INCOMPATIBLE_EXIT_CODE


def _list(args: argparse.Namespace, config: LumberConfig) -> int:
    with _client(args, config) as client:
        subjects = client.subjects(deleted=args.deleted)
    if args.json:
        print(json.dumps(subjects))
    elif not subjects:
        print("no subjects" + (" (not even soft-deleted ones)" if args.deleted else ""))
    else:
        for subject in subjects:
            print(subject)
    return 0
