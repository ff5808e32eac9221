"""A member of a consumer group coordinated by the brokers with Kafka's classic group protocol.

``[group] protocol = "kafka"`` makes :class:`~broker.client.groups.group_consumer.GroupConsumer` use this
class instead of the ZooKeeper member (:mod:`broker.client.groups.zookeeper.group_membership`): same streams,
same application API, but the group lives in the group coordinator of the brokers (``broker/server/group/``),
so Lumber members, confluent-kafka, kafka-python and aiokafka consumers can share one group. It follows
Kafka's client (``AbstractCoordinator`` and ``ConsumerCoordinator``), with the eager rebalance protocol of the
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
   (:mod:`broker.client.groups.kafka.consumer_protocol`) under the configured assignor's name; a new dynamic
   member is answered MEMBER_ID_REQUIRED with its id and joins again with it (KIP-394); UNKNOWN_MEMBER_ID
   joins afresh without an id; REBALANCE_IN_PROGRESS joins again. JoinGroup may wait for the slowest member up
   to the rebalance timeout (``max_poll_interval_ms``), so group requests that may wait go on a connection
   of their own whose request timeout is that plus 5 s (Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``).
4. **Sync**: the leader (the member the coordinator names) computes every member's partitions with
   :mod:`broker.client.groups.partition_assignor` over the members' subscriptions, one unit per member, as
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

Layout: :class:`KafkaGroupMembership` is one class whose methods are grouped by concept in bases beside
this module, each below the next (as Kafka's ``ConsumerCoordinator`` extends ``AbstractCoordinator``);
its state lives here (``KafkaGroupMembership.__init__``) and each base lists what it uses:

* :mod:`broker.client.groups.kafka.kafka_coordinator_link`: step 1, and how every request reaches the
  coordinator;
* :mod:`broker.client.groups.kafka.kafka_group_offsets`: the commits and the committed offsets (steps 2, 5, 6,
  7);
* :mod:`broker.client.groups.kafka.kafka_group_rebalance`: the rebalance, steps 2 to 5;
* this module: the API, the coordination thread, step 6 (heartbeats, the poll timeout, the leader's
  metadata watch) and step 7.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import (
    BrokerConnectionError,
    ClientError,
    CommitFailedError,
    GroupClosedError,
    GroupError,
)
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.kafka.kafka_coordinator_link import (
    CommitRefusedError,
    CoordinatorLostError,
    RejoinError,
)
from broker.client.groups.kafka.kafka_group_offsets import OwnedPartition
from broker.client.groups.kafka.kafka_group_rebalance import KafkaGroupRebalance
from broker.client.groups.partition_assignor import StreamKey
from broker.client.groups.rebalance_listener import RebalanceListener, call_listener
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.protocol import ErrorCode
from broker.protocol.messages.heartbeat import HeartbeatRequest
from broker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``: how much longer than the rebalance timeout a JoinGroup may take.
_JOIN_TIMEOUT_LAPSE_MS = 5000
#: How long close() waits for the coordination thread.
_CLOSE_TIMEOUT_S = 30.0
#: How often a member that left for want of polls checks whether its application is back.
_POLL_CHECK_S = 0.1


@dataclass
class _Request:
    """A commit the application asks of the coordination thread, and its answer."""

    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class KafkaGroupMembership(KafkaGroupRebalance):
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
        security = settings.client_security("consumer")
        self._pool = BrokerPool(
            client_id=settings.client_id,
            request_timeout_ms=settings.request_timeout_ms,
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            security=security,
        )
        # JoinGroup and SyncGroup wait for the other members: a connection with a longer timeout
        self._join_pool = BrokerPool(
            client_id=settings.client_id,
            request_timeout_ms=max(
                settings.request_timeout_ms, config.max_poll_interval_ms + _JOIN_TIMEOUT_LAPSE_MS
            ),
            connect_timeout_ms=settings.connect_timeout_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            security=security,
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
        self._owned: dict[TopicPartition, OwnedPartition] = {}
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
            except CoordinatorLostError as exc:
                log.info("group %s: coordinator %s: %s; finding it again", self.group, self._coordinator, exc)
                self._coordinator = None
            except BrokerConnectionError as exc:
                log.info("group %s: %s; finding the coordinator again", self.group, exc)
                self._coordinator = None
            except RejoinError as exc:
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
            except (CoordinatorLostError, BrokerConnectionError):
                raise  # answered after the coordinator is found again
            except RejoinError as exc:
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
            except CommitRefusedError as exc:
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
        call_listener(self.group, self._listener.on_partitions_revoked, revoked)
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
            raise RejoinError("the subscribed topics' partitions changed")

    def _fail_requests(self, why: str) -> None:
        with self._events:
            while self._requests:
                request = self._requests.popleft()
                request.error = CommitFailedError(f"group {self.group}: commit failed: {why}")
                request.done.set()

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
            raise RejoinError(f"Heartbeat: {ErrorCode.name_of(code)}")
        raise GroupError(
            f"group {self.group}: Heartbeat failed: {ErrorCode.name_of(code)} (error code {code})"
        )

    # ------------------------------------------------------------------------------ 7. leaving

    def _shutdown(self) -> None:
        try:
            if self._owned:
                revoked = sorted(self._owned)
                with self._cond:
                    for stream in self._unique_streams:
                        stream.stop(revoked)
                call_listener(self.group, self._listener.on_partitions_revoked, revoked)
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
