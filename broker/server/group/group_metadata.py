"""One classic group (Kafka's ``GroupMetadata``): its state, generation, protocol, leader, members and
committed offsets.

States and transitions (Kafka's)::

    Empty ──join──> PreparingRebalance ──all joined / rebalance timeout──> CompletingRebalance
      ^                  ^   |                                                 |  leader's SyncGroup
      |                  |   └──no member left──> Empty                        v  stored
      |                  └──────join / leave / session expiry──────────── Stable
    Dead <── deleted, expired, or its __consumer_offsets partition unloaded (from any state)

Concurrency: every field is guarded by :attr:`GroupMetadata.lock` (a re-entrant lock, as Kafka's
``inLock``); the coordinator takes it for every request and timer action on the group, and the answers to
members (callbacks) are made under it.
"""

from __future__ import annotations

import enum
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence

from broker.record.topic_partition import TopicPartition
from broker.server.group.member_metadata import MemberMetadata
from broker.server.group.offset_and_metadata import OffsetAndMetadata


class GroupState(enum.Enum):
    """A group's state; the values are Kafka's names, as DescribeGroups and ListGroups answer them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class GroupMetadata:
    """A group (see the module docstring)."""

    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.lock = threading.RLock()
        self.state = state
        self.state_timestamp_ms = int(time.time() * 1000)
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        #: Static members: group instance id -> member id.
        self.static_members: dict[str, str] = {}
        #: Dynamic members told MEMBER_ID_REQUIRED, not joined yet: member id -> deadline (monotonic s).
        self.pending_members: dict[str, float] = {}
        #: Members of this generation that have not sent SyncGroup yet.
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        #: When the current PreparingRebalance completes (monotonic s); the initial delay's own deadline.
        self.join_deadline = 0.0
        self.initial_delay_deadline = 0.0
        #: When the members that have not synced are removed (monotonic s; 0: not waiting).
        self.sync_deadline = 0.0
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        #: The log offset in ``__consumer_offsets`` of the commit record each offset cached since the
        #: partition was loaded came from (Kafka's ``appendedBatchOffset``); a commit acknowledged after a
        #: later commit of the same partition does not replace it (none here: older than any append).
        self.offset_positions: dict[TopicPartition, int] = {}
        #: Commits appended but not yet acknowledged (Kafka's pendingOffsetCommits): partition -> count.
        self.pending_commits: Counter[TopicPartition] = Counter()

    # ------------------------------------------------------------------------------------ state

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: cannot go from {self.state.value} to {state.value}")
        self.state = state
        self.state_timestamp_ms = int(time.time() * 1000)

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ------------------------------------------------------------------------------------ members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        instance = None if member is None else member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """The static member ``old_id`` becomes ``new_id`` (a restarted static member), keeping its
        assignment; its waiting answers get FENCED_INSTANCE_ID-free fresh starts (the caller answers them)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # ------------------------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for member in members[1:]:
            common &= set(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocols: Sequence[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocols))

    def select_protocol(self) -> str:
        """The protocol most members prefer among those every member supports (Kafka's vote)."""
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes.items(), key=lambda item: item[1])[0]

    def init_next_generation(self) -> None:
        """A new generation: the next id, the chosen protocol; Empty when no member is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.pending_sync = set(self.members)
        self.new_member_added = False

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make a member that rejoined the leader; False if none did."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.awaiting_join is not None:
                return True
            for member in self.members.values():
                if member.awaiting_join is not None:
                    self.leader_id = member.member_id
                    return True
            return False
        return True

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, from their ``consumer`` protocol metadata (None: unknown,
        the group is not of protocol type ``consumer`` or a member's metadata does not parse)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = _subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id}, {self.state.value}, generation {self.generation_id}, "
            f"protocol {self.protocol_type}/{self.protocol_name}, leader {self.leader_id}, "
            f"{len(self.members)} members, {len(self.offsets)} offsets)"
        )


def _subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (int16 version, then an int32-counted array of int16
    strings; the fields after it are not needed)."""
    data = bytes(metadata)
    try:
        pos = 2
        count = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        topics = set()
        for _ in range(max(count, 0)):
            length = int.from_bytes(data[pos : pos + 2], "big", signed=True)
            pos += 2
            if length < 0 or pos + length > len(data):
                return None
            topics.add(data[pos : pos + length].decode())
            pos += length
    except (UnicodeDecodeError, ValueError):
        return None
    return topics
