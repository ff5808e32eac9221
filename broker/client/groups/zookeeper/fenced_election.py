"""A consumer group's leader election, whose winner's writes are fenced by its candidate node.

A recipe in the shape of kazoo's ``Election`` / ``Lock`` (ZooKeeper's leader-election recipe), sized to the
one job :class:`~broker.client.groups.zookeeper.group_membership.GroupMembership` needs of it. Its znodes
(:mod:`broker.cluster.zk_paths`)::

    /consumers/<group>/leader/<consumer-id>-<seq>   ephemeral sequential, one candidate per member;
                                                    data: the member's id. The lowest <seq> leads.

How it goes:

* :meth:`FencedElection.stand` creates the member's candidate. Member ids are new at every join (a random
  suffix), so a candidate is found again by its ``<consumer-id>-`` prefix when the reply to its create was
  lost (kazoo's uuid-prefixed node names): a retried stand never makes a second candidate.
* :meth:`FencedElection.lead` lists the candidates: the first one leads; every other candidate watches only
  the one just before it (``exists`` with a watch), so a candidate leaving notifies one member, not the
  group (no herd effect). A predecessor that left between the listing and the watch is seen at once (the
  ``exists`` answers ``None``) and the listing is done again. A candidate that vanished while its session
  lives (deleted by hand) stands again.
* :meth:`FencedElection.fenced_transaction` is **the fence**: a transaction whose first operation is
  ``check <candidate> version 0``. It commits only while the candidate exists, that is while the session
  that created it lives and the member has not withdrawn: a deposed leader (its session expired, a newer
  leader elected) can never write. :mod:`broker.client.groups.zookeeper.group_leader` writes every generation
  through it.
* :meth:`FencedElection.withdraw` deletes the candidate inside the member's leaving transaction.

States (``state``), every transition by a call of the member's coordination thread::

    IDLE --stand()--> STANDING --lead(): first--> LEADING --lead(): not first--> STANDING
    any --reset() (a new session: the old candidate is gone with it)--> IDLE

Session loss is the member's to handle (kazoo's SUSPENDED pauses it, LOST makes it :meth:`reset` and
stand again with a new member id); a connection that comes back within the session calls :meth:`lead`
again, which sets the dropped watch again. Threads: not thread-safe; one coordination thread makes every
call. The watch callback runs on kazoo's event thread and only calls ``on_change`` (which must only
record that the election needs looking at; it must not call ZooKeeper).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import RolledBackError, RuntimeInconsistency
from kazoo.protocol.states import EventType

from broker.client.errors import GroupError
from broker.cluster import zk_paths

log = logging.getLogger(__name__)


class ElectionState(enum.Enum):
    IDLE = "idle"
    STANDING = "standing"
    LEADING = "leading"


class FencedElection:
    """One member's candidacy in ``group``'s election (see the module docstring)."""

    def __init__(self, client: KazooClient, group: str, on_change: Callable[[], None]) -> None:
        self._client = client
        self._group = group
        self._on_change = on_change
        self._dir = zk_paths.group_leader_path(group)
        self._watch = self._on_event
        self._member_id = ""
        self._candidate_path = ""
        self.state = ElectionState.IDLE

    @property
    def candidate_path(self) -> str:
        """The candidate node (``""`` while IDLE)."""
        return self._candidate_path

    def stand(self, member_id: str) -> str:
        """Create this member's candidate, or find the one a lost reply created; returns its path."""
        self._client.ensure_path(self._dir)
        mine = [c for c in self._client.get_children(self._dir) if c.startswith(member_id + "-")]
        candidate = f"{self._dir}/{mine[0]}" if mine else self._create(member_id)
        self._member_id = member_id
        self._candidate_path = candidate
        self.state = ElectionState.STANDING
        return candidate

    def lead(self) -> bool:
        """Whether this candidate is the first (LEADING); otherwise watch the one just before it."""
        if self.state is ElectionState.IDLE:
            raise GroupError(f"group {self._group}: lead() before stand()")
        name = self._candidate_path.rsplit("/", 1)[1]
        while True:
            children = self._client.get_children(self._dir)
            if name not in children:
                log.warning("group %s: candidate %s vanished; standing again", self._group, name)
                self._candidate_path = self._create(self._member_id)
                name = self._candidate_path.rsplit("/", 1)[1]
                continue
            ordered = sorted(children, key=_candidate_order)
            index = ordered.index(name)
            if index == 0:
                self.state = ElectionState.LEADING
                return True
            self.state = ElectionState.STANDING
            if self._client.exists(f"{self._dir}/{ordered[index - 1]}", watch=self._watch) is not None:
                return False

    def contenders(self) -> list[str]:
        """The candidates' member ids, the leader first (as kazoo's ``Election.contenders``)."""
        children = sorted(self._client.get_children(self._dir), key=_candidate_order)
        return [name.rsplit("-", 1)[0] for name in children]

    def fenced_transaction(self) -> TransactionRequest:
        """A transaction that commits only while this candidate exists (its first operation checks it);
        read its results with :meth:`fence_failure`."""
        if self.state is ElectionState.IDLE:
            raise GroupError(f"group {self._group}: no candidate to fence a write with")
        transaction = self._client.transaction()
        transaction.check(self._candidate_path, 0)
        return transaction

    def fence_failure(self, results: Sequence[Any]) -> Exception | None:
        """The error of the fence's check in the results of a :meth:`fenced_transaction` (``None``: the
        check passed; any failure is another operation's)."""
        first = results[0] if results else None
        if isinstance(first, Exception) and not isinstance(first, RolledBackError | RuntimeInconsistency):
            return first
        return None

    def withdraw(self, transaction: TransactionRequest) -> None:
        """Add the deletion of the candidate to ``transaction`` (the member's leaving)."""
        if self._candidate_path:
            transaction.delete(self._candidate_path)

    def reset(self) -> None:
        """Forget the candidate: the session that created it is gone, and the candidate with it."""
        self._candidate_path = ""
        self.state = ElectionState.IDLE

    def _create(self, member_id: str) -> str:
        path: str = self._client.create(
            zk_paths.group_candidate_prefix(self._group, member_id),
            member_id.encode(),
            ephemeral=True,
            sequence=True,
        )
        return path

    def _on_event(self, event: Any) -> None:
        if event.type != EventType.NONE:  # NONE: the connection dropped; the resync calls lead() again
            self._on_change()


def _candidate_order(name: str) -> tuple[int, str]:
    try:
        return zk_paths.candidate_sequence(name), name
    except zk_paths.ZkDataError:
        return 1 << 62, name  # not a candidate of ours: never the leader
