"""HTTP Basic authentication (RFC 7617) of one request: its ``Authorization`` header against a users file.

:meth:`BasicAuthenticator.authenticate` answers the :class:`~broker.web.users_file.Role` of the user, or
``None`` (the server then answers 401 with :data:`WWW_AUTHENTICATE`). A request without the header is
simply unauthenticated (a browser's first request); a header that is malformed, names an unknown user or a
wrong password is a failure, logged at WARNING with the server, the client's address, the user name and the
reason, never the password. An address that failed :data:`MAX_FAILURES` times within :data:`WINDOW_S`
seconds is refused without its password being checked until the window has passed (the brokers' SASL rule,
:class:`~broker.network.failed_authentications.FailedAuthentications`; it also bounds the scrypt work a
guesser can cause).

Thread-safe (the users file and the failure record are).
"""

from __future__ import annotations

import base64
import binascii
import logging

from broker.network.failed_authentications import FailedAuthentications
from broker.web.users_file import Role, UsersFile

logger = logging.getLogger(__name__)

MAX_FAILURES = 10
WINDOW_S = 60.0
REALM = "Lumber"
WWW_AUTHENTICATE = f'Basic realm="{REALM}", charset="UTF-8"'


class BasicAuthenticator:
    """Checks ``Authorization: Basic ...`` headers against ``users`` (see the module docstring)."""

    def __init__(self, users: UsersFile, server: str, failures: FailedAuthentications | None = None) -> None:
        self.users = users
        self.server = server
        self.failures = failures or FailedAuthentications(MAX_FAILURES, WINDOW_S)

    def authenticate(self, header: str | None, client: str) -> Role | None:
        """The role of the request's user, or ``None`` (401)."""
        if not header:
            return None
        scheme, _, encoded = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return self._failed(client, None, f"not Basic authentication ({scheme[:20]!r})")
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return self._failed(client, None, "a malformed Basic credential")
        name, colon, password = decoded.partition(":")
        if not colon:
            return self._failed(client, None, "a Basic credential without ':'")
        throttled = self.failures.throttled_s(client)
        if throttled > 0:
            return self._failed(
                client,
                name,
                f"too many failures from this address: refused for {throttled:.0f} s more",
                record=False,
            )
        role = self.users.authenticate(name, password)
        if role is None:
            known = name in self.users.users()
            return self._failed(client, name, "wrong password" if known else "unknown user")
        return role

    def _failed(self, client: str, name: str | None, reason: str, *, record: bool = True) -> Role | None:
        """Log the failure (never the password) and count it against ``client``; ``None`` (401)."""
        if record:
            self.failures.record_failure(client)
        who = "" if name is None else f" as user {name[:100]!r}"
        logger.warning("%s: authentication failed from %s%s: %s", self.server, client, who, reason)
        return None
