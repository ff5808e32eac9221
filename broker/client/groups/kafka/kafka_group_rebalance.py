"""A Kafka-protocol group member's rebalance, steps 2 to 5 of
:mod:`broker.client.groups.kafka.kafka_group_membership` (Kafka's ``onJoinPrepare``, ``joinGroupIfNeeded``,
the leader's ``onLeaderElected`` and ``onJoinComplete``): stop and release the owned partitions, JoinGroup
until the coordinator answers with a generation, SyncGroup (the leader with every member's partitions), then
fetch the assigned partitions from their committed offsets. Mixed into
:class:`~broker.client.groups.kafka.kafka_group_membership.KafkaGroupMembership` (its state and threads are
described there; only the coordination thread calls these methods, and it changes the streams and the owned
partitions under the member's condition, never held across a request).

The member's own streams split its partitions as the ``range`` assignor splits a topic among members:
per topic, the sorted partitions in contiguous chunks, one per stream, the first chunks one longer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import BrokerConnectionError, ClientError, GroupError
from broker.client.groups.kafka.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    Subscription,
    subscriptions_of,
)
from broker.client.groups.kafka.kafka_group_offsets import KafkaGroupOffsets, OwnedPartition
from broker.client.groups.partition_assignor import StreamKey, assign
from broker.client.groups.rebalance_listener import RebalanceListener, call_listener
from broker.protocol import ErrorCode
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class KafkaGroupRebalance(KafkaGroupOffsets):
    """The rebalancing part of a Kafka-protocol member (see the module docstring)."""

    # The member's state these methods use (set by KafkaGroupMembership.__init__).
    _subscription: dict[str, int]
    _streams: dict[StreamKey, MessageStream]
    _unique_streams: list[MessageStream]
    _listener: RebalanceListener
    _assigned_counts: dict[str, int]
    _joined: threading.Event
    _rejoin: bool
    _next_heartbeat: float
    leader_id: str
    protocol_name: str | None

    # ------------------------------------------------------------------------------ 2-5. a rebalance

    def _rebalance(self) -> None:
        self._prepare()
        while True:
            joined = self._join()
            if joined is None:
                continue
            generation, leader, protocol, members = joined
            assignments: dict[str, bytes] = {}
            if leader == self.member_id:
                assignments = self._assign(protocol, members)
            response = self._request(
                SyncGroupRequest(
                    group_id=self.group,
                    generation_id=generation,
                    member_id=self.member_id,
                    group_instance_id=self._instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocol_name=protocol,
                    assignments=[SyncGroupRequestAssignment(m, a) for m, a in sorted(assignments.items())],
                ),
                join=True,
            )
            code = response.error_code
            self._check(code, "SyncGroup")
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            if code in (
                ErrorCode.REBALANCE_IN_PROGRESS,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.ILLEGAL_GENERATION,
            ):
                log.info("group %s: SyncGroup: %s; joining again", self.group, ErrorCode.name_of(code))
                continue
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._closing.wait(self._config.retry_backoff_ms / 1000)
                continue
            if code != ErrorCode.NONE:
                raise GroupError(
                    f"group {self.group}: SyncGroup failed: {ErrorCode.name_of(code)} (error code {code})"
                )
            self.generation_id, self.leader_id, self.protocol_name = generation, leader, protocol
            assignment = Assignment.decode(
                bytes(response.assignment), f"group {self.group} member {self.member_id}"
            )
            self._start_partitions(assignment)
            self._rejoin = False
            self._next_heartbeat = time.monotonic() + self._config.heartbeat_interval_ms / 1000
            self._joined.set()
            return

    def _prepare(self) -> None:
        """Step 2: stop fetching everything, wait for the records in hand, commit, forget the partitions."""
        if not self._owned:
            return
        revoked = sorted(self._owned)
        with self._cond:
            for stream in self._unique_streams:
                stream.stop(revoked)
        call_listener(self.group, self._listener.on_partitions_revoked, revoked)
        self._release(revoked, all_consumed=False)

    def _release(
        self, partitions: list[TopicPartition], *, all_consumed: bool, wait_s: float | None = None
    ) -> None:
        """Forget ``partitions`` (stopped already) once the records in hand are done with (waiting up to
        ``wait_s``, default ``release_timeout_ms``), committing their consumed positions."""
        with self._cond:
            if all_consumed:
                for stream in self._unique_streams:
                    stream.mark_consumed()
            elif not self._cond.wait_for(
                lambda: not any(s.in_hand(partitions) for s in self._unique_streams),
                self._config.release_timeout_ms / 1000 if wait_s is None else wait_s,
            ):
                log.warning(
                    "group %s: the application did not come back within release_timeout_ms; the records "
                    "it holds of %s will be delivered again by their next owners",
                    self.group,
                    partitions,
                )
            positions: dict[TopicPartition, int | None] = {}
            for stream in self._unique_streams:
                positions.update(stream.remove([tp for tp in partitions if tp in stream.partitions()]))
        commits = {
            tp: position
            for tp, position in positions.items()
            if position is not None and tp in self._owned and position != self._owned[tp].committed
        }
        try:
            if commits and self.generation_id >= 0:
                self._commit_before_release(commits)
        except (ClientError, GroupError) as exc:
            log.warning(
                "group %s: member %s could not commit %s before giving them up (their next owners deliver "
                "them again): %s",
                self.group,
                self.member_id,
                {str(tp): offset for tp, offset in commits.items()},
                exc,
            )
        finally:
            with self._cond:
                for tp in partitions:
                    self._owned.pop(tp, None)

    def _join(self) -> tuple[int, str, str, dict[str, Subscription]] | None:
        """Step 3: one JoinGroup; ``None`` when it must be sent again (with the member id now known)."""
        subscription = Subscription(
            tuple(sorted(self._subscription)),
            owned_partitions=tuple(sorted(self._owned)),
            generation_id=self.generation_id,
        )
        strategy = self._config.partition_assignment_strategy
        response = self._request(
            JoinGroupRequest(
                group_id=self.group,
                session_timeout_ms=self._config.session_timeout_ms,
                rebalance_timeout_ms=self._config.max_poll_interval_ms,
                member_id=self.member_id,
                group_instance_id=self._instance_id,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=[JoinGroupRequestProtocol(name=strategy, metadata=subscription.encode())],
            ),
            join=True,
        )
        code = response.error_code
        self._check(code, "JoinGroup")
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            return None
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            self._closing.wait(self._config.retry_backoff_ms / 1000)
            if self._closing.is_set():
                raise BrokerConnectionError(str(self._coordinator), "the member is closing")
            return None
        if code != ErrorCode.NONE:  # FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL...: no retry cures them
            raise GroupError(
                f"group {self.group}: JoinGroup refused: {ErrorCode.name_of(code)} (error code {code})"
                + (
                    f" for group_instance_id {self._instance_id!r}"
                    if code == ErrorCode.FENCED_INSTANCE_ID
                    else ""
                )
            )
        self.member_id = response.member_id
        members = {
            m.member_id: Subscription.decode(bytes(m.metadata), f"group {self.group} member {m.member_id}")
            for m in response.members
        }
        protocol = response.protocol_name or strategy
        log.info(
            "group %s: joined generation %d as %s (leader %s, %s)",
            self.group,
            response.generation_id,
            self.member_id,
            response.leader,
            protocol,
        )
        return response.generation_id, response.leader, protocol, members

    def _assign(self, protocol: str, members: dict[str, Subscription]) -> dict[str, bytes]:
        """Step 4, the leader's part: every member's partitions, encoded."""
        topics = sorted({topic for sub in members.values() for topic in sub.topics})
        snapshot = self._metadata.update(topics)
        counts = {topic: len(found) for topic in topics if (found := snapshot.partitions(topic))}
        missing = [topic for topic in topics if topic not in counts]
        if missing:
            log.warning(
                "group %s: subscribed topics %s do not exist (yet): nothing to assign of them",
                self.group,
                missing,
            )
        self._assigned_counts = {topic: counts.get(topic, 0) for topic in topics}
        plan = assign(protocol, subscriptions_of(members), counts)
        encoded: dict[str, bytes] = {}
        for member, by_topic in plan.items():
            partitions = tuple(
                TopicPartition(topic, p)
                for topic, streams in by_topic.items()
                for chunk in streams
                for p in chunk
            )
            encoded[member] = Assignment(partitions).encode()
        log.info(
            "group %s: leader %s assigned %d partitions of %s to %d members",
            self.group,
            self.member_id,
            sum(counts.values()),
            topics,
            len(members),
        )
        return encoded

    def _start_partitions(self, assignment: Assignment) -> None:
        """Step 5: fetch the assigned partitions from their committed offsets, spread over the streams."""
        mine = [tp for tp in assignment.partitions if tp.topic in self._subscription]
        foreign = [tp for tp in assignment.partitions if tp.topic not in self._subscription]
        if foreign:
            log.error(
                "group %s: the leader assigned partitions of topics this member does not read: %s",
                self.group,
                foreign,
            )
        committed = self._fetch_committed(mine) if mine else {}
        placed = _spread(mine, self._subscription)
        with self._cond:
            for tp, number in placed.items():
                stream = self._streams[(tp.topic, number)]
                offset = committed.get(tp)
                self._owned[tp] = OwnedPartition(stream, number, offset)
                stream.add(tp, offset)
        log.info(
            "group %s: member %s generation %d: %d partitions %s",
            self.group,
            self.member_id,
            self.generation_id,
            len(mine),
            [str(tp) for tp in mine],
        )
        if mine:
            call_listener(self.group, self._listener.on_partitions_assigned, sorted(mine))


def _spread(partitions: list[TopicPartition], streams: Mapping[str, int]) -> dict[TopicPartition, int]:
    """Each partition's stream: per topic, the sorted partitions cut into contiguous chunks, one per
    stream, the first chunks one longer (the member's own range assignment)."""
    placed: dict[TopicPartition, int] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp)
    for topic, tps in by_topic.items():
        count = streams.get(topic, 1)
        per_stream, extra = divmod(len(tps), count)
        start = 0
        for number in range(count):
            length = per_stream + (1 if number < extra else 0)
            for tp in tps[start : start + length]:
                placed[tp] = number
            start += length
    return placed
