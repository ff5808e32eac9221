"""The audit package's root exception.

Everything :mod:`audit` raises on purpose is an :class:`AuditError` (or one of the client's and the
registry's own errors, which it lets through unchanged where the caller knows them better: a
:class:`~broker.client.errors.ClientError` from publishing, a :class:`~schemas.errors.SchemaError` from the
codec). The apps above (``lumber audit``, the console, the load) catch it beside their own roots.
"""

from __future__ import annotations


class AuditError(Exception):
    """The audit cannot be read or reconciled (the audit topic is unreachable, windows do not line up,
    an argument is malformed); the message says which."""
