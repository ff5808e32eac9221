"""Helpers for ZooKeeper multis (kazoo transactions): their results and their size.

kazoo's ``TransactionRequest.commit()`` does not raise when an operation fails: it returns one result per
operation, and a failed multi holds exception instances, the failing operation's real error (BadVersion,
NodeExists, NoNode, NotEmpty) and ``RolledBackError`` / ``RuntimeInconsistency`` for the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from kazoo.exceptions import RolledBackError, RuntimeInconsistency

#: The largest multi sent in one request: ZooKeeper's default ``jute.maxbuffer`` is 1 MiB - 1, and a
#: request above it closes the connection. Kept well below, for the framing.
TRANSACTION_MAX_BYTES = 900_000
#: An operation's bytes besides its path and data: header, lengths, flags, the open ACL (world:anyone).
_OP_OVERHEAD_BYTES = 64


def first_error(results: Sequence[object]) -> Exception | None:
    """The error that failed a multi (not the rolled-back others); None if every operation succeeded."""
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return result
    for result in results:
        if isinstance(result, Exception):
            return result
    return None


def op_bytes(path: str, data: bytes = b"") -> int:
    """An upper bound of one operation's share of a multi request."""
    return _OP_OVERHEAD_BYTES + len(path.encode()) + len(data)
