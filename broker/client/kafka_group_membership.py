"""A member of a consumer group coordinated by the brokers with Kafka's classic group protocol.

``[group] protocol = "kafka"`` makes :class:`~broker.client.group_consumer.GroupConsumer` use this class
instead of the ZooKeeper member (:mod:`broker.client.group_membership`): same streams, same application
API, but the group lives in the group coordinator of the brokers (``broker/server/group/``), so Lumber
members, confluent-kafka, kafka-python and aiokafka consumers can share one group. It follows Kafka's
client (``AbstractCoordinator`` and ``ConsumerCoordinator``), with the eager rebalance protocol of the
``range`` and ``roundrobin`` assignors:

1. **Find the coordinator**: FindCoordinator (key type group) to any broker; the answer is the leader of
   the group's ``__consumer_offsets`` partition. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost
   connection on any later request forgets it and finds it again (after ``retry_backoff_ms``);
   COORDINATOR_LOAD_IN_PROGRESS retries the same coordinator.
2. **Prepare** (Kafka's ``onJoinPrepare``): stop fetching every owned partition, call the listener's
   ``on_partitions_revoked``, wait up to ``release_timeout_ms`` for the records in hand, and commit the
   consumed positions (OffsetCommit with the old generation, which the coordinator accepts while it
   prepares the rebalance). Stop fetching, commit, then rejoin: the next owner starts after the commit.
3. **Join**: JoinGroup with the subscription as Kafka's ``ConsumerProtocolSubscription``
   (:mod:`broker.client.consumer_protocol`) under the configured assignor's name; a new dynamic member is
   answered MEMBER_ID_REQUIRED with its id and joins again with it (KIP-394); UNKNOWN_MEMBER_ID joins
   afresh without an id; REBALANCE_IN_PROGRESS joins again. JoinGroup may wait for the slowest member up
   to the rebalance timeout (``max_poll_interval_ms``), so group requests that may wait go on a connection
   of their own whose request timeout is that plus 5 s (Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``).
4. **Sync**: the leader (the member the coordinator names) computes every member's partitions with
   :mod:`broker.client.partition_assignor` over the members' subscriptions, one unit per member, as
   Kafka's ``RangeAssignor`` / ``RoundRobinAssignor`` do (members sorted by id), and sends them in its
   SyncGroup as ``ConsumerProtocolAssignment``; every member gets its own. REBALANCE_IN_PROGRESS,
   ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID go back to step 3.
5. **Start**: OffsetFetch the committed offsets of the assigned partitions (``auto_offset_reset`` where
   there is none), spread them over the member's streams of each topic (contiguous chunks in order), and
   fetch; then the listener's ``on_partitions_assigned``.
6. **Stay**: a Heartbeat every ``heartbeat_interval_ms``; REBALANCE_IN_PROGRESS (another member joined or
   left), ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID (this member was dropped: its session expired) go back
   to step 2. Offsets are committed every ``auto_commit_interval_ms`` and on :meth:`commit`. The leader
   looks at the subscribed topics every ``metadata_max_age_ms`` and goes back to step 2 when one appeared
   or grew. Kafka's poll timeout: a stream holding partitions that the application did not read for
   ``max_poll_interval_ms`` (its reader is stuck) makes the member commit what was consumed and leave,
   so that its partitions move; it joins again (step 3) once that stream is read again.
7. **Leave** (:meth:`close`): step 2's commit, then LeaveGroup so the others rebalance at once (a static
   member, ``group_instance_id``, does not leave: as in Kafka, its partitions wait for it for
   ``session_timeout_ms``).

Guarantees, and where they differ from the ZooKeeper member: every record is delivered at least once; a
clean leave or rebalance commits what was consumed before anyone else fetches it. Nothing but the
coordinator's generation fences a member whose session expired while it still fetches (as in Kafka, it
learns it at its next heartbeat or commit, which then fails with
:class:`~broker.client.errors.CommitFailedError`): so the ZooKeeper member's "one fetcher per partition at
any instant" is "one owner per partition per generation" here.

Threads: one coordination thread makes every group request, in order, and changes the streams and the
owned partitions (``_owned``) under the member's condition, which is never held across a request; other
threads read ``_owned`` under it. The application thread asks for commits through ``_requests`` (a deque,
signalled through ``_events``). :attr:`member_id`, :attr:`generation_id` and :attr:`coordinator` are read
by other threads as whole-object snapshots. A fatal answer (FENCED_INSTANCE_ID: another process took this
member's ``group_instance_id``; INCONSISTENT_GROUP_PROTOCOL...) stops the member: it is logged and the
streams' readers get :class:`~broker.client.errors.GroupClosedError`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.broker_pool import BrokerPool
from broker.client.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.cluster_snapshot import BrokerAddress
from broker.client.consumer_config import ConsumerConfig
from broker.client.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    Subscription,
    subscriptions_of,
)
from broker.client.errors import (
    BrokerConnectionError,
    ClientError,
    CommitFailedError,
    GroupClosedError,
    GroupError,
)
from broker.client.group_config import GroupConfig
from broker.client.group_coordinator_lookup import CoordinatorNotFoundError, find_group_coordinator
from broker.client.message_stream import MessageStream
from broker.client.partition_assignor import assign
from broker.client.partition_handover import StreamKey
from broker.client.rebalance_listener import RebalanceListener
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.messages.heartbeat import HeartbeatRequest
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``: how much longer than the rebalance timeout a JoinGroup may take.
_JOIN_TIMEOUT_LAPSE_MS = 5000
#: How long close() waits for the coordination thread.
_CLOSE_TIMEOUT_S = 30.0
#: The newest OffsetFetch version whose layout (one group, topics by name) this member sends.
_OFFSET_FETCH_MAX_VERSION = 7
#: How often a member that left for want of polls checks whether its application is back.
_POLL_CHECK_S = 0.1
#: Errors that say the coordinator moved or is not there: find it again.
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)


class _CoordinatorLostError(ClientError):
    """The coordinator moved, is not there or is unreachable: find it again."""


class _RejoinError(GroupError):
    """The generation is over (or the member unknown): prepare and join again."""


class _CommitRefusedError(ClientError):
    """The coordinator refused a commit for a reason other than the generation (the member goes on)."""


@dataclass
class _Request:
    """A commit the application asks of the coordination thread, and its answer."""

    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


@dataclass
class _Owned:
    """A partition this member's generation gives it: its stream and the offset last committed."""

    stream: MessageStream
    number: int
    committed: int | None


class KafkaGroupMembership:
    """One member of Kafka-protocol group ``group`` (see the module docstring)."""

    def __init__(
        self,
        group: str,
        config: GroupConfig,
        consumer_config: ConsumerConfig,
        zookeeper_connect: str | None,
        subscription: Mapping[str, int],
        streams: Mapping[StreamKey, MessageStream],
        condition: threading.Condition,
        listener: RebalanceListener | None = None,
    ) -> None:
        if not group:
            raise GroupError("a kafka-protocol group needs a non-empty group id")
        self.group = group
        self._config = config
        self._subscription = dict(subscription)
        self._streams = dict(streams)
        self._unique_streams = list({id(s): s for s in self._streams.values()}.values())
        self._cond = condition
        self._listener = listener or RebalanceListener()
        self._instance_id = config.group_instance_id or None
        settings = consumer_config
        self._request_timeout_ms = settings.request_timeout_ms
        self._pool = BrokerPool(
            client_id=settings.client_id,
            request_timeout_ms=settings.request_timeout_ms,
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
        )
        # JoinGroup and SyncGroup wait for the other members: a connection with a longer timeout
        self._join_pool = BrokerPool(
            client_id=settings.client_id,
            request_timeout_ms=max(
                settings.request_timeout_ms, config.max_poll_interval_ms + _JOIN_TIMEOUT_LAPSE_MS
            ),
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
        )
        self._metadata = ClusterMetadata(
            metadata_source(
                list(settings.bootstrap_servers),
                None if settings.bootstrap_servers else zookeeper_connect,
                self._pool,
                section="consumer",
                timeout_ms=settings.connect_timeout_ms,
            ),
            retry_backoff_ms=settings.retry_backoff_ms,
            metadata_max_age_ms=settings.metadata_max_age_ms,
            allow_auto_create=False,
        )
        # state of the coordination thread (read by other threads only as whole-object snapshots)
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.protocol_name: str | None = None
        self._coordinator: BrokerAddress | None = None
        #: the leader's: each subscribed topic's partition count when it last assigned (0: missing)
        self._assigned_counts: dict[str, int] = {}
        self._owned: dict[TopicPartition, _Owned] = {}
        self._rejoin = True
        #: when the member left the group because its application stopped polling (None: it did not)
        self._poll_left_at: float | None = None
        self._stuck: list[MessageStream] = []
        self._fatal: GroupError | None = None
        # signalling between threads
        self._events = threading.Condition()
        self._requests: deque[_Request] = deque()
        self._joined = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lumber-kafka-group-{group}", daemon=True)
        now = time.monotonic()
        self._next_heartbeat = now
        self._next_commit = now + config.auto_commit_interval_ms / 1000

    # ------------------------------------------------------------------------------ public

    def start(self) -> None:
        """Start joining; waits up to ``connect_timeout_ms`` for the first generation (then goes on
        trying in the background); raises GroupError for a group the coordinator refuses."""
        self._thread.start()
        if not self._joined.wait(self._config.connect_timeout_ms / 1000):
            log.warning("group %s: not joined yet after connect_timeout_ms; still trying", self.group)
        if self._fatal is not None:
            raise self._fatal

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def coordinator(self) -> BrokerAddress | None:
        return self._coordinator

    def owned(self) -> set[TopicPartition]:
        with self._cond:
            return set(self._owned)

    def target(self) -> dict[TopicPartition, int]:
        """What the current generation gives this member: partition -> stream number."""
        with self._cond:
            return {tp: owned.number for tp, owned in self._owned.items()}

    def commit(self, *, mark_consumed: bool = True) -> None:
        """Commit every owned partition's consumed position (``mark_consumed``: everything handed out
        counts as consumed first). Raises CommitFailedError when the generation is over."""
        if mark_consumed:
            with self._cond:
                for stream in self._unique_streams:
                    stream.mark_consumed()
        if self._closing.is_set():
            raise GroupClosedError(f"group {self.group}: the member is closed")
        request = _Request()
        with self._events:
            self._requests.append(request)
            self._events.notify_all()
        if not request.done.wait(_CLOSE_TIMEOUT_S + self._request_timeout_ms / 1000):
            raise CommitFailedError(
                f"group {self.group}: commit was not done in time (coordinator unreachable?)"
            )
        if request.error is not None:
            raise request.error

    def seek(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Go on from ``offsets`` in this member's partitions (committed with the next commit), as
        Kafka's ``seek``; a partition this member does not own raises GroupError."""
        with self._cond:
            missing = sorted(tp for tp in offsets if tp not in self._owned)
            if missing:
                raise GroupError(
                    f"group {self.group}: cannot seek {missing}: a kafka-protocol member seeks only the "
                    f"partitions it owns (it owns {sorted(self._owned)})"
                )
            for tp, offset in offsets.items():
                self._owned[tp].stream.rewind(tp, offset)

    def close(self) -> None:
        """Commit what was handed out, leave the group, close the connections. Idempotent."""
        if self._closing.is_set():
            return
        with self._cond:
            for stream in self._unique_streams:
                stream.close_delivery()
                stream.mark_consumed()
        with self._events:
            self._closing.set()
            self._events.notify_all()
        self._join_pool.close()  # a JoinGroup waiting for other members ends now
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning(
                    "group %s: the coordination thread did not stop within %.0f s",
                    self.group,
                    _CLOSE_TIMEOUT_S,
                )
        self._pool.close()
        self._metadata.close()

    # ------------------------------------------------------------------------------ the coordination thread

    def _run(self) -> None:
        backoff_s = self._config.retry_backoff_ms / 1000
        while not self._closing.is_set():
            with self._events:
                self._events.wait_for(
                    lambda: bool(self._requests) or self._closing.is_set(), self._idle_timeout()
                )
                if self._closing.is_set():
                    break
            try:
                self._step()
            except _CoordinatorLostError as exc:
                log.info("group %s: coordinator %s: %s; finding it again", self.group, self._coordinator, exc)
                self._coordinator = None
            except BrokerConnectionError as exc:
                log.info("group %s: %s; finding the coordinator again", self.group, exc)
                self._coordinator = None
            except _RejoinError as exc:
                log.info("group %s: member %s: %s; joining again", self.group, self.member_id, exc)
                self._rejoin = True
                continue
            except GroupError as exc:
                if self._fatal is None and not self._joined.is_set():
                    self._fatal = exc
                log.error("group %s: %s; the member stops", self.group, exc)  # noqa: TRY400
                self._fail_requests(str(exc))
                with self._cond:  # its readers get GroupClosedError rather than waiting for ever
                    for stream in self._unique_streams:
                        stream.close_delivery(f"the member stopped: {exc}")
                self._joined.set()
                break
            except Exception:  # the thread's top loop: log, back off and retry
                log.exception("group %s: member %s: coordination step failed", self.group, self.member_id)
            else:
                backoff_s = self._config.retry_backoff_ms / 1000
                continue
            self._closing.wait(backoff_s * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not secrecy
            backoff_s = min(backoff_s * 2, 1.0)
        self._shutdown()

    def _idle_timeout(self) -> float:
        if self._rejoin:
            return 0.0
        if self._poll_left_at is not None:
            return _POLL_CHECK_S
        wake = self._next_heartbeat
        if self._config.auto_commit_enable:
            wake = min(wake, self._next_commit)
        return max(wake - time.monotonic(), 0.0)

    def _step(self) -> None:
        if self._poll_left_at is not None:
            if not self._polled_since(self._poll_left_at, self._stuck):
                self._fail_requests("the member left the group: its application stopped polling")
                return
            log.info("group %s: the application polls again; joining the group again", self.group)
            self._poll_left_at = None
            self._rejoin = True
        self._find_coordinator()
        if self._rejoin:
            self._rebalance()
        elif self._owned and (stuck := self._not_polled()):
            self._leave_for_poll_timeout(stuck)
            return
        while self._requests:
            request = self._requests[0]
            try:
                self._commit()
            except (_CoordinatorLostError, BrokerConnectionError):
                raise  # answered after the coordinator is found again
            except _RejoinError as exc:
                request.error = CommitFailedError(
                    f"group {self.group}: commit failed: {exc}; the records handed out since the last "
                    "commit go to the partitions' next owners"
                )
                self._requests.popleft()
                request.done.set()
                raise
            except ClientError as exc:
                request.error = CommitFailedError(f"group {self.group}: commit failed: {exc}")
            self._requests.popleft()
            request.done.set()
        if self.is_leader and self._metadata.needs_update():
            self._check_metadata()
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self._heartbeat()
            self._next_heartbeat = time.monotonic() + self._config.heartbeat_interval_ms / 1000
        if self._config.auto_commit_enable and now >= self._next_commit:
            self._next_commit = now + self._config.auto_commit_interval_ms / 1000
            try:
                self._commit()
            except _CommitRefusedError as exc:
                log.warning("group %s: auto-commit: %s", self.group, exc)

    def _not_polled(self) -> list[MessageStream]:
        """The streams holding partitions that were not read for ``max_poll_interval_ms``."""
        limit = time.monotonic() - self._config.max_poll_interval_ms / 1000
        with self._cond:
            idle = [(s, s.idle_since()) for s in self._unique_streams if s.partitions()]
        return [s for s, since in idle if since is not None and since < limit]

    def _polled_since(self, moment: float, streams: list[MessageStream]) -> bool:
        """Whether each of ``streams`` was read after ``moment`` (or is being read now)."""
        with self._cond:
            idle = [s.idle_since() for s in streams]
        return all(since is None or since > moment for since in idle)

    def _leave_for_poll_timeout(self, stuck: list[MessageStream]) -> None:
        """Kafka's poll timeout: a member whose application stopped reading (stuck processing) leaves,
        so that its partitions move; what was consumed is committed first, the records in hand are not
        (their next owners deliver them again). It joins again once the application reads again."""
        log.warning(
            "group %s: member %s: the application did not read streams %s for max_poll_interval_ms (%d ms): "
            "leaving the group so that its partitions move; it joins again once they are read",
            self.group,
            self.member_id,
            [s.name for s in stuck],
            self._config.max_poll_interval_ms,
        )
        revoked = sorted(self._owned)
        with self._cond:
            for stream in self._unique_streams:
                stream.stop(revoked)
        self._call_listener(self._listener.on_partitions_revoked, revoked)
        self._release(revoked, all_consumed=False, wait_s=0.0)
        try:
            self._leave()
        except ClientError as exc:  # the coordinator drops it after session_timeout_ms all the same
            log.info("group %s: LeaveGroup failed: %s", self.group, exc)
        finally:
            self.member_id, self.generation_id = "", -1
            self._stuck = stuck
            self._poll_left_at = time.monotonic()

    def _check_metadata(self) -> None:
        """The leader's watch on the subscribed topics (Kafka's ``ConsumerCoordinator`` compares its
        metadata snapshot with the assignment's): a topic created or grown since the assignment makes it
        rejoin, so that the group assigns the new partitions."""
        topics = sorted(self._assigned_counts)
        try:
            snapshot = self._metadata.update(topics)
        except ClientError as exc:
            log.info("group %s: cannot refresh the metadata of %s: %s", self.group, topics, exc)
            return
        counts = {topic: len(found) for topic in topics if (found := snapshot.partitions(topic))}
        if counts != {t: n for t, n in self._assigned_counts.items() if n}:
            log.info(
                "group %s: the subscribed topics' partitions changed (%s, assigned with %s); rebalancing",
                self.group,
                counts,
                self._assigned_counts,
            )
            raise _RejoinError("the subscribed topics' partitions changed")

    def _fail_requests(self, why: str) -> None:
        with self._events:
            while self._requests:
                request = self._requests.popleft()
                request.error = CommitFailedError(f"group {self.group}: commit failed: {why}")
                request.done.set()

    # ------------------------------------------------------------------------------ 1. the coordinator

    def _find_coordinator(self) -> None:
        if self._coordinator is not None:
            return
        try:
            self._coordinator = find_group_coordinator(self._pool, self._metadata, self.group)
        except CoordinatorNotFoundError as exc:
            raise _CoordinatorLostError(str(exc)) from exc
        log.info("group %s: coordinator is %s", self.group, self._coordinator)

    def _request(self, body: Any, *, join: bool = False, version: int | None = None) -> Any:
        """Send ``body`` to the coordinator and wait for the answer."""
        coordinator = self._coordinator
        if coordinator is None:
            raise _CoordinatorLostError("not known")
        pool = self._join_pool if join else self._pool
        connection = pool.get(coordinator)
        return connection.request(body, version=version)

    def _check(self, error_code: int, what: str) -> None:
        """Raise for a coordinator error code (the caller handles the others)."""
        if error_code in _COORDINATOR_ERRORS:
            raise _CoordinatorLostError(f"{what}: {ErrorCode.name_of(error_code)}")

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
        self._call_listener(self._listener.on_partitions_revoked, revoked)
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

    def _commit_before_release(self, commits: Mapping[TopicPartition, int]) -> None:
        """Commit what is given up; the coordinator moving meanwhile is found again and the commit
        retried, for up to ``request_timeout_ms`` (after that the next owners deliver these again)."""
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while True:
            try:
                self._find_coordinator()
                self._send_commit(commits)
            except (_CoordinatorLostError, BrokerConnectionError):
                self._coordinator = None
                if time.monotonic() >= deadline or self._closing.is_set():
                    raise
                time.sleep(self._config.retry_backoff_ms / 1000)
            else:
                return

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
                self._owned[tp] = _Owned(stream, number, offset)
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
            self._call_listener(self._listener.on_partitions_assigned, sorted(mine))

    # ------------------------------------------------------------------------------ 6. staying

    def _heartbeat(self) -> None:
        response = self._request(
            HeartbeatRequest(
                group_id=self.group,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self._instance_id,
            )
        )
        code = response.error_code
        self._check(code, "Heartbeat")
        if code in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation_id = -1
        if code == ErrorCode.ILLEGAL_GENERATION:
            self.generation_id = -1
        if code in (
            ErrorCode.REBALANCE_IN_PROGRESS,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.UNKNOWN_MEMBER_ID,
        ):
            raise _RejoinError(f"Heartbeat: {ErrorCode.name_of(code)}")
        raise GroupError(
            f"group {self.group}: Heartbeat failed: {ErrorCode.name_of(code)} (error code {code})"
        )

    # ------------------------------------------------------------------------------ offsets

    def _commit(self) -> None:
        """Commit every owned partition's consumed position that changed."""
        with self._cond:
            positions = {tp: owned.stream.position(tp) for tp, owned in self._owned.items()}
        commits = {
            tp: position
            for tp, position in positions.items()
            if position is not None and position != self._owned[tp].committed
        }
        if commits:
            self._send_commit(commits)

    def _send_commit(self, commits: Mapping[TopicPartition, int]) -> None:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(commits.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(partition_index=tp.partition, committed_offset=offset)
            )
        while True:
            response = self._request(
                OffsetCommitRequest(
                    group_id=self.group,
                    generation_id_or_member_epoch=self.generation_id,
                    member_id=self.member_id,
                    group_instance_id=self._instance_id,
                    topics=[OffsetCommitRequestTopic(name, parts) for name, parts in by_topic.items()],
                )
            )
            codes = {
                TopicPartition(topic.name, part.partition_index): part.error_code
                for topic in response.topics
                for part in topic.partitions
            }
            failed = {tp: code for tp, code in codes.items() if code != ErrorCode.NONE}
            for tp, offset in commits.items():
                owned = self._owned.get(tp)
                if tp not in failed and owned is not None:
                    owned.committed = offset
            if not failed:
                log.debug("group %s: committed %s", self.group, {str(tp): o for tp, o in commits.items()})
                return
            code = next(iter(failed.values()))
            self._check(code, "OffsetCommit")
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                if self._closing.wait(self._config.retry_backoff_ms / 1000):
                    raise _CoordinatorLostError("still loading the group as the member closes")
                continue
            if code in (
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.REBALANCE_IN_PROGRESS,
            ):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                raise _RejoinError(f"OffsetCommit of {sorted(failed)}: {ErrorCode.name_of(code)}")
            raise _CommitRefusedError(
                f"group {self.group}: OffsetCommit failed for {sorted(failed)}: {ErrorCode.name_of(code)} "
                f"(error code {code})"
            )

    def _fetch_committed(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = OffsetFetchRequest(
            group_id=self.group,
            topics=[OffsetFetchRequestTopic(name, numbers) for name, numbers in by_topic.items()],
        )
        while True:
            coordinator = self._coordinator
            if coordinator is None:
                raise _CoordinatorLostError("not known")
            version = min(
                self._pool.get(coordinator).api_version(int(ApiKey.OFFSET_FETCH)), _OFFSET_FETCH_MAX_VERSION
            )
            response = self._request(body, version=version)
            code = response.error_code
            if code == ErrorCode.NONE:
                for topic in response.topics:
                    for part in topic.partitions:
                        if part.error_code != ErrorCode.NONE:
                            code = part.error_code
            self._check(code, "OffsetFetch")
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._closing.wait(self._config.retry_backoff_ms / 1000)
                if self._closing.is_set():
                    raise BrokerConnectionError(str(coordinator), "the member is closing")
                continue
            if code != ErrorCode.NONE:
                raise GroupError(
                    f"group {self.group}: OffsetFetch failed: {ErrorCode.name_of(code)} (error code {code})"
                )
            found: dict[TopicPartition, int | None] = dict.fromkeys(partitions)
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if tp in found and part.committed_offset >= 0:
                        found[tp] = part.committed_offset
            return found

    # ------------------------------------------------------------------------------ 7. leaving

    def _shutdown(self) -> None:
        try:
            if self._owned:
                revoked = sorted(self._owned)
                with self._cond:
                    for stream in self._unique_streams:
                        stream.stop(revoked)
                self._call_listener(self._listener.on_partitions_revoked, revoked)
                self._release(revoked, all_consumed=True)
            if self._poll_left_at is None:
                self._leave()
        except (ClientError, GroupError) as exc:
            log.warning(
                "group %s: member %s left without leaving cleanly: %s", self.group, self.member_id, exc
            )
        except Exception:  # the thread's last act: never let it die silently
            log.exception("group %s: member %s: leaving failed", self.group, self.member_id)
        finally:
            self._fail_requests("the member is closed")
            log.info("group %s: member %s left", self.group, self.member_id)

    def _leave(self) -> None:
        """LeaveGroup, for a dynamic member in a generation (a static member is waited for, as in Kafka)."""
        if not self.member_id or self._instance_id is not None or self._coordinator is None:
            return
        response = self._request(
            LeaveGroupRequest(
                group_id=self.group,
                member_id=self.member_id,
                members=[MemberIdentity(member_id=self.member_id, reason="the consumer is leaving")],
            )
        )
        if response.error_code != ErrorCode.NONE:
            log.info("group %s: LeaveGroup: %s", self.group, ErrorCode.name_of(response.error_code))

    def _call_listener(
        self, callback: Callable[[list[TopicPartition]], None], partitions: list[TopicPartition]
    ) -> None:
        try:
            callback(partitions)
        except Exception:  # the application's code must not stop the rebalance
            log.exception("group %s: rebalance listener %s failed", self.group, callback.__name__)


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
