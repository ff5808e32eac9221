"""A rebalance's steps in the group coordinator, and SyncGroup, which completes it: the part of
:class:`~broker.server.group.group_coordinator.GroupCoordinator` that moves a group through
PreparingRebalance and CompletingRebalance to Stable (mixed into it; the state and its concurrency rules
are :mod:`broker.server.group.group_coordinator`'s, the states :mod:`broker.server.group.group_metadata`'s).

Prepare (Kafka's ``prepareRebalance``): set the join deadline (an Empty group's first rebalance waits the
initial delay) and answer the members waiting in a sync REBALANCE_IN_PROGRESS. Complete the join
(``onCompleteJoin``): drop the dynamic members that did not rejoin, start the next generation and answer
every joined member. Then:

**SyncGroup**: the leader's assignment is stored in ``__consumer_offsets`` (acks=-1) and then handed to
every member; the group is Stable. Members that do not sync within the rebalance timeout are removed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.server.group.group_coordinator_types import JoinResult, SyncCallback, SyncResult
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.group_metadata_manager import GroupMetadataManager
from broker.server.group.member_metadata import MemberMetadata

logger = logging.getLogger(__name__)


class GroupRebalance:
    """The rebalancing part of the group coordinator (see the module docstring)."""

    # The coordinator's state these methods use (set by GroupCoordinator.__init__).
    _config: BrokerConfig
    manager: GroupMetadataManager

    if TYPE_CHECKING:

        def _status(self, group_id: str, *, allow_empty_id: bool = False) -> ErrorCode: ...

        @staticmethod
        def _validate_member(
            group: GroupMetadata, member_id: str, group_instance_id: str | None
        ) -> ErrorCode: ...

        def _join_result(
            self, group: GroupMetadata, member_id: str, *, with_members: bool = True
        ) -> JoinResult: ...

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


def _log_store(group_id: str, error: ErrorCode) -> None:
    if error != ErrorCode.NONE:
        logger.warning("group %s: storing its metadata failed: %s", group_id, error.name)
