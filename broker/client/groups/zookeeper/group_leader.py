"""The group leader's job: compute the assignment and publish it as the next generation.

Only the leader (the member whose election candidate has the lowest sequence number, see
:mod:`broker.client.groups.zookeeper.fenced_election`) watches what an assignment depends on, so a change
notifies one member, not the whole group (no herd effect):

* the members, ``/consumers/<group>/ids`` (children; each member's subscription is read once, when it
  appears: a registration never changes);
* the brokers and topics, through a :class:`~broker.cluster.cluster_watcher.ClusterWatcher` (a topic's
  partition count; a broker coming or going is re-evaluated too).

:meth:`GroupLeader.rebalance` computes the assignment with the configured strategy
(:mod:`broker.client.groups.partition_assignor`) over every partition of every subscribed topic. Lumber keeps
one replica per partition, so a partition whose broker is down has nowhere else to be read from: it stays
with its owner, whose fetcher resumes when the broker is back, and a broker bounce moves nothing. When
the result differs from the current generation, the leader writes generation + 1 with one transaction,
fenced by its candidate
(:meth:`~broker.client.groups.zookeeper.fenced_election.FencedElection.fenced_transaction`)::

    check /consumers/<group>/leader/<its candidate>   version 0   still the leader (its session lives)
    set   /consumers/<group>/assignment               version v   nobody wrote since it read (create if none)

so a deposed leader, or two members that both believe they lead for a moment, can never overwrite a newer
generation. Not thread-safe: the member's coordination thread drives it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from broker.client.errors import GroupError
from broker.client.groups.partition_assignor import assign
from broker.client.groups.zookeeper.fenced_election import FencedElection
from broker.client.groups.zookeeper.group_assignment import GroupAssignment
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.cluster import zk_paths
from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher

log = logging.getLogger(__name__)

#: Compare-and-set rounds of one rebalance before it is left for the next event.
_PUBLISH_ROUNDS = 5


class NotLeaderError(GroupError):
    """The leader's candidate node is gone: this member does not lead any more."""


class GroupLeader:
    """Leader duties of one member while it leads (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        group: str,
        member_id: str,
        election: FencedElection,
        strategy: str,
        on_change: Callable[[], None],
    ) -> None:
        self._client = client
        self._group = group
        self._member_id = member_id
        self._election = election
        self._strategy = strategy
        self._on_change = on_change
        self._members_watch = self._on_members_event
        self._registrations: dict[str, MemberRegistration] = {}
        self._watcher: ClusterWatcher | None = None
        self._stopped = False

    def start(self) -> None:
        """Start following the brokers and topics (raises ClusterError if ZooKeeper cannot be read)."""
        watcher = ClusterWatcher(self._client, on_change=self._on_cluster_change)
        watcher.start()
        self._watcher = watcher
        log.info("group %s: %s leads the group", self._group, self._member_id)

    def stop(self) -> None:
        self._stopped = True
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    @property
    def view(self) -> ClusterView | None:
        return None if self._watcher is None else self._watcher.view

    def rebalance(self) -> GroupAssignment | None:
        """Publish the assignment for the current members and partitions if it changed; returns the new
        generation (``None``: nothing changed). Raises :class:`NotLeaderError` when deposed."""
        if self._watcher is None:
            raise NotLeaderError(f"group {self._group}: the leader is not started")
        for _ in range(_PUBLISH_ROUNDS):
            members = self._read_members()
            view = self._watcher.view
            topics = {topic for registration in members.values() for topic in registration.subscription}
            counts = {topic: len(view.topics[topic]) for topic in topics if topic in view.topics}
            assignment = assign(self._strategy, {m: r.subscription for m, r in members.items()}, counts)
            current, version = self._read_current()
            if (
                current is not None
                and current.assignment == assignment
                and current.strategy == self._strategy
            ):
                return None
            new = GroupAssignment(
                generation=(current.generation + 1) if current is not None else 1,
                leader=self._member_id,
                strategy=self._strategy,
                assignment=assignment,
                timestamp_ms=int(time.time() * 1000),
            )
            if self._publish(new, version):
                log.info(
                    "group %s: generation %d: %d members, %d partitions of %s",
                    self._group,
                    new.generation,
                    len(members),
                    sum(counts.values()),
                    sorted(counts),
                )
                return new
        self._on_change()  # kept losing the race: try again on the next round of events
        return None

    def _publish(self, new: GroupAssignment, version: int | None) -> bool:
        path = zk_paths.group_assignment_path(self._group)
        transaction = self._election.fenced_transaction()
        if version is None:
            transaction.create(path, new.encode())
        else:
            transaction.set_data(path, new.encode(), version=version)
        results: list[Any] = transaction.commit()
        fence = self._election.fence_failure(results)
        if fence is not None:
            raise NotLeaderError(f"group {self._group}: {self._election.candidate_path} is gone ({fence!r})")
        errors = [
            (i, r)
            for i, r in enumerate(results)
            if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency)
        ]
        if not errors:
            return True
        _, error = errors[0]
        if isinstance(error, BadVersionError | NodeExistsError | NoNodeError):
            log.info("group %s: the assignment changed while it was computed; computing again", self._group)
            return False
        raise error

    def _read_current(self) -> tuple[GroupAssignment | None, int | None]:
        path = zk_paths.group_assignment_path(self._group)
        try:
            data, stat = self._client.get(path)
        except NoNodeError:
            return None, None
        try:
            return GroupAssignment.decode(path, data), stat.version
        except zk_paths.ZkDataError as exc:
            log.error("group %s: %s; overwriting it", self._group, exc)  # noqa: TRY400 - bad data, no traceback
            return None, stat.version

    def _read_members(self) -> dict[str, MemberRegistration]:
        ids_path = zk_paths.group_ids_path(self._group)
        children = sorted(self._client.get_children(ids_path, watch=self._members_watch))
        known = {member: self._registrations[member] for member in children if member in self._registrations}
        pending = [
            (member, self._client.get_async(zk_paths.group_member_path(self._group, member)))
            for member in children
            if member not in known
        ]
        for member, result in pending:
            path = zk_paths.group_member_path(self._group, member)
            try:
                data, _ = result.get()
            except NoNodeError:
                continue  # left meanwhile; the children watch has fired
            try:
                known[member] = MemberRegistration.decode(member, path, data)
            except zk_paths.ZkDataError as exc:
                log.error("group %s: ignoring member %s: %s", self._group, member, exc)  # noqa: TRY400
        self._registrations = known
        return known

    def _on_members_event(self, event: Any) -> None:
        if not self._stopped:
            self._on_change()

    def _on_cluster_change(self, old: ClusterView, new: ClusterView) -> None:
        if not self._stopped:
            self._on_change()
