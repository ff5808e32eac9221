"""A member's coordination with its consumer group in ZooKeeper: join, elect, follow generations, hand over.

Layout (every path is in :mod:`broker.cluster.zk_paths`), below ``/consumers/<group>/``::

    ids/<consumer-id>          ephemeral   the member and its subscription; the id is new at every join
    leader/<consumer-id>-<seq> ephemeral   election candidate; the lowest sequence number leads
    assignment                 persistent  the generation: the leader's whole assignment (one znode)
    owners/<topic>/<p>         ephemeral   the member that owns partition p
    offsets/<topic>/<p>        persistent  the next offset the group consumes from p
    rewind                     persistent  bumped when offsets were rewound

How a rebalance goes (paper section 3.2, Algorithm 1, without the 0.8 consumer's flaws):

1. Only the leader watches the members, brokers and topics (:mod:`broker.client.group_leader`); on a
   change it computes the assignment and writes it as generation + 1 with compare-and-set, fenced by its
   own candidate node. Every other member watches just the generation node, its predecessor in the
   election and the owner nodes it waits for: one notification per member per rebalance (no herd).
2. A member that reads a new generation first **releases** what it no longer gets: it stops fetching
   those partitions and handing out their records, waits up to ``release_timeout_ms`` for the
   application to finish the records it has in hand, then commits their offsets and deletes their owner
   nodes in one transaction fenced by its registration (:mod:`broker.client.group_offsets`).
3. Then it **claims** what it gets: ``create`` of the ephemeral owner node, which succeeds for exactly one
   creator; if another member still holds it, the claimant sets a watch on that node and claims again the
   moment it is deleted (by its owner's release, or by ZooKeeper when the owner's session expires). No
   retry limit, no giving up: a claim waits exactly as long as the previous owner takes. Once created it
   reads the committed offset and starts fetching from there (``auto_offset_reset`` when there is none).

The four guarantees and what gives them:

* **At most one owner, one fetcher.** A member fetches a partition only between creating its owner node
  and deleting it, and ZooKeeper lets one session create it. A member stops fetching everything as soon as
  its connection is lost (kazoo's SUSPENDED, after 2/3 of the session timeout without an answer), which is
  before the server can expire its session (a full timeout without hearing from it) and hand its
  partitions to others. After an expiry (LOST) it drops everything and joins again as a new member.
* **Every partition gets an owner, in bounded time, once membership settles.** The final generation gives
  every partition to exactly one live member; every member releases what it does not get before it waits
  for anything, so no claim waits on another claim, and each wait ends with a release (bounded by
  ``release_timeout_ms`` plus a commit) or a session expiry. ZooKeeper errors are retried with jittered,
  capped backoff for as long as the member lives.
* **Stop fetching, commit, then release.** In that order, with the commit and the owner-node deletion in
  one transaction; the next owner cannot create the node before the commit is visible.
* **An expired member cannot commit.** Every commit checks the member's own registration in the same
  transaction; the registration's id is never reused, so it exists exactly while the session lives.

Threads: kazoo's (watch callbacks only record what changed; the session listener pauses the streams at
once on SUSPENDED and LOST), and one coordination thread that does every ZooKeeper step, in order. The
member's condition guards the streams; it is never held across a ZooKeeper call.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from broker.client.errors import CommitFailedError, GroupClosedError, GroupError
from broker.client.group_assignment import GroupAssignment
from broker.client.group_config import GroupConfig
from broker.client.group_leader import GroupLeader, NotLeaderError
from broker.client.group_offsets import GroupOffsets, OffsetCommit
from broker.client.member_registration import MemberRegistration
from broker.client.message_stream import MessageStream
from broker.client.partition_owner import PartitionOwner
from broker.client.rebalance_listener import RebalanceListener
from broker.cluster import zk_paths
from broker.cluster.errors import ClusterError
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: What a coordination step may raise and be retried after (ZooKeeper trouble).
_RETRIABLE = (KazooException, KazooTimeoutError, ClusterError)
#: How long the coordination thread sleeps between checks while ZooKeeper is unreachable.
_DISCONNECTED_POLL_S = 0.05
#: How long close() waits for the coordination thread.
_CLOSE_TIMEOUT_S = 30.0

StreamKey = tuple[str, int]


@dataclass
class _Owned:
    """A partition this member owns (its owner node exists, created by this session)."""

    stream: MessageStream
    number: int
    #: version of the offset node as last read or written (None: there is none)
    offset_version: int | None
    #: the offset committed (or read at the claim)
    committed: int | None


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
        return (
            self.rejoin
            or self.resync
            or self.election
            or self.rebalance
            or self.assignment
            or self.rewind
            or bool(self.owners)
        )

    def merge(self, other: _Dirty) -> None:
        self.rejoin |= other.rejoin
        self.resync |= other.resync
        self.election |= other.election
        self.rebalance |= other.rebalance
        self.assignment |= other.assignment
        self.rewind |= other.rewind
        self.owners |= other.owners


@dataclass
class _Request:
    """Work the application asks of the coordination thread, and its answer."""

    kind: str
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
        self._streams = dict(streams)
        self._unique_streams = list({id(s): s for s in self._streams.values()}.values())
        self._cond = condition
        self._listener = listener or RebalanceListener()
        self._client = KazooClient(
            hosts=zookeeper_connect,
            timeout=config.session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
        )
        self._offsets = GroupOffsets(self._client, group)
        self._owner_watch = self._on_owner_event
        self._assignment_watch = self._on_assignment_event
        self._election_watch = self._on_election_event
        self._rewind_watch = self._on_rewind_event
        self._owners_prefix = zk_paths.group_owners_path(group) + "/"
        # state of the coordination thread (read by other threads only as whole-object snapshots)
        self.member_id = ""
        self._member_path = ""
        self._candidate_path = ""
        self._session_id: int | None = None
        self._joining: tuple[int, str] | None = None
        self._leader: GroupLeader | None = None
        self._assignment: GroupAssignment | None = None
        self._owned: dict[TopicPartition, _Owned] = {}
        self._pending: dict[TopicPartition, int] = {}
        self._releasing: dict[TopicPartition, tuple[int | None, _Owned]] = {}
        self._owner_parents: set[str] = set()
        self._progress_lost = False
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
        return set(self._owned)

    def target(self) -> dict[TopicPartition, int]:
        """What the latest generation this member read gives it (partition -> stream number)."""
        assignment = self._assignment
        return {} if assignment is None or not self.member_id else assignment.streams_of(self.member_id)

    def commit(self, *, mark_consumed: bool = True) -> None:
        """Commit every record handed out so far (the application is done with them); without
        ``mark_consumed``, commit the consumed positions as they are."""
        if mark_consumed:
            with self._cond:
                for stream in self._unique_streams:
                    stream.mark_consumed()
        if self._progress_lost:
            self._progress_lost = False
            raise CommitFailedError(
                f"group {self.group}: the member's zookeeper session expired since the last commit; the "
                "records handed out before that were not committed and go to the partitions' next owners"
            )
        self._ask("commit")

    def reload_offsets(self) -> None:
        """Adopt rewound offsets now (after this member rewound the group)."""
        self._ask("reload")

    def close(self) -> None:
        """Commit what was handed out, release every partition, leave the group, disconnect. Idempotent."""
        if self._closing.is_set():
            return
        with self._cond:
            for stream in self._unique_streams:
                stream.close_delivery()
                stream.mark_consumed()
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

    def _ask(self, kind: str) -> None:
        if self._closing.is_set():
            raise GroupClosedError(f"group {self.group}: the member is closed")
        request = _Request(kind)
        with self._events:
            self._requests.append(request)
            self._events.notify_all()
        if not request.done.wait(_CLOSE_TIMEOUT_S + self._config.release_timeout_ms / 1000):
            raise CommitFailedError(
                f"group {self.group}: {kind} was not done in time (ZooKeeper unreachable?)"
            )
        if request.error is not None:
            raise request.error

    # ------------------------------------------------------------------------------ kazoo callbacks

    def _on_state(self, state: KazooState) -> None:
        """kazoo's session listener (its connection thread): never calls ZooKeeper."""
        if state == KazooState.CONNECTED:
            self._connected.set()
            client_id = self._client.client_id
            same = self._session_id is not None and client_id is not None and client_id[0] == self._session_id
            if same:
                self._mark(resync=True)
            else:
                self._mark(rejoin=True)
            return
        self._connected.clear()
        with self._cond:
            for stream in self._unique_streams:
                stream.pause()
        if state == KazooState.LOST:
            if self._owned or self._releasing:
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

    def _on_owner_event(self, event: Any) -> None:
        if event.type == EventType.NONE:
            return  # connection dropped: the resync after CONNECTED sets every watch again
        path: str = event.path or ""
        if path.startswith(self._owners_prefix):
            topic, _, partition = path[len(self._owners_prefix) :].rpartition("/")
            if topic and partition.isdigit():
                self._mark(owners=[TopicPartition(topic, int(partition))])

    def _on_assignment_event(self, event: Any) -> None:
        if event.type != EventType.NONE:
            self._mark(assignment=True)

    def _on_election_event(self, event: Any) -> None:
        if event.type != EventType.NONE:
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
                self._fail_requests("zookeeper is not connected")
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
            dirty.owners |= set(self._pending)
        self._finish_releases()
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
        elif dirty.owners:
            self._claim([tp for tp in dirty.owners if tp in self._pending])
        if dirty.rewind:
            self._reload_offsets()
        while self._requests:
            request = self._requests.popleft()
            try:
                if request.kind == "commit":
                    self._commit(manual=True)
                elif request.kind == "reload":
                    self._reload_offsets()
            except _RETRIABLE as exc:
                request.error = CommitFailedError(f"group {self.group}: {request.kind} failed: {exc!r}")
            except GroupError as exc:
                request.error = exc
            request.done.set()
        if self._config.auto_commit_enable and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self._config.auto_commit_interval_ms / 1000
            try:
                self._commit(manual=False)
            except CommitFailedError as exc:
                log.warning("group %s: auto-commit: %s", self.group, exc)

    def _fail_requests(self, why: str) -> None:
        while self._requests:
            request = self._requests.popleft()
            request.error = CommitFailedError(f"group {self.group}: {request.kind} failed: {why}")
            request.done.set()

    # ------------------------------------------------------------------------------ joining and electing

    def _join(self) -> None:
        """Register as a new member (a new id every session) and stand for election."""
        with self._cond:
            for stream in self._unique_streams:
                stream.remove(stream.partitions())
        self._owned.clear()
        self._pending.clear()
        self._releasing.clear()
        self._owner_parents.clear()
        self._assignment = None
        self._step_down()
        client_id = self._client.client_id
        if client_id is None:
            raise KazooTimeoutError("no zookeeper session")
        session_id = client_id[0]
        if self._joining is None or self._joining[0] != session_id:
            prefix = self._config.member_id_prefix or socket.gethostname()
            self._joining = (session_id, f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        member_id = self._joining[1]
        group = self.group
        for path in (
            zk_paths.group_ids_path(group),
            zk_paths.group_leader_path(group),
            zk_paths.group_owners_path(group),
        ):
            self._client.ensure_path(path)
        member_path = zk_paths.group_member_path(group, member_id)
        registration = MemberRegistration(
            member_id, self._subscription, socket.gethostname(), os.getpid(), int(time.time() * 1000)
        )
        try:
            self._client.create(member_path, registration.encode(), ephemeral=True)
        except NodeExistsError:  # our own create, whose reply was lost
            _, stat = self._client.get(member_path)
            if stat.ephemeralOwner != session_id:
                raise GroupError(
                    f"group {group}: member id {member_id} is taken by another session"
                ) from None
        leader_dir = zk_paths.group_leader_path(group)
        mine = [c for c in self._client.get_children(leader_dir) if c.startswith(member_id + "-")]
        if mine:
            candidate = f"{leader_dir}/{mine[0]}"
        else:
            candidate = self._client.create(
                zk_paths.group_candidate_prefix(group, member_id),
                member_id.encode(),
                ephemeral=True,
                sequence=True,
            )
        self.member_id = member_id
        self._member_path = member_path
        self._candidate_path = candidate
        self._session_id = session_id
        self._joining = None
        self._resume_streams()
        self._joined.set()
        log.info("group %s: joined as %s, subscribed to %s", group, member_id, self._subscription)

    def _resync(self) -> None:
        """The connection is back within the same session: every watch was dropped, set them again and
        fetch again (the owner nodes are still this session's)."""
        self._finish_releases()
        reads = [(tp, self._client.exists_async(self._owner_path(tp))) for tp in self._owned]
        gone = []
        for tp, result in reads:
            stat = result.get()
            if stat is None or stat.ephemeralOwner != self._session_id:
                gone.append(tp)
        if gone:
            log.error(
                "group %s: owner nodes of %s are not this member's any more; dropping them", self.group, gone
            )
            with self._cond:
                for tp in gone:
                    self._owned.pop(tp).stream.remove([tp])
        self._resume_streams()
        log.info("group %s: member %s: reconnected; fetching again", self.group, self.member_id)

    def _elect(self) -> bool:
        """Lead if this member's candidate is the first; else watch the one just before. Returns whether
        it has just become the leader."""
        leader_dir = zk_paths.group_leader_path(self.group)
        name = self._candidate_path.rsplit("/", 1)[1]
        while True:
            children = self._client.get_children(leader_dir)
            if name not in children:
                log.warning("group %s: candidate %s vanished; standing again", self.group, name)
                self._candidate_path = self._client.create(
                    zk_paths.group_candidate_prefix(self.group, self.member_id),
                    self.member_id.encode(),
                    ephemeral=True,
                    sequence=True,
                )
                name = self._candidate_path.rsplit("/", 1)[1]
                continue
            ordered = sorted(children, key=_candidate_order)
            index = ordered.index(name)
            if index == 0:
                if self._leader is not None:
                    return False
                leader = GroupLeader(
                    self._client,
                    self.group,
                    self.member_id,
                    self._candidate_path,
                    self._config.partition_assignment_strategy,
                    self._on_leader_change,
                )
                leader.start()
                self._leader = leader
                return True
            self._step_down()
            if (
                self._client.exists(f"{leader_dir}/{ordered[index - 1]}", watch=self._election_watch)
                is not None
            ):
                return False

    def _resume_streams(self) -> None:
        """Fetch again, unless the connection was lost meanwhile (the session listener clears
        ``_connected`` before it takes the condition to pause, so checking under it cannot miss a loss)."""
        with self._cond:
            if self._connected.is_set():
                for stream in self._unique_streams:
                    stream.resume()

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
        """Move to the latest generation: release first, then move between own streams, then claim."""
        target = self.target()
        unknown = {tp: n for tp, n in target.items() if (tp.topic, n) not in self._streams}
        if unknown:
            log.error(
                "group %s: generation gives this member streams it does not have: %s", self.group, unknown
            )
            target = {tp: n for tp, n in target.items() if tp not in unknown}
        release = [tp for tp in self._owned if tp not in target]
        if release:
            self._release(release)
        moves = [tp for tp, owned in self._owned.items() if target[tp] != owned.number]
        if moves:
            self._move(moves, target)
        self._pending = {tp: number for tp, number in target.items() if tp not in self._owned}
        if self._pending:
            self._claim(list(self._pending))

    def _release(self, partitions: list[TopicPartition], *, all_consumed: bool = False) -> None:
        """Stop fetching, wait for the records in hand, then commit and delete the owner nodes."""
        by_stream: dict[int, tuple[MessageStream, list[TopicPartition]]] = {}
        for tp in partitions:
            owned = self._owned[tp]
            by_stream.setdefault(id(owned.stream), (owned.stream, []))[1].append(tp)
        with self._cond:
            for stream, tps in by_stream.values():
                stream.stop(tps)
        self._call_listener(self._listener.on_partitions_revoked, sorted(partitions))
        with self._cond:
            if all_consumed:
                for stream, _ in by_stream.values():
                    stream.mark_consumed()
            elif not self._cond.wait_for(
                lambda: not any(s.in_hand(tps) for s, tps in by_stream.values()),
                self._config.release_timeout_ms / 1000,
            ):
                log.warning(
                    "group %s: the application did not come back within release_timeout_ms; the records it "
                    "holds of %s will be delivered again by their next owners",
                    self.group,
                    sorted(partitions),
                )
            positions: dict[TopicPartition, int | None] = {}
            for stream, tps in by_stream.values():
                positions.update(stream.remove(tps))
        for tp in partitions:
            self._releasing[tp] = (positions.get(tp), self._owned.pop(tp))
        self._finish_releases()

    def _finish_releases(self) -> None:
        if not self._releasing:
            return
        commits = {
            tp: OffsetCommit(position, owned.offset_version)
            for tp, (position, owned) in self._releasing.items()
            if position is not None and position != owned.committed
        }
        outcome = self._offsets.commit(
            self._member_path, self.member_id, commits, release=list(self._releasing)
        )
        if outcome.fenced:
            log.warning(
                "group %s: released %d partitions without committing: session expired",
                self.group,
                len(commits),
            )
        elif commits:
            log.debug(
                "group %s: committed %s and released",
                self.group,
                {str(tp): c.offset for tp, c in commits.items()},
            )
        self._releasing.clear()

    def _move(self, partitions: list[TopicPartition], target: Mapping[TopicPartition, int]) -> None:
        """Partitions this member keeps but in another of its streams: no ZooKeeper step."""
        with self._cond:
            for tp in partitions:
                owned = self._owned[tp]
                owned.stream.stop([tp])
            self._cond.wait_for(
                lambda: not any(self._owned[tp].stream.in_hand([tp]) for tp in partitions),
                self._config.release_timeout_ms / 1000,
            )
            for tp in partitions:
                owned = self._owned[tp]
                position = owned.stream.remove([tp]).get(tp)
                number = target[tp]
                owned.stream = self._streams[(tp.topic, number)]
                owned.number = number
                owned.stream.add(tp, position)

    def _claim(self, partitions: list[TopicPartition]) -> None:
        """Create the owner nodes of ``partitions``; wait (watch) on those still held by someone else."""
        if not partitions or self._assignment is None:
            return
        generation = self._assignment.generation
        session_id = self._session_id
        for topic in {tp.topic for tp in partitions}:
            parent = zk_paths.group_owners_path(self.group, topic)
            if parent not in self._owner_parents:
                self._client.ensure_path(parent)
                self._owner_parents.add(parent)
        creates = [
            (
                tp,
                self._client.create_async(
                    self._owner_path(tp),
                    PartitionOwner(self.member_id, self._pending[tp], generation).encode(),
                    ephemeral=True,
                ),
            )
            for tp in partitions
        ]
        got: list[TopicPartition] = []
        busy: list[TopicPartition] = []
        freed: list[TopicPartition] = []
        for tp, result in creates:
            try:
                result.get()
            except NodeExistsError:
                busy.append(tp)
            except NoNodeError:  # the topic's owners folder was deleted meanwhile: make it again
                self._owner_parents.clear()
                freed.append(tp)
            else:
                got.append(tp)
        reads = [(tp, self._client.get_async(self._owner_path(tp), watch=self._owner_watch)) for tp in busy]
        for tp, result in reads:
            try:
                _, stat = result.get()
            except NoNodeError:
                freed.append(tp)  # released meanwhile: claim again at once
                continue
            if stat.ephemeralOwner == session_id:
                got.append(tp)  # this session's own node (a create whose reply was lost)
        committed = self._offsets.read(got)
        with self._cond:
            if self._session_id != session_id:
                return
            for tp in got:
                number = self._pending.pop(tp)
                stream = self._streams[(tp.topic, number)]
                found = committed.get(tp)
                offset = None if found is None else found.offset
                self._owned[tp] = _Owned(stream, number, None if found is None else found.zk_version, offset)
                stream.add(tp, offset)
        if got:
            log.debug("group %s: member %s claimed %s", self.group, self.member_id, sorted(got))
            self._call_listener(self._listener.on_partitions_assigned, sorted(got))
        if freed:
            self._mark(owners=freed)

    # ------------------------------------------------------------------------------ offsets

    def _commit(self, *, manual: bool) -> None:
        with self._cond:
            positions = {tp: owned.stream.position(tp) for tp, owned in self._owned.items()}
        commits = {
            tp: OffsetCommit(position, self._owned[tp].offset_version)
            for tp, position in positions.items()
            if position is not None and position != self._owned[tp].committed
        }
        if not commits:
            return
        outcome = self._offsets.commit(self._member_path, self.member_id, commits)
        if outcome.fenced:
            raise CommitFailedError(
                f"group {self.group}: {self._member_path} is gone: the member's session expired; "
                "nothing committed"
            )
        for tp, version in outcome.versions.items():
            owned = self._owned.get(tp)
            if owned is not None:
                owned.offset_version = version
                owned.committed = commits[tp].offset
        if outcome.conflicts:
            self._reload_offsets()

    def _reload_offsets(self) -> None:
        """Arm the rewind watch and adopt every owned partition's offset that someone else rewrote."""
        path = zk_paths.group_rewind_path(self.group)
        try:
            self._client.get(path, watch=self._rewind_watch)
        except NoNodeError:
            if self._client.exists(path, watch=self._rewind_watch) is not None:
                self._mark(rewind=True)
        found = self._offsets.read(list(self._owned))
        with self._cond:
            for tp, committed in found.items():
                owned = self._owned.get(tp)
                if owned is None or committed is None or committed.zk_version == owned.offset_version:
                    continue
                owned.offset_version = committed.zk_version
                owned.committed = committed.offset
                if committed.member == self.member_id:
                    continue  # our own commit whose reply was lost
                log.info("group %s: %s rewound to offset %d", self.group, tp, committed.offset)
                owned.stream.rewind(tp, committed.offset)

    # ------------------------------------------------------------------------------ leaving

    def _shutdown(self) -> None:
        try:
            if self._client.connected and self._session_id is not None and self._member_path:
                self._finish_releases()
                if self._owned:
                    self._release(list(self._owned), all_consumed=True)
                transaction = self._client.transaction()
                transaction.delete(self._candidate_path)
                transaction.delete(self._member_path)
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

    # ------------------------------------------------------------------------------ helpers

    def _owner_path(self, tp: TopicPartition) -> str:
        return zk_paths.group_owner_path(self.group, tp.topic, tp.partition)

    def _call_listener(
        self, callback: Callable[[list[TopicPartition]], None], partitions: list[TopicPartition]
    ) -> None:
        try:
            callback(partitions)
        except Exception:  # the application's code must not stop the handover
            log.exception("group %s: rebalance listener %s failed", self.group, callback.__name__)


def _candidate_order(name: str) -> tuple[int, str]:
    try:
        return zk_paths.candidate_sequence(name), name
    except zk_paths.ZkDataError:
        return 1 << 62, name  # not a candidate of ours: never the leader
