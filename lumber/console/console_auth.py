"""Who is asking: the console's HTTP Basic authentication and its two roles (``[console] users_file``).

:class:`ConsoleAuth` is an ASGI middleware in front of every route. With a users file
(:mod:`broker.web.users_file`) a request without valid credentials is answered 401 with
``WWW-Authenticate: Basic`` (a browser then asks for a name and password), before any page reads anything;
a valid one carries its user's role on ``request.state.role``. Without a users file everyone is
``admin`` (the console bound to 127.0.0.1, or ``allow_unauthenticated = true``: see
:mod:`broker.web.web_security`). Failures are logged with the client's address and the user name, never the
password (:mod:`broker.web.basic_auth`).

What a role may do: ``read`` sees every page and its JSON twin; ``admin`` also acts. The actions are the
POST routes (today resetting a group's offsets, :mod:`lumber.console.reset_pages`): each starts with
:func:`require_admin`, which answers 403 to a ``read`` user before anything is read or written, and the pages
that lead to an action offer it only when :func:`may_act` (a read user sees no button).

The password check (scrypt) runs in a worker thread, never on the event loop; its results are cached by the
users file.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import Request
from starlette.datastructures import Headers
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from broker.web.basic_auth import WWW_AUTHENTICATE, BasicAuthenticator
from broker.web.users_file import Role
from lumber.console.errors import ForbiddenError
from lumber.console.page import esc, layout

ROLE_STATE = "role"


class ConsoleAuth:
    """The ASGI middleware (see the module docstring); ``authenticator`` ``None``: everyone is admin."""

    def __init__(self, app: ASGIApp, authenticator: BasicAuthenticator | None) -> None:
        self.app = app
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        role: Role | None = Role.ADMIN
        if self.authenticator is not None:
            header = Headers(scope=scope).get("authorization")
            client = scope.get("client")
            host = client[0] if client else "?"
            role = await anyio.to_thread.run_sync(self.authenticator.authenticate, header, host)
        if role is None:
            body = '<p class="error">The console needs a user name and password ([console] users_file).</p>'
            response = HTMLResponse(
                layout("401 Unauthorized", body),
                status_code=401,
                headers={"WWW-Authenticate": WWW_AUTHENTICATE},
            )
            await response(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        state[ROLE_STATE] = role
        await self.app(scope, receive, send)


def role_of(request: Request) -> Role:
    """The role of the request's user (``admin`` when the console does not authenticate)."""
    role = getattr(request.state, ROLE_STATE, Role.ADMIN)
    return role if isinstance(role, Role) else Role.ADMIN


def may_act(request: Request) -> bool:
    """Whether the request's user may take the console's actions (role ``admin``)."""
    return role_of(request) is Role.ADMIN


def require_admin(request: Request, action: str) -> None:
    """:class:`ForbiddenError` (403) unless the request's user is an admin."""
    if not may_act(request):
        raise ForbiddenError(f"{action} needs the admin role; this user has role {role_of(request).value}")


def read_only_note(action: str) -> str:
    return f'<p class="muted" id="read-only">{esc(action)} needs the admin role.</p>'
