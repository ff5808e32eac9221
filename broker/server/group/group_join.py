"""JoinGroup, served by the group coordinator: the part of
:class:`~broker.server.group.group_coordinator.GroupCoordinator` that admits members to a rebalance
(mixed into it; the state and its concurrency rules are :mod:`broker.server.group.group_coordinator`'s,
the rebalance's steps :mod:`broker.server.group.group_rebalance`'s).

**JoinGroup**: a member without an id gets one; from JoinGroup v4 a dynamic member is first answered
MEMBER_ID_REQUIRED with its new id (KIP-394) and joins with it. Any join of a new member, a member whose
protocols changed, or the leader moves the group to PreparingRebalance; the join is answered once every
known member has rejoined (or the rebalance timeout, the largest of the members', removed those that did
not), with the next generation, the protocol every member supports that most of them prefer, and, to the
leader only, every member's metadata. An Empty group's first rebalance waits
``group_initial_rebalance_delay_ms`` (extended by as much per joining member, up to the rebalance timeout)
so that members starting together land in one generation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.server.group.group_coordinator_types import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinResult,
    SyncResult,
)
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.group_metadata_manager import GroupMetadataManager
from broker.server.group.member_metadata import MemberMetadata

logger = logging.getLogger(__name__)

#: Kafka's NewMemberJoinTimeoutMs: how long a member that joined a rebalance may take to see it complete.
_NEW_MEMBER_JOIN_TIMEOUT_S = 300.0


class GroupJoin:
    """The JoinGroup part of the group coordinator (see the module docstring)."""

    # The coordinator's state these methods use (set by GroupCoordinator.__init__).
    _config: BrokerConfig
    manager: GroupMetadataManager

    if TYPE_CHECKING:

        def _status(self, group_id: str, *, allow_empty_id: bool = False) -> ErrorCode: ...

        @staticmethod
        def _validate_member(
            group: GroupMetadata, member_id: str, group_instance_id: str | None
        ) -> ErrorCode: ...

        def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...

        def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...

        def _maybe_complete_join(self, group: GroupMetadata) -> None: ...

        @staticmethod
        def _heartbeat(member: MemberMetadata) -> None: ...

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
