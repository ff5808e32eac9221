"""A member's registration in its group and the partitions it owns, with every commit fenced by the first.

A recipe in the shape of kazoo's ``Lock`` / ``SetPartitioner`` (one ephemeral node per resource, a watch
on a node held by someone else), sized to what
:class:`~broker.client.groups.zookeeper.group_membership.GroupMembership` needs of it. Its znodes
(:mod:`broker.cluster.zk_paths`)::

    /consumers/<group>/ids/<consumer-id>    ephemeral   the registration: the member, its subscription
                                                        (:mod:`broker.client.groups.zookeeper.member_registration`)
    /consumers/<group>/owners/<topic>/<p>   ephemeral   the member that owns partition p
                                                        (:mod:`broker.client.groups.zookeeper.partition_owner`)

and, through :class:`~broker.client.groups.zookeeper.group_offsets.GroupOffsets`,
``/consumers/<group>/offsets/<topic>/<p>``.

The rules, and what gives them:

* **The fence: an expired member cannot commit.** :meth:`PartitionOwnership.register` creates the
  registration; its id is new at every join (a random suffix), so the node exists exactly while the
  session that created it lives. Every :meth:`PartitionOwnership.commit` is one transaction that checks the
  registration first (``check ids/<consumer-id> version 0``): once the session has expired nothing it
  commits lands, however late the commit comes. A registration whose create reply was lost is found again
  (``NodeExists`` and this session's ``ephemeralOwner``); another session's is an error.
* **At most one owner.** :meth:`PartitionOwnership.claim` creates the owner node, which succeeds for exactly
  one session. A node held by someone else gets a watch, and its deletion (its owner's release, or its
  owner's session expiring) calls ``on_freed``: the member claims again at once, so a claim waits exactly
  as long as the previous owner takes, no retry limit and no polling. A node that is already this
  session's (a create whose reply was lost) counts as claimed.
* **Commit, then release.** Letting partitions go is :meth:`commit` with ``release``: their last offsets
  and the deletion of their owner nodes in the same fenced transaction, so whoever claims them next reads
  those offsets. (Stopping the fetch before that, and waiting for the application's records in hand, is
  the member's: :mod:`broker.client.groups.zookeeper.group_membership`.)
* **After a reconnect within the session**, :meth:`verify` says which owner nodes are no longer this
  session's (deleted by hand): the member must stop fetching those.

States: UNREGISTERED --register()--> REGISTERED --reset() (the session is gone, and its ephemeral nodes
with it)--> UNREGISTERED. Threads: not thread-safe; the member's coordination thread makes every call.
The owner-node watch runs on kazoo's event thread and only calls ``on_freed`` (which must only record the
partition; it must not call ZooKeeper).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from broker.client.errors import GroupError
from broker.client.groups.zookeeper.group_offsets import CommitOutcome, GroupOffsets, OffsetCommit
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)


@dataclass
class Claim:
    """What one :meth:`PartitionOwnership.claim` got."""

    #: owner nodes this session holds now
    got: list[TopicPartition] = field(default_factory=list)
    #: held by another member: watched, ``on_freed`` is called when they go
    waiting: list[TopicPartition] = field(default_factory=list)
    #: free again already (released between the create and the watch, or its topic's folder was
    #: deleted): claim them again
    freed: list[TopicPartition] = field(default_factory=list)


class PartitionOwnership:
    """One member's registration and owner nodes in ``group`` (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        group: str,
        offsets: GroupOffsets,
        on_freed: Callable[[TopicPartition], None],
    ) -> None:
        self._client = client
        self._group = group
        self._offsets = offsets
        self._on_freed = on_freed
        self._watch = self._on_event
        self._owners_prefix = zk_paths.group_owners_path(group) + "/"
        self._owner_parents: set[str] = set()
        self.member_id = ""
        self.member_path = ""
        #: the session that registered (``None``: not registered)
        self.session_id: int | None = None

    @property
    def registered(self) -> bool:
        return self.session_id is not None

    def register(self, registration: MemberRegistration, session_id: int) -> str:
        """Create the member's registration (the fence); returns its path."""
        group = self._group
        for path in (zk_paths.group_ids_path(group), zk_paths.group_owners_path(group)):
            self._client.ensure_path(path)
        member_id = registration.consumer_id
        member_path = zk_paths.group_member_path(group, member_id)
        try:
            self._client.create(member_path, registration.encode(), ephemeral=True)
        except NodeExistsError:  # our own create, whose reply was lost
            _, stat = self._client.get(member_path)
            if stat.ephemeralOwner != session_id:
                raise GroupError(
                    f"group {group}: member id {member_id} is taken by another session"
                ) from None
        self.member_id = member_id
        self.member_path = member_path
        self.session_id = session_id
        return member_path

    def reset(self) -> None:
        """Forget the registration and every owner node: the session that made them is gone."""
        self.member_id = ""
        self.member_path = ""
        self.session_id = None
        self._owner_parents.clear()

    def claim(self, claims: Mapping[TopicPartition, PartitionOwner]) -> Claim:
        """Create the owner node of each partition of ``claims`` (with that data), in one pipeline; watch
        those another member holds."""
        if not self.registered:
            raise GroupError(f"group {self._group}: claim before register")
        for topic in {tp.topic for tp in claims}:
            parent = zk_paths.group_owners_path(self._group, topic)
            if parent not in self._owner_parents:
                self._client.ensure_path(parent)
                self._owner_parents.add(parent)
        creates = [
            (tp, self._client.create_async(self._path(tp), owner.encode(), ephemeral=True))
            for tp, owner in claims.items()
        ]
        claim = Claim()
        busy: list[TopicPartition] = []
        for tp, result in creates:
            try:
                result.get()
            except NodeExistsError:
                busy.append(tp)
            except NoNodeError:  # the topic's owners folder was deleted meanwhile: make it again
                self._owner_parents.clear()
                claim.freed.append(tp)
            else:
                claim.got.append(tp)
        reads = [(tp, self._client.get_async(self._path(tp), watch=self._watch)) for tp in busy]
        for tp, result in reads:
            try:
                _, stat = result.get()
            except NoNodeError:
                claim.freed.append(tp)  # released meanwhile
                continue
            if stat.ephemeralOwner == self.session_id:
                claim.got.append(tp)  # this session's own node (a create whose reply was lost)
            else:
                claim.waiting.append(tp)
        return claim

    def verify(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Those of ``partitions`` whose owner node is not this session's any more."""
        reads = [(tp, self._client.exists_async(self._path(tp))) for tp in partitions]
        gone = []
        for tp, result in reads:
            stat = result.get()
            if stat is None or stat.ephemeralOwner != self.session_id:
                gone.append(tp)
        return gone

    def commit(
        self, commits: Mapping[TopicPartition, OffsetCommit], release: Iterable[TopicPartition] = ()
    ) -> CommitOutcome:
        """Commit ``commits`` and delete the owner nodes of ``release``, fenced by the registration
        (:meth:`~broker.client.groups.zookeeper.group_offsets.GroupOffsets.commit`; ``fenced`` in the outcome:
        the session expired and nothing was written)."""
        if not self.registered:
            raise GroupError(f"group {self._group}: commit before register")
        return self._offsets.commit(self.member_path, self.member_id, commits, release=list(release))

    def withdraw(self, transaction: TransactionRequest) -> None:
        """Add the deletion of the registration to ``transaction`` (the member's leaving)."""
        if self.member_path:
            transaction.delete(self.member_path)

    def _path(self, tp: TopicPartition) -> str:
        return zk_paths.group_owner_path(self._group, tp.topic, tp.partition)

    def _on_event(self, event: Any) -> None:
        if event.type == EventType.NONE:
            return  # connection dropped: the member's resync claims again and sets every watch again
        path: str = event.path or ""
        if path.startswith(self._owners_prefix):
            topic, _, partition = path[len(self._owners_prefix) :].rpartition("/")
            if topic and partition.isdigit():
                self._on_freed(TopicPartition(topic, int(partition)))
