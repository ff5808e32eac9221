"""Kafka's classic group protocol, served by the broker leading a group's ``__consumer_offsets`` partition
(Kafka's ``GroupCoordinator``; states and transitions in :mod:`broker.server.group.group_metadata`).

* **JoinGroup**: a member without an id gets one; from JoinGroup v4 a dynamic member is first answered
  MEMBER_ID_REQUIRED with its new id (KIP-394) and joins with it. Any join of a new member, a member whose
  protocols changed, or the leader moves the group to PreparingRebalance; the join is answered once every
  known member has rejoined (or the rebalance timeout, the largest of the members', removed those that did
  not), with the next generation, the protocol every member supports that most of them prefer, and, to the
  leader only, every member's metadata. An Empty group's first rebalance waits
  ``group_initial_rebalance_delay_ms`` (extended by as much per joining member, up to the rebalance timeout)
  so that members starting together land in one generation.
* **SyncGroup**: the leader's assignment is stored in ``__consumer_offsets`` (acks=-1) and then handed to
  every member; the group is Stable. Members that do not sync within the rebalance timeout are removed.
* **Heartbeat** keeps a member's session (``session_timeout_ms``, checked against
  ``group_min/max_session_timeout_ms``); its answer REBALANCE_IN_PROGRESS tells the member to rejoin. A
  member whose session lapses is removed and the group rebalances.
* **LeaveGroup** removes members (a batch, by member id or group instance id, from v3).
* **Fencing**, exactly as Kafka: an unknown member id is UNKNOWN_MEMBER_ID, an old generation
  ILLEGAL_GENERATION, a request during a rebalance REBALANCE_IN_PROGRESS, and a static member
  (``group.instance.id``, KIP-345) whose id was taken over by a newer instance FENCED_INSTANCE_ID. A static
  member that restarts with the same instance id takes its old place (and assignment) without a rebalance.
* **OffsetCommit** from a member of the current generation, or from a client outside any generation
  (generation -1) while the group is Empty (admin tools, assign-mode consumers); **OffsetFetch** from the
  cache. **ListGroups**, **DescribeGroups**, **DeleteGroups** (Empty groups only, else NON_EMPTY_GROUP)
  and **OffsetDelete** (GROUP_SUBSCRIBED_TO_TOPIC for a topic the group consumes).

Every request first checks that this broker coordinates the group: NOT_COORDINATOR, or
COORDINATOR_LOAD_IN_PROGRESS while its partition loads (:mod:`.group_metadata_manager`).

**Timers.** Kafka keeps DelayedJoin, DelayedSync and DelayedHeartbeat operations in purgatories keyed by
group and member. Lumber's coordinator has one timer thread instead, which every ``_TICK_S`` (50 ms) walks
the groups: it completes a PreparingRebalance whose members have all joined (after the initial delay) or
whose deadline passed, removes the members of a CompletingRebalance that did not sync in time, expires
sessions and pending members, and runs offsets expiry every ``offsets_retention_check_interval_ms``. A
rebalance that completes on a request (the last member joins) is completed at once on that request's
thread, not at the next tick. Timers are therefore up to 50 ms late, which no client notices.

Concurrency: request threads, the timer thread, the purgatory's thread (a stored write's callback) and the
loader thread all act on a group only under its lock; answers (the callbacks) are sent under it, as in
Kafka.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.record.topic_partition import TopicPartition
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.group_metadata_manager import GroupMetadataManager
from broker.server.group.member_metadata import MemberMetadata
from broker.server.group.offset_and_metadata import OffsetAndMetadata

logger = logging.getLogger(__name__)

_TICK_S = 0.05
#: Kafka's NewMemberJoinTimeoutMs: how long a member that joined a rebalance may take to see it complete.
_NEW_MEMBER_JOIN_TIMEOUT_S = 300.0
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


class GroupCoordinator:
    """Serves the group APIs for the groups whose ``__consumer_offsets`` partition this broker leads."""

    def __init__(self, config: BrokerConfig, manager: GroupMetadataManager) -> None:
        self._config = config
        self.manager = manager
        manager.on_loaded = self._on_group_loaded
        manager.on_unloaded = self._on_group_unloaded
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_expiry = time.monotonic() + config.offsets_retention_check_interval_ms / 1000

    def start(self) -> None:
        self.manager.start()
        self._thread = threading.Thread(target=self._run_timers, name="group-coordinator-timers", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(10.0)
        self.manager.shutdown()

    # ------------------------------------------------------------------------------------ checks

    def _status(self, group_id: str, *, allow_empty_id: bool = False) -> ErrorCode:
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        return self.manager.status_of(group_id)

    @staticmethod
    def _validate_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateCurrentMember``: FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID, else NONE."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                logger.info(
                    "group %s: member %s of static instance %s is fenced by member %s",
                    group.group_id,
                    member_id,
                    group_instance_id,
                    current,
                )
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if group.has(member_id) else ErrorCode.UNKNOWN_MEMBER_ID

    # ------------------------------------------------------------------------------------ JoinGroup

    def handle_join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        respond: JoinCallback,
    ) -> None:
        status = self._status(group_id)
        if status != ErrorCode.NONE:
            respond(JoinResult(status, member_id))
            return
        config = self._config
        if (
            not config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            respond(JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
            return
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has none: Kafka uses the session's
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown:
                respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            group = self.manager.get_or_create_group(group_id)
        with group.lock:
            names = [name for name, _ in protocols]
            if group.is_state(GroupState.DEAD):
                # unloaded or deleted meanwhile: the client looks the coordinator up again
                respond(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            elif not group.supports_protocols(protocol_type, names):
                respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            elif is_unknown:
                new_id = group.generate_member_id(client_id, group_instance_id)
                if group_instance_id is not None:
                    old_id = group.current_static_member_id(group_instance_id)
                    if old_id is not None:
                        self._update_static_member(
                            group,
                            group_instance_id,
                            old_id,
                            new_id,
                            protocols,
                            rebalance_timeout_ms,
                            session_timeout_ms,
                            respond,
                        )
                    else:
                        self._add_member_and_rebalance(
                            group,
                            new_id,
                            group_instance_id,
                            client_id,
                            client_host,
                            rebalance_timeout_ms,
                            session_timeout_ms,
                            protocol_type,
                            protocols,
                            respond,
                        )
                elif require_known_member_id:
                    group.pending_members[new_id] = time.monotonic() + session_timeout_ms / 1000
                    respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
                else:
                    self._add_member_and_rebalance(
                        group,
                        new_id,
                        None,
                        client_id,
                        client_host,
                        rebalance_timeout_ms,
                        session_timeout_ms,
                        protocol_type,
                        protocols,
                        respond,
                    )
            elif member_id in group.pending_members:
                self._add_member_and_rebalance(
                    group,
                    member_id,
                    None,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                    respond,
                )
            else:
                error = self._validate_member(group, member_id, group_instance_id)
                if error != ErrorCode.NONE:
                    respond(JoinResult(error, member_id))
                else:
                    self._current_member_join(
                        group, member_id, protocols, rebalance_timeout_ms, session_timeout_ms, respond
                    )
            if group.is_state(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group)

    def _current_member_join(
        self,
        group: GroupMetadata,
        member_id: str,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: JoinCallback,
    ) -> None:
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                respond(self._join_result(group, member_id))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond
                )
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond
                )
            else:
                respond(self._join_result(group, member_id, with_members=False))
        else:
            respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_result(self, group: GroupMetadata, member_id: str, *, with_members: bool = True) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if with_members and group.is_leader(member_id) and group.protocol_name is not None:
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        respond: JoinCallback,
    ) -> None:
        member = MemberMetadata(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            [(name, bytes(data)) for name, data in protocols],
        )
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        member.awaiting_join = respond
        member.heartbeat_deadline = time.monotonic() + _NEW_MEMBER_JOIN_TIMEOUT_S
        logger.info(
            "group %s: member %s (instance %s, client %s at %s) joins in %s",
            group.group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            group.state.value,
        )
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: JoinCallback,
    ) -> None:
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    @staticmethod
    def _update_member(
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: JoinCallback | None,
    ) -> None:
        member.supported_protocols = [(name, bytes(data)) for name, data in protocols]
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        if previous is not None and respond is not None and previous is not respond:
            # a member that sends JoinGroup again while waiting: the old request is superseded
            previous(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = respond

    def _update_static_member(
        self,
        group: GroupMetadata,
        instance_id: str,
        old_id: str,
        new_id: str,
        protocols: Sequence[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        respond: JoinCallback,
    ) -> None:
        """A static member rejoins with a new member id (it restarted): it takes the old member's place;
        the old instance's waiting answers are FENCED_INSTANCE_ID."""
        old = group.members[old_id]
        if old.awaiting_join is not None:
            old.awaiting_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            old.awaiting_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._heartbeat(member)
        old_protocols = list(member.supported_protocols)
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        logger.info(
            "group %s: static member %s rejoins as %s (was %s)", group.group_id, instance_id, new_id, old_id
        )
        state = group.state
        if state is GroupState.STABLE:
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
            if group.protocol_name is not None and group.select_protocol() == group.protocol_name:
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def stored(error: ErrorCode) -> None:
                    with group.lock:
                        if error != ErrorCode.NONE:
                            # undo: the old instance stays the member
                            self._update_member(member, old_protocols, *old_timeouts, None)
                            group.replace_static_member(instance_id, new_id, old_id)
                            respond(
                                JoinResult(
                                    error,
                                    UNKNOWN_MEMBER_ID,
                                    group.generation_id,
                                    group.protocol_type,
                                    group.protocol_name,
                                    current_leader or "",
                                )
                            )
                        else:
                            respond(
                                JoinResult(
                                    ErrorCode.NONE,
                                    new_id,
                                    group.generation_id,
                                    group.protocol_type,
                                    group.protocol_name,
                                    current_leader or "",
                                )
                            )

                self.manager.store_group(group, assignment, stored)
            else:
                member.awaiting_join = respond
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with other protocols"
                )
        elif state is GroupState.COMPLETING_REBALANCE:
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during the sync")
        else:  # PreparingRebalance: it waits for the join like the others
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.sync_deadline = 0.0
        group.pending_sync.clear()
        now = time.monotonic()
        rebalance_s = group.rebalance_timeout_ms() / 1000
        if group.is_state(GroupState.EMPTY):
            delay_s = self._config.group_initial_rebalance_delay_ms / 1000
            group.initial_delay_deadline = now + delay_s
            group.join_deadline = now + max(rebalance_s, delay_s)
        else:
            group.initial_delay_deadline = 0.0
            group.join_deadline = now + rebalance_s
        group.transition_to(GroupState.PREPARING_REBALANCE)
        logger.info(
            "group %s: preparing to rebalance in generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        """Complete the PreparingRebalance if every member has joined (and the initial delay is over), or
        its deadline passed (group lock held)."""
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        now = time.monotonic()
        if group.initial_delay_deadline:
            if now < group.initial_delay_deadline:
                return
            if group.new_member_added and now < group.join_deadline:
                # InitialDelayedJoin: another member joined during the delay: wait one more delay
                group.new_member_added = False
                group.initial_delay_deadline = min(
                    now + self._config.group_initial_rebalance_delay_ms / 1000, group.join_deadline
                )
                return
            group.initial_delay_deadline = 0.0
            self._complete_join(group)
        elif group.has_all_members_joined() or now >= group.join_deadline:
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's ``onCompleteJoin``: drop the dynamic members that did not rejoin, start the next
        generation, answer every joined member."""
        for member in group.not_yet_rejoined():
            if not member.is_static:
                logger.info(
                    "group %s: member %s did not rejoin in time: removed", group.group_id, member.member_id
                )
                group.remove(member.member_id)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # no member rejoined (only static members that did not): wait for them one more timeout
            group.join_deadline = time.monotonic() + group.rebalance_timeout_ms() / 1000
            return
        group.init_next_generation()
        if group.is_state(GroupState.EMPTY):
            logger.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self.manager.store_group(group, {}, lambda error: _log_store(group.group_id, error))
            return
        logger.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        now = time.monotonic()
        for member in list(group.members.values()):
            callback = member.awaiting_join
            member.awaiting_join = None
            member.is_new = False
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
            if callback is not None:
                callback(self._join_result(group, member.member_id))
        group.sync_deadline = now + group.rebalance_timeout_ms() / 1000

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            callback = member.awaiting_sync
            if callback is not None:
                member.awaiting_sync = None
                callback(
                    SyncResult(error, group.protocol_type, group.protocol_name, member.assignment)
                    if error == ErrorCode.NONE
                    else SyncResult(error)
                )
                self._heartbeat(member)

    @staticmethod
    def _heartbeat(member: MemberMetadata) -> None:
        member.heartbeat_deadline = time.monotonic() + member.session_timeout_ms / 1000

    # ------------------------------------------------------------------------------------ SyncGroup

    def handle_sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        respond: SyncCallback,
    ) -> None:
        status = self._status(group_id)
        if status == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if status != ErrorCode.NONE:
            respond(SyncResult(status))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        with group.lock:
            error = self._validate_sync(
                group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
            if error != ErrorCode.NONE:
                respond(SyncResult(error))
                return
            state = group.state
            if state is GroupState.EMPTY:
                respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            elif state is GroupState.PREPARING_REBALANCE:
                respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            elif state is GroupState.COMPLETING_REBALANCE:
                member = group.members[member_id]
                member.awaiting_sync = respond
                group.pending_sync.discard(member_id)
                if group.is_leader(member_id):
                    assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
                    generation = group.generation_id

                    def stored(store_error: ErrorCode) -> None:
                        with group.lock:
                            if (
                                group.is_state(GroupState.COMPLETING_REBALANCE)
                                and group.generation_id == generation
                            ):
                                if store_error != ErrorCode.NONE:
                                    self._reset_and_propagate_assignment_error(group, store_error)
                                    self._maybe_prepare_rebalance(
                                        group, f"storing the assignment failed: {store_error.name}"
                                    )
                                else:
                                    for m, data in assignment.items():
                                        if m in group.members:
                                            group.members[m].assignment = data
                                    self._propagate_assignment(group, ErrorCode.NONE)
                                    group.transition_to(GroupState.STABLE)
                                    group.sync_deadline = 0.0

                    self.manager.store_group(group, assignment, stored)
            elif state is GroupState.STABLE:
                group.pending_sync.discard(member_id)
                member = group.members[member_id]
                respond(
                    SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
                )
                self._heartbeat(member)

    def _validate_sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode:
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    # ------------------------------------------------------------------------------------ Heartbeat

    def handle_heartbeat(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        status = self._status(group_id)
        if status == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # Kafka's answer: the member must not rejoin because of a load
        if status != ErrorCode.NONE:
            return status
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        with group.lock:
            if group.is_state(GroupState.DEAD):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            error = self._validate_member(group, member_id, group_instance_id)
            if error != ErrorCode.NONE:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            state = group.state
            if state is GroupState.EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._heartbeat(group.members[member_id])
            if state is GroupState.PREPARING_REBALANCE:
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE

    # ------------------------------------------------------------------------------------ LeaveGroup

    def handle_leave_group(
        self, group_id: str, leaving: Sequence[MemberToLeave]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """The request's error and each member's."""
        status = self._status(group_id)
        if status != ErrorCode.NONE:
            return status, []
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        with group.lock:
            if group.is_state(GroupState.DEAD):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
            errors = []
            for who in leaving:
                if who.member_id == UNKNOWN_MEMBER_ID:
                    current = (
                        group.current_static_member_id(who.group_instance_id)
                        if who.group_instance_id is not None
                        else None
                    )
                    if current is None:
                        errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                        continue
                    self._remove_member_and_update_group(
                        group, group.members[current], "left (by instance id)"
                    )
                    errors.append(ErrorCode.NONE)
                elif who.member_id in group.pending_members:
                    group.remove(who.member_id)
                    self._maybe_complete_join(group)
                    errors.append(ErrorCode.NONE)
                else:
                    error = self._validate_member(group, who.member_id, who.group_instance_id)
                    if error == ErrorCode.NONE:
                        self._remove_member_and_update_group(group, group.members[who.member_id], "left")
                    errors.append(error)
            return ErrorCode.NONE, errors

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, why: str) -> None:
        logger.info("group %s: member %s %s", group.group_id, member.member_id, why)
        if member.awaiting_join is not None:
            member.awaiting_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        group.remove(member.member_id)
        state = group.state
        if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} {why}")
        elif state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # ------------------------------------------------------------------------------------ offsets

    def handle_commit_offsets(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        respond: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        def fail(error: ErrorCode) -> None:
            respond(dict.fromkeys(offsets, error))

        status = self._status(group_id)
        if status != ErrorCode.NONE:
            fail(status)
            return
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                fail(ErrorCode.ILLEGAL_GENERATION)  # Kafka's answer for a member of a group not known here
                return
            group = self.manager.get_or_create_group(group_id)  # a commit outside any generation
        with group.lock:
            if group.is_state(GroupState.DEAD):
                fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                return
            if generation_id < 0 and group.is_state(GroupState.EMPTY):
                self.manager.store_offsets(group, offsets, respond)
                return
            if group.is_state(GroupState.COMPLETING_REBALANCE):
                fail(ErrorCode.REBALANCE_IN_PROGRESS)
                return
            if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
                error = self._validate_member(group, member_id, group_instance_id)
                if error == ErrorCode.NONE and generation_id != group.generation_id:
                    error = ErrorCode.ILLEGAL_GENERATION
            else:
                error = ErrorCode.UNKNOWN_MEMBER_ID  # a commit outside any generation to an active group
            if error != ErrorCode.NONE:
                fail(error)
                return
            self._heartbeat(group.members[member_id])
            self.manager.store_offsets(group, offsets, respond)

    def handle_fetch_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """The group's committed offsets of ``partitions`` (None: all it has); None where it has none.

        "None" is an answer clients act on (librdkafka applies ``auto.offset.reset``), so it is given only
        for a group this broker coordinates and has no offsets of: the ownership check and the lookup are
        one step (:meth:`GroupMetadataManager.coordinated_group`), and a group unloaded (Dead) before its
        lock is taken is looked up again, which answers COORDINATOR_LOAD_IN_PROGRESS while its partition
        loads again, NOT_COORDINATOR once another broker leads it (both retried by clients)."""
        for _attempt in range(3):
            status, group = self.manager.coordinated_group(group_id)
            if status != ErrorCode.NONE:
                return status, {}
            if group is None:
                return ErrorCode.NONE, dict.fromkeys(partitions or (), None)
            with group.lock:
                if group.is_state(GroupState.DEAD) and self.manager.get_group(group_id) is not group:
                    continue  # unloaded (or deleted) since the lookup: ask again
                if partitions is None:
                    return ErrorCode.NONE, dict(group.offsets)
                return ErrorCode.NONE, {tp: group.offsets.get(tp) for tp in partitions}
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, {}  # unloaded under each lookup: let it retry

    def handle_delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        status = self._status(group_id)
        if status != ErrorCode.NONE:
            return status, {}
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        with group.lock:
            if group.is_state(GroupState.DEAD):
                return ErrorCode.GROUP_ID_NOT_FOUND, {}
            if group.members and group.protocol_type != "consumer":
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = group.subscribed_topics() if group.members else set()
            errors: dict[TopicPartition, ErrorCode] = {}
            deletable = []
            for tp in partitions:
                if subscribed is None or tp.topic in subscribed:
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    errors[tp] = ErrorCode.NONE
                    deletable.append(tp)
            self.manager.delete_offsets(group, deletable)
            return ErrorCode.NONE, errors

    # ------------------------------------------------------------------------------------ admin

    def handle_list_groups(self, states: Sequence[str]) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """Every group coordinated here, as (id, protocol type, state), filtered by ``states`` (any case)."""
        wanted = {s.lower() for s in states}
        listed = []
        for group in self.manager.groups():
            with group.lock:
                if group.is_state(GroupState.DEAD):
                    continue
                if wanted and group.state.value.lower() not in wanted:
                    continue
                listed.append((group.group_id, group.protocol_type or "", group.state.value))
        return ErrorCode.NONE, sorted(listed)

    def handle_describe_group(self, group_id: str) -> GroupSummary:
        status = self._status(group_id, allow_empty_id=True)
        if status != ErrorCode.NONE:
            return GroupSummary(status, group_id)
        group = self.manager.get_group(group_id)
        if group is None:
            return GroupSummary(ErrorCode.NONE, group_id, GroupState.DEAD.value)
        with group.lock:
            stable = group.is_state(GroupState.STABLE)
            protocol = group.protocol_name if stable else None
            members = [
                DescribedMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(protocol) if protocol is not None else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            ]
            return GroupSummary(
                ErrorCode.NONE,
                group_id,
                group.state.value,
                group.protocol_type or "",
                group.protocol_name or "" if stable else "",
                members,
            )

    def handle_delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            status = self._status(group_id)
            if status != ErrorCode.NONE:
                results[group_id] = status
                continue
            group = self.manager.get_group(group_id)
            if group is None:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            with group.lock:
                if group.is_state(GroupState.DEAD):
                    results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_state(GroupState.EMPTY):
                    results[group_id] = ErrorCode.NON_EMPTY_GROUP
                else:
                    group.transition_to(GroupState.DEAD)
                    self.manager.remove_group(group)
                    self.manager.delete_offsets(group, list(group.offsets))
                    logger.info("group %s deleted", group_id)
                    results[group_id] = ErrorCode.NONE
        return results

    def coordinator_of(self, group_id: str) -> int:
        return self.manager.coordinator_of(group_id)

    # ------------------------------------------------------------------------------------ load, unload

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        with group.lock:
            now = time.monotonic()
            for member in group.members.values():
                member.heartbeat_deadline = now + member.session_timeout_ms / 1000

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        with group.lock:
            group.transition_to(GroupState.DEAD)
            for member in group.members.values():
                if member.awaiting_join is not None:
                    member.awaiting_join(JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                    member.awaiting_join = None
                if member.awaiting_sync is not None:
                    member.awaiting_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
                    member.awaiting_sync = None

    # ------------------------------------------------------------------------------------ timers

    def _run_timers(self) -> None:
        while not self._stopping.wait(_TICK_S):
            for group in self.manager.groups():
                try:
                    with group.lock:
                        self._tick(group)
                except Exception:  # the timer thread's top loop: log, keep the other groups going
                    logger.exception("group %s: timer failed", group.group_id)
            if time.monotonic() >= self._next_expiry:
                self._next_expiry = time.monotonic() + self._config.offsets_retention_check_interval_ms / 1000
                try:
                    self.manager.expire_offsets()
                except Exception:
                    logger.exception("offsets expiry failed")

    def _tick(self, group: GroupMetadata) -> None:
        """The group's due timers (group lock held)."""
        if group.is_state(GroupState.DEAD):
            return
        now = time.monotonic()
        for member_id, deadline in list(group.pending_members.items()):
            if now >= deadline:
                logger.info("group %s: pending member %s never joined: removed", group.group_id, member_id)
                group.remove(member_id)
        for member in list(group.members.values()):
            keep_alive = not member.is_new and (
                member.awaiting_join is not None or member.awaiting_sync is not None
            )
            if now >= member.heartbeat_deadline and not keep_alive:
                self._remove_member_and_update_group(
                    group, member, f"session expired ({member.session_timeout_ms} ms without a heartbeat)"
                )
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        elif (
            group.is_state(GroupState.COMPLETING_REBALANCE)
            and group.sync_deadline
            and now >= group.sync_deadline
        ):
            missing = sorted(group.pending_sync)
            if missing:
                for member_id in missing:
                    group.remove(member_id)
                logger.info("group %s: members %s did not sync in time: removed", group.group_id, missing)
                self._prepare_rebalance(group, "members did not sync in time")
            group.sync_deadline = 0.0


def _log_store(group_id: str, error: ErrorCode) -> None:
    if error != ErrorCode.NONE:
        logger.warning("group %s: storing its metadata failed: %s", group_id, error.name)
