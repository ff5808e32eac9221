"""``lumber http-users add|delete|list``: the users of Lumber's HTTP servers (the console, the lag exporter,
the brokers' metrics), in a users file of ``name:role:hash`` lines (:mod:`broker.web.users_file`).

    lumber http-users add alice --role admin --password-file alice.pass     (--users-file PATH)
    PW=... lumber http-users add prometheus --role read --password-env PW
    lumber http-users add bob --role read                                   asks twice on a terminal
    lumber http-users delete bob
    lumber http-users list [--json]

The file is ``--users-file``, else ``[console] users_file``; ``add`` creates it (0600) and replaces a user's
role and password. Each password is stored as a salted scrypt hash (:mod:`broker.web.password_hash`); the
password is read from a file (its first line), an environment variable or the terminal, never from the
command line, and is neither printed nor logged. Servers read the file again when it changes: no restart.
Exit codes: 0 done, 2 bad input (a bad name, no password, no users file, a malformed file).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.web.errors import UsersFileError
from lumber.cli.users import BadInputError, new_password

if TYPE_CHECKING:
    from lumber.config import LumberConfig

BAD_INPUT_EXIT_CODE = 2
ROLES = ("read", "admin")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "http-users", help="users of the console, lag exporter and metrics (HTTP Basic, a users file)"
    )
    sub = parser.add_subparsers(title="http-users commands", metavar="COMMAND", required=True)
    add = sub.add_parser("add", help="add a user, or give one a new role and password")
    add.add_argument("name", help="the user name (no ':' nor whitespace)")
    add.add_argument("--role", choices=ROLES, required=True, help="read: see pages; admin: also act")
    source = add.add_mutually_exclusive_group()
    source.add_argument(
        "--password-file", metavar="PATH", help="read the password from this file's first line"
    )
    source.add_argument(
        "--password-env", metavar="VAR", help="read the password from this environment variable"
    )
    _common(add)
    add.set_defaults(handler=_run(_add))
    delete = sub.add_parser("delete", help="delete a user")
    delete.add_argument("name")
    _common(delete)
    delete.set_defaults(handler=_run(_delete))
    listing = sub.add_parser("list", help="list the users and their roles")
    _common(listing)
    listing.set_defaults(handler=_run(_list))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users-file", metavar="PATH", help="the users file (default: [console] users_file)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def _run(handler: Any) -> Any:
    def run(args: argparse.Namespace, config: LumberConfig) -> int:
        path = args.users_file or config.console.users_file
        if not path:
            print(
                "lumber: error: no users file: give --users-file PATH or set [console] users_file",
                file=sys.stderr,
            )
            return BAD_INPUT_EXIT_CODE
        try:
            code: int = handler(args, Path(path))
        except (BadInputError, UsersFileError) as exc:
            print(f"lumber: error: {exc}", file=sys.stderr)
            return BAD_INPUT_EXIT_CODE
        return code

    return run


def _read(path: Path) -> dict[str, Any]:
    from broker.web.users_file import parse_users

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read the users file {path}: {exc}") from None
    return dict(parse_users(text, str(path)))


def _add(args: argparse.Namespace, path: Path) -> int:
    from broker.web.password_hash import PasswordHash
    from broker.web.users_file import Role, User, check_name, write_users

    check_name(args.name)
    users = _read(path)
    password = new_password(args)
    users[args.name] = User(args.name, Role(args.role), PasswordHash.make(password))
    write_users(path, users)
    if args.json:
        print(json.dumps({"user": args.name, "role": args.role, "users_file": str(path)}))
    else:
        print(f"user {args.name!r}: role {args.role}, in {path}")
    return 0


def _delete(args: argparse.Namespace, path: Path) -> int:
    from broker.web.users_file import write_users

    users = _read(path)
    found = users.pop(args.name, None) is not None
    if found:
        write_users(path, users)
    if args.json:
        print(json.dumps({"user": args.name, "deleted": found}))
    else:
        print(f"user {args.name!r} deleted from {path}" if found else f"no user {args.name!r} in {path}")
    return 0 if found else BAD_INPUT_EXIT_CODE


def _list(args: argparse.Namespace, path: Path) -> int:
    users = _read(path)
    if args.json:
        print(json.dumps([{"user": u.name, "role": u.role.value} for u in users.values()]))
    elif not users:
        print("no users")
    else:
        for user in users.values():
            print(f"{user.name}\t{user.role.value}")
    return 0
