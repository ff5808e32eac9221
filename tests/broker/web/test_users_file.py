"""broker/web/users_file.py: name:role:hash lines; a malformed line named by file and number; a changed file
read again at the next check (users added and deleted without a restart); the file written 0600."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.web.errors import UsersFileError
from broker.web.password_hash import PasswordHash
from broker.web.users_file import Role, User, UsersFile, write_users


def _user(name: str, role: Role, password: str) -> User:
    return User(name, role, PasswordHash.make(password, n=2**10))


def test_roles_of_the_right_passwords_only(tmp_path: Path) -> None:
    path = tmp_path / "users"
    write_users(path, {"ann": _user("ann", Role.ADMIN, "a-pw"), "rob": _user("rob", Role.READ, "r-pw")})
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert "a-pw" not in text
    assert "r-pw" not in text
    users = UsersFile(path)
    assert users.authenticate("ann", "a-pw") is Role.ADMIN
    assert users.authenticate("ann", "a-pw") is Role.ADMIN  # from the cache
    assert users.authenticate("rob", "r-pw") is Role.READ
    assert users.authenticate("rob", "a-pw") is None
    assert users.authenticate("nobody", "a-pw") is None


def test_a_changed_file_is_read_again_and_the_cache_emptied(tmp_path: Path) -> None:
    path = tmp_path / "users"
    write_users(path, {"ann": _user("ann", Role.ADMIN, "old")})
    users = UsersFile(path)
    assert users.authenticate("ann", "old") is Role.ADMIN
    write_users(path, {"ann": _user("ann", Role.READ, "new"), "bob": _user("bob", Role.READ, "b")})
    os.utime(path, ns=(1, 1))  # a different stamp even within the file system's time granularity
    assert users.authenticate("ann", "old") is None  # not answered from the cache of the old file
    assert users.authenticate("ann", "new") is Role.READ
    assert users.authenticate("bob", "b") is Role.READ
    path.write_text("ann:admin\n")  # malformed: the users in force stay
    assert users.authenticate("bob", "b") is Role.READ


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("ann:admin", "users:2: expected name:role:hash, got 2"),
        (
            "ann:root:scrypt$1024$8$1$AAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA==",
            "users:2: user 'ann': role 'root'",
        ),
        ("ann:read:secret", "users:2: user 'ann': expected scrypt$n$r$p$salt$key"),
        (" :read:x", "users:2: user name ''"),
    ],
)
def test_a_malformed_line_is_named(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "users"
    path.write_text(f"# comment\n{line}\n")
    with pytest.raises(UsersFileError) as caught:
        UsersFile(path)
    assert says in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match=r"users file '.*nothing': No such file"):
        UsersFile(tmp_path / "nothing")


def test_a_name_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users"
    hashed = PasswordHash.make("x", n=2**10).encode()
    path.write_text(f"ann:read:{hashed}\nann:admin:{hashed}\n")
    with pytest.raises(UsersFileError, match="users:2: user 'ann' appears twice"):
        UsersFile(path)
