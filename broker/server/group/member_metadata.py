"""One member of a classic group (Kafka's ``MemberMetadata``): its id, static instance id, client, timeouts,
the protocols it supports with their metadata, its assignment, and the answers it waits for.

A member waits for at most one JoinGroup answer (``awaiting_join``) and one SyncGroup answer
(``awaiting_sync``) at a time. ``heartbeat_deadline`` (``time.monotonic()`` seconds) is when its session
expires unless it heartbeats, rejoins or syncs. Guarded by its group's lock
(:class:`~broker.server.group.group_metadata.GroupMetadata`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Called once with the JoinGroup answer (a ``JoinResult``) or the SyncGroup answer (a ``SyncResult``).
Callback = Callable[[Any], None]


class MemberMetadata:
    """A member of a group (see the module docstring)."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols: list[tuple[str, bytes]] = list(protocols)
        self.assignment = b""
        self.awaiting_join: Callback | None = None
        self.awaiting_sync: Callback | None = None
        self.heartbeat_deadline = 0.0
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol`` (KeyError if it does not support it)."""
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` are the same as this member's, in order and with the same metadata."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols that every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def __repr__(self) -> str:
        return (
            f"MemberMetadata({self.member_id}, instance={self.group_instance_id}, client={self.client_id}, "
            f"host={self.client_host}, session={self.session_timeout_ms} ms, "
            f"rebalance={self.rebalance_timeout_ms} ms, protocols={self.protocol_names()})"
        )
