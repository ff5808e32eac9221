"""Errors of the ACL model (:mod:`broker.security`), all under :class:`broker.errors.BrokerError`.

::

    BrokerError
    └── SecurityError
        └── InvalidAclError     an ACL or filter that cannot be (unknown operation, a pattern ANY stored...)
"""

from __future__ import annotations

from broker.errors import BrokerError


class SecurityError(BrokerError):
    """Root of the ACL model's errors."""


class InvalidAclError(SecurityError, ValueError):
    """An ACL binding or filter that is not valid (the message names the field and the value)."""
