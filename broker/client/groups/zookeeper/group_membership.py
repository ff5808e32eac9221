"""A member's coordination with its consumer group in ZooKeeper: join, elect, follow generations, hand over.

Layout (every path is in :mod:`broker.cluster.zk_paths`), below ``/consumers/<group>/``::

    ids/<consumer-id>          ephemeral   the member and its subscription; the id is new at every join
    leader/<consumer-id>-<seq> ephemeral   election candidate; the lowest sequence number leads
    assignment                 persistent  the generation: the leader's whole assignment (one znode)
    owners/<topic>/<p>         ephemeral   the member that owns partition p
    offsets/<topic>/<p>        persistent  the next offset the group consumes from p
    rewind                     persistent  bumped when offsets were rewound

The member composes two recipe-sized classes in kazoo's shape, each owning its znodes and the rules about
them: :class:`FencedElection` (``leader/``: the election, and the fence of the leader's generation writes)
and :class:`PartitionOwnership` (``ids/`` and ``owners/``: the registration, the fence of every commit,
claims and releases); the leader's duties are :class:`GroupLeader`'s, the offsets :class:`GroupOffsets`',
and the member's partitions and streams (release, move, claim, commit) :class:`PartitionHandover`'s (all
in :mod:`broker.client.groups.zookeeper`). This module holds the member's session and its one coordination
thread: when to join, elect, read a generation and hand over, and when to stop fetching.

How a rebalance goes (paper section 3.2, Algorithm 1, without the 0.8 consumer's flaws):

1. Only the leader watches members, brokers and topics (:mod:`broker.client.groups.zookeeper.group_leader`);
   on a change it computes the assignment and writes it as generation + 1 with compare-and-set, fenced by its
   own candidate node (:meth:`FencedElection.fenced_transaction`). Every other member watches just the
   generation node, its predecessor in the election and the owner nodes it waits for: one notification per
   member per rebalance (no herd).
2. A member that reads a new generation first **releases** what it no longer gets, then **claims** what
   it gets (:meth:`PartitionHandover.apply`, whose docstring has the steps: stop fetching, wait for the
   records in hand, commit and delete the owner nodes in one transaction fenced by the registration;
   claim by creating owner nodes, watching those still held).

The four guarantees and what gives them:

* **At most one owner, one fetcher.** A member fetches a partition only between creating its owner node
  and deleting it, and ZooKeeper lets one session create it
  (:mod:`broker.client.groups.zookeeper.partition_ownership`). A member stops fetching everything as soon as
  its connection is lost (kazoo's SUSPENDED, after 2/3 of the session timeout without an answer), which is
  before the server can expire its session (a full timeout without hearing from it) and hand its partitions to
  others. After an expiry (LOST) it drops everything and joins again as a new member.
* **Every partition gets an owner, in bounded time, once membership settles.** The final generation gives
  every partition to exactly one live member; every member releases what it does not get before it waits
  for anything, so no claim waits on another claim, and each wait ends with a release (bounded by
  ``release_timeout_ms`` plus a commit) or a session expiry. ZooKeeper errors are retried with jittered,
  capped backoff for as long as the member lives.
* **Stop fetching, commit, then release.** In that order
  (:mod:`broker.client.groups.zookeeper.partition_handover`); the commit and the owner-node deletion are one
  transaction (:mod:`broker.client.groups.zookeeper.partition_ownership`), so the next owner cannot create the
  node before the commit is visible.
* **An expired member cannot commit**, and **a deposed leader cannot publish**: the fences, each written
  down with its recipe (:mod:`broker.client.groups.zookeeper.partition_ownership`,
  :mod:`broker.client.groups.zookeeper.fenced_election`).

Threads: kazoo's (watch callbacks, the recipes' included, only record what changed; the session listener
pauses the streams at once on SUSPENDED and LOST), and one coordination thread that does every ZooKeeper
step, in order, and makes every call into the recipes and the handover (which are not thread-safe). The
member's condition guards the streams; it is never held across a ZooKeeper call. The signals between the
threads (``_dirty``, ``_requests``) are guarded by ``_events``, a condition of their own.
"""

from __future__ import annotations

import enum
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import CommitFailedError, GroupClosedError, GroupError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.partition_assignor import StreamKey
from broker.client.groups.rebalance_listener import RebalanceListener
from broker.client.groups.zookeeper.fenced_election import FencedElection
from broker.client.groups.zookeeper.group_assignment import GroupAssignment
from broker.client.groups.zookeeper.group_leader import GroupLeader, NotLeaderError
from broker.client.groups.zookeeper.group_offsets import GroupOffsets
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.client.groups.zookeeper.partition_handover import PartitionHandover
from broker.client.groups.zookeeper.partition_ownership import PartitionOwnership
from broker.cluster import zk_paths
from broker.cluster.errors import ClusterError
from broker.cluster.zookeeper_auth import new_zookeeper_client
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: What a coordination step may raise and be retried after (ZooKeeper trouble).
_RETRIABLE = (KazooException, KazooTimeoutError, ClusterError)
#: How long the coordination thread sleeps between checks while ZooKeeper is unreachable.
_DISCONNECTED_POLL_S = 0.05
#: How long close() waits for the coordination thread.
_CLOSE_TIMEOUT_S = 30.0


@dataclass
class _Dirty:
    """What the coordination thread must do next."""

    rejoin: bool = False
    resync: bool = False
    election: bool = False
    rebalance: bool = False
    assignment: bool = False
    rewind: bool = False
    owners: set[TopicPartition] = field(default_factory=set)

    def __bool__(self) -> bool:
        flags = (self.rejoin, self.resync, self.election, self.rebalance, self.assignment, self.rewind)
        return any(flags) or bool(self.owners)

    def merge(self, other: _Dirty) -> None:
        self.rejoin |= other.rejoin
        self.resync |= other.resync
        self.election |= other.election
        self.rebalance |= other.rebalance
        self.assignment |= other.assignment
        self.rewind |= other.rewind
        self.owners |= other.owners


class _RequestKind(enum.Enum):
    COMMIT = "commit"
    RELOAD = "reload"


@dataclass
class _Request:
    """Work the application asks of the coordination thread, and its answer."""

    kind: _RequestKind
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class GroupMembership:
    """One member's membership of ``group`` (see the module docstring)."""

    def __init__(
        self,
        group: str,
        config: GroupConfig,
        zookeeper_connect: str,
        subscription: Mapping[str, int],
        streams: Mapping[StreamKey, MessageStream],
        condition: threading.Condition,
        listener: RebalanceListener | None = None,
    ) -> None:
        zk_paths.group_path(group)
        self.group = group
        self._config = config
        self._subscription = dict(subscription)
        self._client = new_zookeeper_client(
            hosts=zookeeper_connect,
            timeout=config.session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
        )
        self._offsets = GroupOffsets(self._client, group)
        self._election = FencedElection(self._client, group, self._on_election_change)
        self._ownership = PartitionOwnership(self._client, group, self._offsets, self._on_owner_freed)
        self._handover = PartitionHandover(
            group,
            streams,
            condition,
            listener or RebalanceListener(),
            self._ownership,
            self._offsets,
            config.release_timeout_ms,
        )
        self._assignment_watch = self._on_assignment_event
        self._rewind_watch = self._on_rewind_event
        # state of the coordination thread (read by other threads only as whole-object snapshots)
        self.member_id = ""
        self._joining: tuple[int, str] | None = None
        self._leader: GroupLeader | None = None
        self._assignment: GroupAssignment | None = None
        self._progress_lost = False
        self._loss_told = False  # a commit refused while disconnected told the application (see _on_state)
        # signalling between threads
        self._events = threading.Condition()
        self._dirty = _Dirty()
        self._requests: deque[_Request] = deque()
        self._connected = threading.Event()
        self._joined = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lumber-group-{group}", daemon=True)
        self._next_commit = time.monotonic() + config.auto_commit_interval_ms / 1000

    # ------------------------------------------------------------------------------ public

    def start(self) -> None:
        """Connect, join the group and start following it; raises GroupError if ZooKeeper is unreachable."""
        self._client.add_listener(self._on_state)
        try:
            self._client.start(timeout=self._config.connect_timeout_ms / 1000)
        except (KazooTimeoutError, KazooException) as exc:
            self._client.remove_listener(self._on_state)
            self._client.close()
            raise GroupError(f"group {self.group}: cannot connect to zookeeper: {exc!r}") from exc
        self._mark(rejoin=True)
        self._thread.start()
        if not self._joined.wait(self._config.connect_timeout_ms / 1000):
            log.warning("group %s: not joined yet after connect_timeout_ms; still trying", self.group)

    @property
    def client(self) -> KazooClient:
        return self._client

    @property
    def offsets(self) -> GroupOffsets:
        return self._offsets

    @property
    def generation(self) -> GroupAssignment | None:
        return self._assignment

    @property
    def is_leader(self) -> bool:
        return self._leader is not None

    def owned(self) -> set[TopicPartition]:
        return self._handover.owned()

    def target(self) -> dict[TopicPartition, int]:
        """What the latest generation this member read gives it (partition -> stream number)."""
        assignment = self._assignment
        return {} if assignment is None or not self.member_id else assignment.streams_of(self.member_id)

    def commit(self, *, mark_consumed: bool = True) -> None:
        """Commit every record handed out so far (the application is done with them); without
        ``mark_consumed``, commit the consumed positions as they are."""
        if mark_consumed:
            self._handover.mark_consumed()
        if self._progress_lost:
            self._progress_lost = False
            raise CommitFailedError(
                f"group {self.group}: the member's zookeeper session expired since the last commit; the "
                "records handed out before that were not committed and go to the partitions' next owners"
            )
        self._ask(_RequestKind.COMMIT)

    def reload_offsets(self) -> None:
        """Adopt rewound offsets now (after this member rewound the group)."""
        self._ask(_RequestKind.RELOAD)

    def close(self) -> None:
        """Commit what was handed out, release every partition, leave the group, disconnect. Idempotent."""
        if self._closing.is_set():
            return
        self._handover.mark_consumed(close_delivery=True)
        with self._events:
            self._closing.set()
            self._events.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning(
                    "group %s: the coordination thread did not stop within %.0f s",
                    self.group,
                    _CLOSE_TIMEOUT_S,
                )
        self._client.remove_listener(self._on_state)
        try:
            self._client.stop()
        finally:
            self._client.close()

    # ------------------------------------------------------------------------------ signalling

    def _mark(
        self,
        *,
        rejoin: bool = False,
        resync: bool = False,
        election: bool = False,
        rebalance: bool = False,
        assignment: bool = False,
        rewind: bool = False,
        owners: Iterable[TopicPartition] = (),
    ) -> None:
        with self._events:
            dirty = self._dirty
            dirty.rejoin |= rejoin
            dirty.resync |= resync
            dirty.election |= election
            dirty.rebalance |= rebalance
            dirty.assignment |= assignment
            dirty.rewind |= rewind
            dirty.owners.update(owners)
            self._events.notify_all()

    def _ask(self, kind: _RequestKind) -> None:
        if self._closing.is_set():
            raise GroupClosedError(f"group {self.group}: the member is closed")
        request = _Request(kind)
        with self._events:
            self._requests.append(request)
            self._events.notify_all()
        if not request.done.wait(_CLOSE_TIMEOUT_S + self._config.release_timeout_ms / 1000):
            raise CommitFailedError(
                f"group {self.group}: {kind.value} was not done in time (ZooKeeper unreachable?)"
            )
        if request.error is not None:
            raise request.error

    # ------------------------------------------------------------------------------ kazoo callbacks

    def _on_state(self, state: KazooState) -> None:
        """kazoo's session listener (its connection thread): never calls ZooKeeper."""
        if state == KazooState.CONNECTED:
            self._connected.set()
            self._loss_told = False
            client_id = self._client.client_id
            registered = self._ownership.session_id
            same = registered is not None and client_id is not None and client_id[0] == registered
            if same:
                self._mark(resync=True)
            else:
                self._mark(rejoin=True)
            return
        self._connected.clear()
        self._handover.pause()
        if state == KazooState.LOST:
            if self._handover.holds_partitions() and not self._loss_told:
                self._progress_lost = True  # what was handed out since the last commit will not be committed
            log.warning(
                "group %s: member %s: the zookeeper session expired; joining again",
                self.group,
                self.member_id,
            )
            self._mark(rejoin=True)
        else:
            log.warning(
                "group %s: member %s: zookeeper connection lost; stopped fetching", self.group, self.member_id
            )

    def _on_owner_freed(self, tp: TopicPartition) -> None:
        self._mark(owners=[tp])

    def _on_assignment_event(self, event: Any) -> None:
        if event.type != EventType.NONE:
            self._mark(assignment=True)

    def _on_election_change(self) -> None:
        self._mark(election=True)

    def _on_rewind_event(self, event: Any) -> None:
        if event.type != EventType.NONE:
            self._mark(rewind=True)

    def _on_leader_change(self) -> None:
        self._mark(rebalance=True)

    # ------------------------------------------------------------------------------ the coordination thread

    def _run(self) -> None:
        backoff_s = self._config.retry_backoff_ms / 1000
        while not self._closing.is_set():
            with self._events:
                timeout = (
                    max(self._next_commit - time.monotonic(), 0) if self._config.auto_commit_enable else None
                )
                self._events.wait_for(
                    lambda: bool(self._dirty) or bool(self._requests) or self._closing.is_set(), timeout
                )
                if self._closing.is_set():
                    break
            if not self._connected.is_set() or not self._client.connected:
                if self._fail_requests("zookeeper is not connected"):  # a refused commit told of the loss
                    self._progress_lost, self._loss_told = False, True
                self._closing.wait(_DISCONNECTED_POLL_S)
                continue
            with self._events:
                dirty, self._dirty = self._dirty, _Dirty()
            try:
                self._step(dirty)
            except _RETRIABLE as exc:
                log.warning(
                    "group %s: member %s: %r; retrying in %.2f s", self.group, self.member_id, exc, backoff_s
                )
            except Exception:  # the thread's top loop: log, back off and retry
                log.exception("group %s: member %s: coordination step failed", self.group, self.member_id)
            else:
                backoff_s = self._config.retry_backoff_ms / 1000
                continue
            with self._events:
                self._dirty.merge(dirty)
                self._dirty.resync |= not dirty.rejoin
            self._closing.wait(backoff_s * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not secrecy
            backoff_s = min(backoff_s * 2, self._config.retry_backoff_max_ms / 1000)
        self._shutdown()

    def _step(self, dirty: _Dirty) -> None:
        if dirty.rejoin:
            self._join()
            dirty = _Dirty(election=True, assignment=True, rewind=True)
        elif dirty.resync:
            self._resync()
            dirty.election = dirty.assignment = dirty.rewind = True
            dirty.owners |= self._handover.pending()
        self._handover.finish_releases()
        became_leader = False
        if dirty.election:
            became_leader = self._elect()
        if self._leader is not None and (became_leader or dirty.rebalance or dirty.resync):
            try:
                if self._leader.rebalance() is not None:
                    dirty.assignment = True
            except NotLeaderError as exc:
                log.warning("group %s: %s", self.group, exc)
                self._step_down()
                self._mark(election=True)
        if dirty.assignment:
            self._read_assignment()
            self._apply()
        elif dirty.owners and self._assignment is not None:
            freed = self._handover.claim(list(dirty.owners), self._assignment.generation)
            if freed:
                self._mark(owners=freed)
        if dirty.rewind:
            self._reload_offsets()
        while self._requests and self._connected.is_set():  # else _run refuses them: not connected
            request = self._requests.popleft()
            try:
                if request.kind is _RequestKind.COMMIT:
                    self._commit()
                else:
                    self._reload_offsets()
            except _RETRIABLE as exc:
                request.error = CommitFailedError(f"group {self.group}: {request.kind.value} failed: {exc!r}")
            except GroupError as exc:
                request.error = exc
            request.done.set()
        if self._config.auto_commit_enable and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self._config.auto_commit_interval_ms / 1000
            try:
                self._commit()
            except CommitFailedError as exc:
                log.warning("group %s: auto-commit: %s", self.group, exc)

    def _fail_requests(self, why: str) -> bool:
        """Fail every request waiting; whether a commit was one."""
        commit = False
        while self._requests:
            request = self._requests.popleft()
            commit |= request.kind is _RequestKind.COMMIT
            request.error = CommitFailedError(f"group {self.group}: {request.kind.value} failed: {why}")
            request.done.set()
        return commit

    # ------------------------------------------------------------------------------ joining and electing

    def _join(self) -> None:
        """Register as a new member (a new id every session) and stand for election."""
        self._handover.drop_all()
        self._assignment = None
        self._step_down()
        self._ownership.reset()
        self._election.reset()
        client_id = self._client.client_id
        if client_id is None:
            raise KazooTimeoutError("no zookeeper session")
        session_id = client_id[0]
        if self._joining is None or self._joining[0] != session_id:
            prefix = self._config.member_id_prefix or socket.gethostname()
            self._joining = (session_id, f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        member_id = self._joining[1]
        registration = MemberRegistration(
            member_id, self._subscription, socket.gethostname(), os.getpid(), int(time.time() * 1000)
        )
        self._ownership.register(registration, session_id)
        self._election.stand(member_id)
        self.member_id = member_id
        self._joining = None
        self._resume_streams()
        self._joined.set()
        log.info("group %s: joined as %s, subscribed to %s", self.group, member_id, self._subscription)

    def _resync(self) -> None:
        """The connection is back within the same session: every watch was dropped, set them again and
        fetch again (the owner nodes are still this session's)."""
        self._handover.finish_releases()
        gone = self._ownership.verify(self._handover.owned())
        if gone:
            log.error(
                "group %s: owner nodes of %s are not this member's any more; dropping them", self.group, gone
            )
            self._handover.drop(gone)
        self._resume_streams()
        log.info("group %s: member %s: reconnected; fetching again", self.group, self.member_id)

    def _elect(self) -> bool:
        """Lead if this member's candidate is the first (start the leader's duties), else step down.
        Returns whether it has just become the leader."""
        if not self._election.lead():
            self._step_down()
            return False
        if self._leader is not None:
            return False
        leader = GroupLeader(
            self._client,
            self.group,
            self.member_id,
            self._election,
            self._config.partition_assignment_strategy,
            self._on_leader_change,
        )
        leader.start()
        self._leader = leader
        return True

    def _resume_streams(self) -> None:
        """Fetch again, unless the connection was lost meanwhile (the session listener clears
        ``_connected`` before it takes the condition to pause, so checking under it cannot miss a loss)."""
        self._handover.resume(self._connected)

    def _step_down(self) -> None:
        if self._leader is not None:
            self._leader.stop()
            self._leader = None

    # ------------------------------------------------------------------------------ generations

    def _read_assignment(self) -> None:
        path = zk_paths.group_assignment_path(self.group)
        try:
            data, _ = self._client.get(path, watch=self._assignment_watch)
        except NoNodeError:
            if self._client.exists(path, watch=self._assignment_watch) is not None:
                self._mark(assignment=True)
            return
        try:
            assignment = GroupAssignment.decode(path, data)
        except zk_paths.ZkDataError as exc:
            log.error("group %s: %s; waiting for the leader to write a good one", self.group, exc)  # noqa: TRY400
            return
        if self._assignment is None or assignment.generation != self._assignment.generation:
            log.info(
                "group %s: member %s: generation %d gives it %d partitions",
                self.group,
                self.member_id,
                assignment.generation,
                len(assignment.streams_of(self.member_id)),
            )
        self._assignment = assignment

    def _apply(self) -> None:
        """Move to the latest generation read (:meth:`PartitionHandover.apply`)."""
        generation = 0 if self._assignment is None else self._assignment.generation
        freed = self._handover.apply(self.target(), generation)
        if freed:
            self._mark(owners=freed)

    # ------------------------------------------------------------------------------ offsets

    def _reload_offsets(self) -> None:
        """Arm the rewind watch and adopt every owned partition's offset that someone else rewrote."""
        path = zk_paths.group_rewind_path(self.group)
        try:
            self._client.get(path, watch=self._rewind_watch)
        except NoNodeError:
            if self._client.exists(path, watch=self._rewind_watch) is not None:
                self._mark(rewind=True)
        self._handover.adopt_rewound()

    def _commit(self) -> None:
        if self._handover.commit():
            self._reload_offsets()

    # ------------------------------------------------------------------------------ leaving

    def _shutdown(self) -> None:
        try:
            if self._client.connected and self._ownership.registered:
                self._handover.release_all()
                transaction = self._client.transaction()
                self._election.withdraw(transaction)
                self._ownership.withdraw(transaction)
                transaction.commit()
        except _RETRIABLE as exc:
            log.warning(
                "group %s: member %s left without releasing cleanly: %r", self.group, self.member_id, exc
            )
        except Exception:  # the thread's last act: never let it die silently
            log.exception("group %s: member %s: leaving failed", self.group, self.member_id)
        finally:
            self._step_down()
            self._fail_requests("the member is closed")
            log.info("group %s: member %s left", self.group, self.member_id)
