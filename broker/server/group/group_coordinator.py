"""Kafka's classic group protocol, served by the broker leading a group's ``__consumer_offsets`` partition
(Kafka's ``GroupCoordinator``; states and transitions in :mod:`broker.server.group.group_metadata`).

Layout: :class:`GroupCoordinator` is one class, its handlers grouped by concept in mixins beside this
module; its state lives here (``GroupCoordinator.__init__``) and each mixin lists what it uses:

* :mod:`broker.server.group.group_join`: **JoinGroup** (new, known and static members, KIP-394's
  MEMBER_ID_REQUIRED, the initial rebalance delay);
* :mod:`broker.server.group.group_rebalance`: a rebalance's steps (prepare, complete the join) and
  **SyncGroup**, which stores the leader's assignment and hands it to every member;
* :mod:`broker.server.group.group_coordinator_types`: what the handlers take and answer;
* this module: the checks every handler makes, and:

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

from broker.config import BrokerConfig
from broker.protocol import ErrorCode
from broker.record.topic_partition import TopicPartition
from broker.server.group.group_coordinator_types import (
    UNKNOWN_MEMBER_ID,
    DescribedMember,
    GroupSummary,
    JoinResult,
    MemberToLeave,
    SyncResult,
)
from broker.server.group.group_join import GroupJoin
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.group_metadata_manager import GroupMetadataManager
from broker.server.group.group_rebalance import GroupRebalance
from broker.server.group.member_metadata import MemberMetadata
from broker.server.group.offset_and_metadata import OffsetAndMetadata

logger = logging.getLogger(__name__)

_TICK_S = 0.05


class GroupCoordinator(GroupJoin, GroupRebalance):
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
