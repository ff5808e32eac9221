"""The users of Lumber's HTTP servers: a text file of ``name:role:hash`` lines.

Format (UTF-8; blank lines and lines starting with ``#`` are ignored)::

    # lumber http-users add NAME --role admin|read --users-file PATH writes these
    alice:admin:scrypt$32768$8$1$<salt>$<key>
    prometheus:read:scrypt$32768$8$1$<salt>$<key>

``name`` is non-empty and has no ``:`` nor whitespace (HTTP Basic's user-id cannot hold a ``:``); ``role``
is ``read`` (see every page, scrape metrics) or ``admin`` (also the console's actions, such as resetting a
group's offsets); ``hash`` is a :class:`~broker.web.password_hash.PasswordHash`. A name appears once. The
file holds no password; it should still be readable by the server only (``http-users`` writes it 0600),
since a hash can be guessed at offline.

Reloading: :meth:`UsersFile.authenticate` looks at the file's modification time and size on each call and
reads it again when either changed, so users added or deleted apply at once without a restart. A file that
became malformed keeps the previous users in force, with an error logged once per change.

Cost: a scrypt check takes tens of milliseconds and a console page load sends its credentials with every
request, so a successful check is remembered (at most :data:`CACHE_ENTRIES`) under an HMAC of name and
password keyed by a random per-process key; the cache is emptied when the file changes. Failed checks are
not remembered (they are throttled per address by the caller).

Thread-safe: one lock guards the users and the cache; scrypt runs outside it.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import os
import re
import secrets
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from broker.web.errors import UsersFileError
from broker.web.password_hash import PasswordHash

logger = logging.getLogger(__name__)

CACHE_ENTRIES = 1024
_NAME = re.compile(r"[^:\s]+")


class Role(enum.Enum):
    """What an authenticated user may do: ``read`` sees, ``admin`` also acts."""

    READ = "read"
    ADMIN = "admin"


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    password_hash: PasswordHash


def check_name(name: str) -> str:
    """``name`` if it can be a user's name, else :class:`UsersFileError` saying why."""
    if not _NAME.fullmatch(name):
        raise UsersFileError(f"user name {name!r}: must be non-empty, without ':' or whitespace")
    return name


def parse_users(text: str, where: str) -> dict[str, User]:
    """The users of a file's text; :class:`UsersFileError` naming ``where`` and the line."""
    users: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(":")
        if len(fields) != 3:
            raise UsersFileError(
                f"{where}:{number}: expected name:role:hash, got {len(fields)} ':'-separated fields"
            )
        name, role, hashed = fields
        try:
            check_name(name)
        except UsersFileError as exc:
            raise UsersFileError(f"{where}:{number}: {exc}") from None
        try:
            found_role = Role(role)
        except ValueError:
            raise UsersFileError(
                f"{where}:{number}: user {name!r}: role {role!r}, expected one of read, admin"
            ) from None
        try:
            password_hash = PasswordHash.parse(hashed)
        except ValueError as exc:
            raise UsersFileError(f"{where}:{number}: user {name!r}: {exc}") from None
        if name in users:
            raise UsersFileError(f"{where}:{number}: user {name!r} appears twice")
        users[name] = User(name, found_role, password_hash)
    return users


def render_users(users: dict[str, User]) -> str:
    lines = ["# name:role:hash, written by `lumber http-users` (roles: read, admin)"]
    lines.extend(f"{u.name}:{u.role.value}:{u.password_hash.encode()}" for u in users.values())
    return "\n".join(lines) + "\n"


class UsersFile:
    """The users of one file, reloaded when it changes (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, User] = {}
        self._cache: dict[bytes, Role] = {}
        self._cache_key = secrets.token_bytes(32)
        self._reload(first=True)

    def users(self) -> dict[str, User]:
        self._reload()
        with self._lock:
            return dict(self._users)

    def authenticate(self, name: str, password: str) -> Role | None:
        """The user's role if ``password`` is theirs, else ``None``."""
        self._reload()
        token = hmac.new(self._cache_key, f"{name}\0{password}".encode(), hashlib.sha256).digest()
        with self._lock:
            cached = self._cache.get(token)
            user = self._users.get(name)
        if cached is not None:
            return cached
        if user is None or not user.password_hash.verify(password):
            return None
        with self._lock:
            if self._users.get(name) is user:  # not changed meanwhile
                if len(self._cache) >= CACHE_ENTRIES:
                    self._cache.clear()
                self._cache[token] = user.role
        return user.role

    def _reload(self, first: bool = False) -> None:
        try:
            status = self.path.stat()
        except OSError as exc:
            if first:
                raise UsersFileError(f"users file {str(self.path)!r}: {exc.strerror or exc}") from exc
            return  # keep the users in force; a deleted file is a mistake more often than a wish
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp == self._stamp:
            return
        try:
            users = parse_users(self.path.read_text(encoding="utf-8"), str(self.path))
        except (OSError, UnicodeDecodeError, UsersFileError) as exc:
            if first:
                raise UsersFileError(
                    str(exc) if isinstance(exc, UsersFileError) else f"{self.path}: {exc}"
                ) from exc
            with self._lock:
                self._stamp = stamp
            logger.error("%s; the previous users stay in force", exc)  # noqa: TRY400 - the line says it all
            return
        with self._lock:
            self._stamp = stamp
            self._users = users
            self._cache.clear()
        if not first:
            logger.info("users file %s reloaded: %d users", self.path, len(users))


def write_users(path: str | os.PathLike[str], users: dict[str, User]) -> None:
    """Replace the file at ``path`` with ``users`` atomically, readable by its owner only (0600)."""
    target = Path(path)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render_users(users))
            fh.flush()
            os.fsync(fh.fileno())
        Path(temporary).chmod(0o600)
        Path(temporary).replace(target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
