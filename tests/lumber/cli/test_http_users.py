"""``lumber http-users`` (lumber/cli/http_users.py) as a subprocess: add, replace, list, delete users of a
users file written 0600 with scrypt hashes; passwords from a file or a variable, never printed; bad input
exit 2 with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from broker.web.users_file import Role, UsersFile


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "http-users", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_add_replace_list_delete(tmp_path: Path) -> None:
    users = tmp_path / "http-users"
    (tmp_path / "ann.pass").write_text("ann-Secret-1\nignored second line\n")
    added = _run(
        "add",
        "ann",
        "--role",
        "admin",
        "--password-file",
        str(tmp_path / "ann.pass"),
        "--users-file",
        str(users),
    )
    assert (added.returncode, added.stdout, added.stderr) == (0, f"user 'ann': role admin, in {users}\n", "")
    added = _run(
        "add",
        "bob",
        "--role",
        "read",
        "--password-env",
        "PW",
        "--users-file",
        str(users),
        env={"PW": "bob-1"},
    )
    assert added.returncode == 0, added.stderr
    assert users.stat().st_mode & 0o777 == 0o600
    text = users.read_text()
    assert "ann-Secret-1" not in text
    assert "bob-1" not in text
    assert UsersFile(users).authenticate("ann", "ann-Secret-1") is Role.ADMIN
    assert UsersFile(users).authenticate("bob", "bob-1") is Role.READ

    replaced = _run(
        "add",
        "bob",
        "--role",
        "admin",
        "--password-env",
        "PW",
        "--users-file",
        str(users),
        env={"PW": "bob-2"},
    )
    assert replaced.returncode == 0, replaced.stderr
    assert UsersFile(users).authenticate("bob", "bob-1") is None
    assert UsersFile(users).authenticate("bob", "bob-2") is Role.ADMIN
    listed = _run("list", "--users-file", str(users), "--json")
    assert listed.stdout == '[{"user": "ann", "role": "admin"}, {"user": "bob", "role": "admin"}]\n'

    deleted = _run("delete", "bob", "--users-file", str(users))
    assert (deleted.returncode, deleted.stdout) == (0, f"user 'bob' deleted from {users}\n")
    again = _run("delete", "bob", "--users-file", str(users))
    assert (again.returncode, again.stdout) == (2, f"no user 'bob' in {users}\n")
    assert _run("list", "--users-file", str(users)).stdout == "ann\tadmin\n"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    users = tmp_path / "http-users"
    cases = [
        (
            ("add", "a:b", "--role", "read", "--password-env", "PW"),
            "user name 'a:b': must be non-empty, without ':' or whitespace",
        ),
        (("add", "ann", "--role", "read", "--password-env", "EMPTY"), "the password from $EMPTY is empty"),
        (
            ("add", "ann", "--role", "read"),
            "give the password with --password-file PATH or --password-env VAR",
        ),
    ]
    for args, says in cases:
        done = subprocess.run(
            [sys.executable, "-m", "lumber", "http-users", *args, "--users-file", str(users)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PW": "x", "EMPTY": ""},
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert (done.returncode, done.stderr) == (2, f"lumber: error: {says}\n"), args
    assert not users.exists()
    no_file = _run("list")
    assert (no_file.returncode, no_file.stderr) == (
        2,
        "lumber: error: no users file: give --users-file PATH or set [console] users_file\n",
    )
    users.write_text("ann:admin\n")
    malformed = _run("list", "--users-file", str(users))
    assert (malformed.returncode, malformed.stderr) == (
        2,
        f"lumber: error: {users}:1: expected name:role:hash, got 2 ':'-separated fields\n",
    )
