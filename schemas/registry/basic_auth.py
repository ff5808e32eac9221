"""HTTP Basic authentication and two roles for the registry (Confluent's ``authentication.method=BASIC``
with a property-file login module).

The users file (``[registry] auth_users_file``, keep it mode 0600) is Jetty's ``PropertyFileLoginModule``
format, which Confluent's registry reads::

    # user: password,role
    admin: Adm1n-Pa55,admin
    reader: R3ad-Pa55,readonly

Two roles:

* ``readonly``: every ``GET``, and the ``POST`` requests that change nothing (looking a schema up under a
  subject, ``POST /subjects/{subject}``; checking compatibility, ``POST /compatibility/...``);
* ``admin``: everything, including registering, deleting and changing compatibility levels.

With a users file every request must authenticate (:class:`BasicAuthMiddleware`): none, an unknown user or a
wrong password is ``401`` with ``WWW-Authenticate: Basic realm="lumber-registry"``; a ``readonly`` user
asking for a change is ``403``. Bodies are the registry's error JSON (``error_code`` 401 / 40301). A failed
login is logged with the client's address and the user name, never the password. Passwords are compared in
constant time.

Thread-safe: the users are read once, at start, and never change.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas.errors import SchemaError

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

REALM = "lumber-registry"
#: ``POST`` paths a ``readonly`` user may ask: a lookup under a subject, a compatibility check.
_READ_POSTS = (re.compile(r"^/subjects/[^/]+/?$"), re.compile(r"^/compatibility/"))


class Role(enum.Enum):
    READONLY = "readonly"
    ADMIN = "admin"


@dataclass(frozen=True)
class RegistryUser:
    name: str
    role: Role
    password: str = field(repr=False)


class UsersFileError(SchemaError):
    """A users file that cannot be read (the message names the file and the line, never a password)."""


def read_users(path: Path) -> dict[str, RegistryUser]:
    """The users of ``path`` (see the module docstring)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(
            f"cannot read the registry's users file {str(path)!r}: {exc.__class__.__name__}"
        ) from None
    users: dict[str, RegistryUser] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, colon, rest = text.partition(":")
        password, comma, role_name = rest.strip().rpartition(",")
        if not colon or not comma or not name.strip() or not password:
            raise UsersFileError(f"{path}:{number}: expected 'user: password,role'")
        try:
            role = Role(role_name.strip())
        except ValueError:
            raise UsersFileError(
                f"{path}:{number}: role {role_name.strip()!r} is not one of readonly, admin"
            ) from None
        users[name.strip()] = RegistryUser(name.strip(), role, password)
    if not users:
        raise UsersFileError(f"{path}: no users")
    return users


def may(role: Role, method: str, path: str) -> bool:
    """Whether ``role`` may ask ``method path``."""
    if role is Role.ADMIN or method in ("GET", "HEAD", "OPTIONS"):
        return True
    return method == "POST" and any(pattern.match(path) for pattern in _READ_POSTS)


class BasicAuthMiddleware:
    """ASGI middleware checking every HTTP request (see the module docstring)."""

    def __init__(self, app: App, users: dict[str, RegistryUser]) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        user = self._user(scope)
        if user is None:
            await _answer(send, 401, 401, "Unauthorized", {"www-authenticate": f'Basic realm="{REALM}"'})
            return
        if not may(user.role, method, path):
            await _answer(
                send, 403, 40301, f"User {user.name!r} ({user.role.value}) may not {method} {path}", {}
            )
            return
        await self.app(scope, receive, send)

    def _user(self, scope: Scope) -> RegistryUser | None:
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        client = scope.get("client") or ("?", 0)
        if not header.lower().startswith(b"basic "):
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            log.warning("registry: a malformed Basic authorization from %s", client[0])
            return None
        name, _, password = decoded.partition(":")
        user = self.users.get(name)
        expected = user.password if user is not None else "\0" * max(len(password), 1)
        if not hmac.compare_digest(expected.encode(), password.encode()) or user is None:
            log.warning("registry: failed login as %r from %s", name, client[0])
            return None
        return user


async def _answer(send: Send, status: int, code: int, message: str, headers: dict[str, str]) -> None:
    body = json.dumps({"error_code": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/vnd.schemaregistry.v1+json"),
                (b"content-length", str(len(body)).encode()),
                *((k.encode(), v.encode()) for k, v in headers.items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
