"""The controller's partition reassignments (Kafka's ``onPartitionReassignment``, ZooKeeper mode, KIP-455).

RS, AR, RR, ORS and TRS are Kafka's letters (:mod:`broker.cluster.partition_reassignment`). A reassignment
is asked for through AlterPartitionReassignments (:meth:`PartitionReassigner.submit`, answered per
partition) or ``/admin/reassign_partitions`` (``lumber cluster reassign --execute``); a null target
cancels. Every pass of the controller thread (:mod:`broker.server.controller`) calls
:meth:`PartitionReassigner.run`, which does, in order:

1. **Start** (Kafka's U1 and A1) each asked partition: checked as Kafka's ``validateReplicas`` (a target
   that is empty, names a broker twice or a negative id, or adds a broker that is not live:
   INVALID_REPLICA_ASSIGNMENT; an unknown partition: UNKNOWN_TOPIC_OR_PARTITION; a cancel of a partition
   not moving: NO_REASSIGNMENT_IN_PROGRESS). A new target supplants a move in progress (Kafka's API does;
   ``lumber cluster reassign`` refuses unless ``--additional``). One multi per topic writes RS = TRS + ORS,
   AR = TRS - ORS, RR = ORS - TRS into the topic node and bumps each partition's leader epoch
   (:func:`broker.cluster.reassignment_store.write_moves`): the brokers of AR see the partition assigned
   to them and start following its leader; the leader sees the new epoch and tracks the new followers.
   Replicas a supplanting or cancelling target drops leave the ISR in the same write (Kafka's U3).
2. **Wait** (Kafka's phase A): the leader adds each new replica to the ISR once it caught up
   (:mod:`broker.server.partition`); every ISR change wakes the controller.
3. **Complete** (Kafka's B3-B6) a partition once TRS is inside the ISR: one multi sets RS = TRS (AR, RR
   gone) and the state: the leader stays if it is in TRS and live, else the first live TRS replica in the
   ISR leads (Kafka's ``reassignPartitionLeaderElection``); the ISR loses RR; the leader epoch goes up.
   The brokers of RR see the partition no longer assigned to them: they stop their replica and delete its
   log (Kafka's StopReplica with delete; :meth:`broker.server.replica_manager.ReplicaManager.apply`).
4. **Tidy** ``/admin/reassign_partitions`` (Kafka's B7): entries whose partition now has exactly the
   asked replicas, and entries refused, are removed; the node is deleted when empty.

Everything lives in ZooKeeper, so a new controller carries on from the view it reads (Kafka's
``initializePartitionReassignments``): level-triggered like the rest of Lumber's controller. A target
broker that is down only delays step 3 until it is back and caught up. Writes are conditional on the
versions the view read; a write that loses (an ISR change meanwhile) is tried again from the next view.

Concurrency: :meth:`submit` runs on request handler threads: it queues the request, wakes the controller and
waits for the answer (bounded); everything else runs on the controller thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from broker.cluster import reassignment_store
from broker.cluster.cluster_view import ClusterView
from broker.cluster.errors import (
    ClusterError,
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    NotControllerError,
)
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.cluster.partition_state import PartitionState
from broker.record.topic_partition import TopicPartition
from broker.server.errors import RequestTimedOutError, ServerError, UnknownTopicOrPartitionError

logger = logging.getLogger(__name__)

#: A partition's answer: None (started, or cancelled) or why not.
Outcome = ClusterError | ServerError | None
#: How many times one pass tries a topic's write again after losing to a newer version.
_WRITE_TRIES = 3


@dataclass
class _Request:
    """An AlterPartitionReassignments waiting for the controller thread."""

    targets: dict[TopicPartition, tuple[int, ...] | None]
    results: dict[TopicPartition, Outcome] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)


class PartitionReassigner:
    """The controller's reassignment steps (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        *,
        refresh: Callable[[], ClusterView],
        wake: Callable[[str], None],
    ) -> None:
        self._client = client
        self._broker_id = broker_id
        self._refresh = refresh
        self._wake = wake
        self._lock = threading.Lock()
        self._requests: list[_Request] = []
        self._active = False

    # ------------------------------------------------------------------------------------ handler threads

    def set_active(self, active: bool) -> None:
        """The controller was elected (True) or resigned (False): a resignation fails the waiting requests."""
        with self._lock:
            self._active = active
            waiting: list[_Request] = []
            if not active:
                waiting, self._requests = self._requests, []
        for request in waiting:
            for tp in request.targets:
                request.results.setdefault(tp, NotControllerError(self._broker_id, -1))
            request.done.set()

    def submit(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        timeout_s: float,
        controller_id: int,
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments: start (or, with None, cancel) each partition's move; returns each
        partition's outcome once the controller thread wrote (or refused) it. NOT_CONTROLLER when this broker
        is not the controller; REQUEST_TIMED_OUT for partitions not handled within ``timeout_s``."""
        request = _Request({tp: None if r is None else tuple(r) for tp, r in targets.items()})
        with self._lock:
            if not self._active:
                return {tp: NotControllerError(self._broker_id, controller_id) for tp in targets}
            self._requests.append(request)
        self._wake("reassignment requested")
        request.done.wait(timeout_s)
        with self._lock:
            if request in self._requests:
                self._requests.remove(request)
            return {
                tp: request.results.get(
                    tp, RequestTimedOutError(tp, "reassigned by the controller", int(timeout_s * 1000))
                )
                for tp in targets
            }

    # ------------------------------------------------------------------------------------ controller thread

    def run(
        self,
        view: ClusterView,
        controller_epoch: int,
        epoch_zk_version: int,
        written: dict[TopicPartition, int],
    ) -> tuple[ClusterView, set[TopicPartition]]:
        """One pass's steps 1, 3 and 4; returns the view it ended with and the partitions it wrote (the
        controller leaves them out of its other decisions this pass). ``written`` is the controller's
        partition -> state znode version last written, updated here."""
        with self._lock:
            requests, self._requests = self._requests, []
        zk_found = reassignment_store.read_requests(self._client)
        zk_targets = zk_found[0] if zk_found is not None else {}
        asked: dict[TopicPartition, tuple[int, ...] | None] = {}
        for tp, target in zk_targets.items():
            current = view.reassignment(tp)
            if tp in view.states and current.target_replicas == target:
                continue  # done (tidied below) or already moving there
            asked[tp] = target
        api_asked = {tp: target for request in requests for tp, target in request.targets.items()}
        asked.update(api_asked)
        touched: set[TopicPartition] = set()
        outcomes: dict[TopicPartition, Outcome] = {}
        if asked:
            view = self._refresh()  # checked against the live brokers now, not the view the pass began with
            view, outcomes = self._start(view, asked, controller_epoch, epoch_zk_version, written, touched)
        for request in requests:
            request.results.update({tp: outcomes.get(tp) for tp in request.targets})
            request.done.set()
        view = self._complete(view, controller_epoch, epoch_zk_version, written, touched)
        for tp in sorted(zk_targets):
            refused = outcomes.get(tp)
            if refused is not None and tp not in api_asked:
                logger.warning(
                    "controller %d: %s: refusing the reassignment to %s asked in /admin/reassign_partitions: "
                    "%s",
                    self._broker_id,
                    tp,
                    list(zk_targets[tp]),
                    refused,
                )
        if zk_found is not None:
            done = [
                tp
                for tp, target in zk_targets.items()
                if tp in api_asked
                or outcomes.get(tp) is not None
                or tp.partition not in view.topics.get(tp.topic, {})
                or (view.reassignment(tp).replicas == target and not view.reassignment(tp).moving)
            ]
            if done or not zk_targets:
                reassignment_store.finish_requests(self._client, done, epoch_zk_version)
        return view, touched

    def _start(
        self,
        view: ClusterView,
        asked: Mapping[TopicPartition, tuple[int, ...] | None],
        controller_epoch: int,
        epoch_zk_version: int,
        written: dict[TopicPartition, int],
        touched: set[TopicPartition],
    ) -> tuple[ClusterView, dict[TopicPartition, Outcome]]:
        outcomes: dict[TopicPartition, Outcome] = {}
        for topic in sorted({tp.topic for tp in asked}):
            mine = {tp: target for tp, target in asked.items() if tp.topic == topic}
            for _ in range(_WRITE_TRIES):
                changes: dict[int, PartitionReassignment] = {}
                states: dict[TopicPartition, tuple[PartitionState, PartitionState]] = {}
                for tp, target in sorted(mine.items()):
                    try:
                        new = self._checked(view, tp, target)
                        state = view.states.get(tp)
                        if state is None:
                            raise UnknownTopicOrPartitionError(tp)
                        if new == view.reassignment(tp):
                            outcomes[tp] = None
                            continue
                        live = set(view.brokers)
                        states[tp] = (state, _moved_state(tp, state, new, live, controller_epoch))
                        changes[tp.partition] = new
                        outcomes[tp] = None
                    except (ClusterError, ServerError) as exc:
                        outcomes[tp] = exc
                if not changes:
                    break
                if self._write(view, topic, changes, states, epoch_zk_version, written, touched):
                    for p, new in sorted(changes.items()):
                        old = view.reassignment(TopicPartition(topic, p))
                        logger.info(
                            "controller %d: %s-%d: reassigning %s -> %s (adding %s, removing %s)",
                            self._broker_id,
                            topic,
                            p,
                            list(old.origin_replicas),
                            list(new.target_replicas),
                            list(new.adding),
                            list(new.removing),
                        )
                    break
                view = self._refresh()
            else:
                for tp in mine:
                    if outcomes.get(tp) is None:
                        outcomes[tp] = RequestTimedOutError(tp, "reassigned (its state kept changing)", 0)
        return view, outcomes

    def _checked(
        self, view: ClusterView, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> PartitionReassignment:
        """The partition's RS, AR, RR after reassigning it to ``target`` (None: cancel), checked as Kafka's
        ``validateReplicas``."""
        if tp.partition not in view.topics.get(tp.topic, {}):
            raise UnknownTopicOrPartitionError(tp)
        current = view.reassignment(tp)
        if target is None:
            if not current.moving:
                raise NoReassignmentInProgressError(f"{tp}: no reassignment in progress to cancel")
            return current.reassign_to(current.origin_replicas)
        if not target:
            raise InvalidReplicaAssignmentError(f"{tp}: empty replica list in the reassignment")
        if len(set(target)) != len(target):
            raise InvalidReplicaAssignmentError(f"{tp}: duplicate replica ids in {list(target)}")
        if any(b < 0 for b in target):
            raise InvalidReplicaAssignmentError(f"{tp}: invalid broker id in {list(target)}")
        new = current.reassign_to(target)
        dead = [b for b in new.adding if b not in view.brokers]
        if dead:
            raise InvalidReplicaAssignmentError(
                f"{tp}: the reassignment {list(target)} adds broker {dead[0]}, which is not live (live "
                f"brokers: {sorted(view.brokers) or 'none'})"
            )
        return new

    def _complete(
        self,
        view: ClusterView,
        controller_epoch: int,
        epoch_zk_version: int,
        written: dict[TopicPartition, int],
        touched: set[TopicPartition],
    ) -> ClusterView:
        """Step 3 for every moving partition whose TRS is in the ISR and has a live leader to be."""
        live = set(view.brokers)
        ready: dict[str, dict[TopicPartition, tuple[PartitionState, PartitionState]]] = {}
        for tp, moving in view.reassignments.items():
            state = view.states.get(tp)
            if tp in touched or state is None or state.zk_version < written.get(tp, -1):
                continue
            target = moving.target_replicas
            if not set(target) <= set(state.isr):
                continue
            if state.leader in target and state.leader in live:
                leader = state.leader
            else:
                leader = next((r for r in target if r in live and r in state.isr), -1)
                if leader < 0:
                    continue  # no live target replica in the ISR to lead yet
            new = PartitionState(
                leader,
                state.leader_epoch + 1,
                tuple(r for r in state.isr if r in target),
                controller_epoch,
                state.zk_version,
            )
            ready.setdefault(tp.topic, {})[tp] = (state, new)
        for topic, states in sorted(ready.items()):
            changes = {tp.partition: view.reassignment(tp).completed() for tp in states}
            if self._write(view, topic, changes, states, epoch_zk_version, written, touched):
                for tp, (old, new) in sorted(states.items()):
                    logger.info(
                        "controller %d: %s: reassignment complete: replicas %s, leader %d -> %d (epoch %d), "
                        "ISR %s",
                        self._broker_id,
                        tp,
                        list(changes[tp.partition].replicas),
                        old.leader,
                        new.leader,
                        new.leader_epoch,
                        list(new.isr),
                    )
            else:
                self._wake("lost writes")
        return view

    def _write(
        self,
        view: ClusterView,
        topic: str,
        changes: Mapping[int, PartitionReassignment],
        states: Mapping[TopicPartition, tuple[PartitionState, PartitionState]],
        epoch_zk_version: int,
        written: dict[TopicPartition, int],
        touched: set[TopicPartition],
    ) -> bool:
        """One topic's multi; True if written."""
        version = view.topic_versions.get(topic)
        if version is None:
            return False
        partitions = {p: view.reassignment(TopicPartition(topic, p)) for p in view.topics.get(topic, {})}
        partitions.update(changes)
        stored = reassignment_store.write_moves(
            self._client, topic, version, partitions, states, epoch_zk_version
        )
        if stored is None:
            logger.info("controller %d: topic %s changed meanwhile; reading it again", self._broker_id, topic)
            return False
        for tp, state in stored.items():
            written[tp] = state.zk_version
            touched.add(tp)
        return True


def _moved_state(
    tp: TopicPartition,
    state: PartitionState,
    new: PartitionReassignment,
    live: set[int],
    controller_epoch: int,
) -> PartitionState:
    """The state written with step 1: the leader epoch bumped (Kafka's A1), the replicas ``new`` drops out
    of the ISR (U3); a leader ``new`` drops (a cancel of a move whose new replica had come to lead) hands
    over to the first live replica of ``new`` in the ISR; a move that is already complete (a cancel, a
    reorder) gets step 3's leader."""
    isr = tuple(r for r in state.isr if r in new.replicas)
    leader = state.leader
    needs_leader = leader >= 0 and (leader not in new.replicas or (not new.moving and leader not in live))
    if needs_leader:
        leader = next((r for r in new.replicas if r in live and r in isr), -1)
        if leader < 0:
            raise InvalidReplicaAssignmentError(
                f"{tp}: no live in-sync replica of {list(new.replicas)} could lead (ISR {list(state.isr)})"
            )
    if not isr:
        raise InvalidReplicaAssignmentError(
            f"{tp}: none of the in-sync replicas {list(state.isr)} would stay among {list(new.replicas)}"
        )
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch, state.zk_version)
