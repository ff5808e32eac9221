"""The errors of :mod:`broker.web`: a users file that cannot be read, a server that may not start as
configured. Each message is one line naming the file (and line) or the config key."""

from __future__ import annotations

from broker.errors import BrokerError


class WebSecurityError(BrokerError):
    """Root of :mod:`broker.web`'s errors: all of them are the configuration's (exit code 2)."""

    exit_code = 2


class UsersFileError(WebSecurityError):
    """A users file that is missing, unreadable or malformed (file and line named)."""


class UnsafeBindError(WebSecurityError):
    """A server asked to listen beyond 127.0.0.1 with no authentication and no ``allow_unauthenticated``."""


class TlsConfigError(WebSecurityError):
    """A certificate or key that cannot be loaded (file named)."""
