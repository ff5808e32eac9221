"""What the group coordinator's handlers take and answer (:mod:`broker.server.group.group_coordinator`);
the protocol layer (:mod:`broker.server.kafka_apis`) builds the responses from them. Values only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from broker.protocol import ErrorCode

#: The member id of a member that has none yet (a JoinGroup's first, a LeaveGroup by instance id).
UNKNOWN_MEMBER_ID = ""


class JoinResult(NamedTuple):
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    #: Every member's (id, group instance id, metadata): for the leader only.
    members: Sequence[tuple[str, str | None, bytes]] = ()


class SyncResult(NamedTuple):
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class MemberToLeave(NamedTuple):
    member_id: str
    group_instance_id: str | None


class DescribedMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupSummary(NamedTuple):
    error: ErrorCode
    group_id: str
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: Sequence[DescribedMember] = ()


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
