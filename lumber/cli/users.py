"""``lumber users add|delete|list``: the SASL users in ZooKeeper (Kafka's ``kafka-configs.sh --alter
--add-config SCRAM-SHA-512=[password=...] --entity-type users``).

    lumber users add alice --password-file alice.pass            SCRAM-SHA-256 and SCRAM-SHA-512
    LUMBER_PASSWORD=... lumber users add alice --password-env LUMBER_PASSWORD --mechanism SCRAM-SHA-512
    lumber users add alice                                       asks for the password (twice) on a terminal
    lumber users delete alice [--mechanism SCRAM-SHA-256]
    lumber users list [--json]

``add`` makes a new salted credential per mechanism (:mod:`broker.network.scram_credential`; ``--iterations``,
8192 by default, at least 4096) and writes it to ``/config/users/<name>`` (:mod:`broker.cluster.zk_paths`);
the password is read from a file (its first line), an environment variable, or the terminal, never from the
command line (where ``ps`` and ``/proc/<pid>/cmdline`` would show it), and is neither printed nor logged.
Brokers see a change at once (their watches); a connection already authenticated stays so. SASL/PLAIN logs
in against these same credentials. Exit codes: 0 done, 1 error (ZooKeeper), 2 bad input (a bad name, no
password, a missing file).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class BadInputError(Exception):
    """A user name, password source or option that cannot be used (the message says which)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("users", help="SASL users (SCRAM credentials in ZooKeeper)")
    sub = parser.add_subparsers(title="users commands", metavar="COMMAND", required=True)

    add = sub.add_parser("add", help="add a user, or give it a new password")
    add.add_argument("name", help="the user name (the principal is User:<name>)")
    source = add.add_mutually_exclusive_group()
    source.add_argument(
        "--password-file", metavar="PATH", help="read the password from this file's first line"
    )
    source.add_argument(
        "--password-env", metavar="VAR", help="read the password from this environment variable"
    )
    add.add_argument(
        "--mechanism",
        action="append",
        choices=_MECHANISMS,
        help="a mechanism to make a credential for (repeatable; default: both)",
    )
    add.add_argument("--iterations", type=int, default=8192, help="PBKDF2 iterations (at least 4096)")
    _common(add)
    add.set_defaults(handler=_run(_add))

    delete = sub.add_parser("delete", help="delete a user (or one mechanism's credential)")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=_MECHANISMS, help="only this mechanism")
    _common(delete)
    delete.set_defaults(handler=_run(_delete))

    listing = sub.add_parser("list", help="list the users and their mechanisms")
    _common(listing)
    listing.set_defaults(handler=_run(_list))


def _common(parser: argparse.ArgumentParser) -> None:
    add_cluster_options(parser, bootstrap=False)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _run(handler: Any) -> Any:
    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        from broker.cluster.errors import ClusterError
        from broker.cluster.user_credential_store import UserCredentialStore
        from lumber.cli.zookeeper_session import zookeeper_session

        if not args.debug:
            logging.getLogger("kazoo").setLevel(logging.ERROR)
        try:
            password = new_password(args) if handler is _add else ""
            with zookeeper_session(args, config) as client:
                code: int = handler(args, UserCredentialStore(client), password)
                return code
        except BadInputError as exc:
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE
        except ClusterError as exc:
            if "not a user name" not in str(exc):
                raise
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE

    return run


def new_password(args: argparse.Namespace) -> str:
    """The new password, from ``--password-file``, ``--password-env`` or the terminal (asked twice); never
    from the command line (see the module docstring). ``lumber http-users`` reads its passwords here too."""
    if args.password_file:
        path = Path(args.password_file)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"cannot read the password file {path}: {exc.__class__.__name__}") from None
        password = lines[0] if lines else ""
        where = f"the first line of {path}"
    elif args.password_env:
        password = os.environ.get(args.password_env, "")
        where = f"${args.password_env}"
    elif sys.stdin.isatty():
        import getpass

        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise BadInputError("the two passwords differ")
        where = "the terminal"
    else:
        raise BadInputError("give the password with --password-file PATH or --password-env VAR")
    if not password:
        raise BadInputError(f"the password from {where} is empty")
    return password


def _add(args: argparse.Namespace, store: Any, password: str) -> int:
    from broker.network.scram_credential import MIN_ITERATIONS, ScramCredential, ScramMechanism

    if args.iterations < MIN_ITERATIONS:
        raise BadInputError(f"--iterations {args.iterations}: at least {MIN_ITERATIONS}")
    mechanisms = [ScramMechanism.of(m) for m in (args.mechanism or _MECHANISMS)]
    store.upsert(args.name, {m: ScramCredential.generate(password, m, args.iterations) for m in mechanisms})
    names = [m.mechanism_name for m in mechanisms]
    if args.json:
        print(json.dumps({"user": args.name, "mechanisms": names, "iterations": args.iterations}))
    else:
        print(f"user {args.name!r}: credentials for {', '.join(names)} ({args.iterations} iterations)")
    return 0


def _delete(args: argparse.Namespace, store: Any, _password: str) -> int:
    from broker.network.scram_credential import ScramMechanism

    mechanisms = None if not args.mechanism else [ScramMechanism.of(m) for m in args.mechanism]
    removed = store.delete(args.name, mechanisms)
    if args.json:
        print(json.dumps({"user": args.name, "deleted": removed}))
    elif removed:
        print(f"user {args.name!r}: deleted the credentials for {', '.join(removed)}")
    else:
        print(f"user {args.name!r} has no such credentials; nothing deleted")
    return 0


def _list(args: argparse.Namespace, store: Any, _password: str) -> int:
    users = store.list_users()
    if args.json:
        print(json.dumps([{"user": u, "mechanisms": m} for u, m in users.items()]))
    elif not users:
        print("no users")
    else:
        for user, mechanisms in users.items():
            print(f"{user}\t{', '.join(mechanisms)}")
    return 0
