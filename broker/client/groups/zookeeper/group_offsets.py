"""A consumer group's committed offsets in ZooKeeper, and the checks that make a commit safe.

Layout (:mod:`broker.cluster.zk_paths`): ``/consumers/<group>/offsets/<topic>/<partition>`` holds the next
offset to consume (:class:`~broker.client.groups.zookeeper.committed_offset.CommittedOffset`), persistent.

A member commits with one ZooKeeper transaction (``multi``), all or nothing::

    check  /consumers/<group>/ids/<consumer-id>      version 0    the fence: the member's own registration
    set    /consumers/<group>/offsets/<t>/<p>        version v    (create when the partition has none yet)
    ...
    delete /consumers/<group>/owners/<t>/<p>         version 0    only when letting the partition go

* **The fence.** A member's registration is ephemeral and its id is new at every join (a random suffix),
  so the node exists exactly while the session that created it lives. Once that session has expired the
  ``check`` fails and nothing is written, however late the commit comes: an expired member cannot commit.
* **Compare-and-set.** Each offset is written at the znode version the member last read or wrote. A rewind
  (:meth:`GroupOffsets.rewind`, ``lumber groups reset-offsets``) writes the offsets unconditionally and
  bumps ``/consumers/<group>/rewind``; an owner's next commit of a rewound partition then fails its version
  check and the owner adopts the rewound offset instead of overwriting it.
* **Commit, then release.** Letting a partition go deletes its owner node in the same transaction as the
  last commit of its offset, so whoever claims it next reads that offset.

The other operations of a transaction that failed are rolled back; :meth:`GroupOffsets.commit` retries
without the operations that conflicted and reports them. Connection problems raise kazoo's errors (the
caller retries). Thread-safe: every call is independent; the kazoo client may be shared.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
from broker.client.groups.zookeeper.committed_offset import CommittedOffset
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Operations per ZooKeeper transaction (well inside ZooKeeper's 1 MiB request limit).
MAX_OPS_PER_TRANSACTION = 300
#: Rounds of a rewind that races with an owner creating an offset node (each round re-reads).
_REWIND_ROUNDS = 10


@dataclass(frozen=True)
class OffsetCommit:
    """One partition's offset to commit: ``expected_version`` is the znode version it must still have
    (``None``: the node must not exist yet)."""

    offset: int
    expected_version: int | None


@dataclass
class CommitOutcome:
    """What :meth:`GroupOffsets.commit` did."""

    #: the new znode version of each committed offset
    versions: dict[TopicPartition, int] = field(default_factory=dict)
    #: partitions whose offset node changed since it was read (a rewind): their offsets were not written
    conflicts: set[TopicPartition] = field(default_factory=set)
    #: owner nodes deleted
    released: set[TopicPartition] = field(default_factory=set)
    #: the member's registration is gone (its session expired): nothing was written or deleted
    fenced: bool = False


class GroupOffsets:
    """The committed offsets of one group (see the module docstring)."""

    def __init__(self, client: KazooClient, group: str) -> None:
        self._client = client
        self.group = group
        zk_paths.group_path(group)  # validates the name

    # ------------------------------------------------------------------------------------ reading

    def read(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, CommittedOffset | None]:
        """The committed offset of each partition (``None`` where there is none), read in one pipeline."""
        pending = [
            (tp, self._client.get_async(zk_paths.group_offset_path(self.group, tp.topic, tp.partition)))
            for tp in partitions
        ]
        found: dict[TopicPartition, CommittedOffset | None] = {}
        for tp, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                found[tp] = None
                continue
            path = zk_paths.group_offset_path(self.group, tp.topic, tp.partition)
            found[tp] = CommittedOffset.decode(path, data, stat.version)
        return found

    def read_all(self) -> dict[TopicPartition, CommittedOffset]:
        """Every committed offset of the group."""
        base = zk_paths.group_offsets_path(self.group)
        partitions: list[TopicPartition] = []
        for topic in _children(self._client, base):
            children = _children(self._client, f"{base}/{topic}")
            partitions.extend(TopicPartition(topic, int(c)) for c in children if c.isdigit())
        return {tp: found for tp, found in self.read(partitions).items() if found is not None}

    # ------------------------------------------------------------------------------------ committing

    def commit(
        self,
        member_path: str,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        release: Iterable[TopicPartition] = (),
    ) -> CommitOutcome:
        """Write ``offsets`` and delete the owner nodes of ``release``, fenced by ``member_path``.

        Partitions are written in transactions of up to :data:`MAX_OPS_PER_TRANSACTION` operations; a
        partition's offset and its owner node always go in the same one.
        """
        outcome = CommitOutcome()
        releasing = set(release)
        ordered = sorted(set(offsets) | releasing)
        self._ensure_parents({tp.topic for tp in offsets})
        batch: list[TopicPartition] = []
        size = 1
        for tp in ordered:
            ops = (tp in offsets) + (tp in releasing)
            if batch and size + ops > MAX_OPS_PER_TRANSACTION:
                self._commit_batch(member_path, member_id, offsets, releasing, batch, outcome)
                if outcome.fenced:
                    return outcome
                batch, size = [], 1
            batch.append(tp)
            size += ops
        if batch or not ordered:
            self._commit_batch(member_path, member_id, offsets, releasing, batch, outcome)
        return outcome

    def _commit_batch(
        self,
        member_path: str,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        releasing: set[TopicPartition],
        batch: list[TopicPartition],
        outcome: CommitOutcome,
    ) -> None:
        writes = {tp: offsets[tp] for tp in batch if tp in offsets}
        deletes = [tp for tp in batch if tp in releasing]
        now_ms = int(time.time() * 1000)
        while True:
            transaction = self._client.transaction()
            transaction.check(member_path, 0)
            ops: list[tuple[str, TopicPartition]] = []
            for tp, commit in writes.items():
                path = zk_paths.group_offset_path(self.group, tp.topic, tp.partition)
                data = CommittedOffset(commit.offset, member_id, now_ms).encode()
                if commit.expected_version is None:
                    transaction.create(path, data)
                else:
                    transaction.set_data(path, data, version=commit.expected_version)
                ops.append(("offset", tp))
            for tp in deletes:
                transaction.delete(zk_paths.group_owner_path(self.group, tp.topic, tp.partition), version=0)
                ops.append(("owner", tp))
            results: list[Any] = transaction.commit()
            failed = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
            if not failed:
                for (kind, tp), result in zip(ops, results[1:], strict=True):
                    if kind == "offset":
                        outcome.versions[tp] = result.version if hasattr(result, "version") else 0
                    else:
                        outcome.released.add(tp)
                return
            index, error = next(
                (i, r) for i, r in failed if not isinstance(r, RolledBackError | RuntimeInconsistency)
            )
            if index == 0:
                log.warning(
                    "group %s: %s is gone (%r): the member's session expired; nothing committed",
                    self.group,
                    member_path,
                    error,
                )
                outcome.fenced = True
                return
            kind, tp = ops[index - 1]
            if kind == "offset" and isinstance(error, BadVersionError | NodeExistsError | NoNodeError):
                log.info(
                    "group %s: %s: the committed offset changed meanwhile (a rewind): %r",
                    self.group,
                    tp,
                    error,
                )
                outcome.conflicts.add(tp)
                del writes[tp]
            elif kind == "owner" and isinstance(error, NoNodeError | BadVersionError):
                log.warning(
                    "group %s: %s: the owner node is not this member's any more (%r)", self.group, tp, error
                )
                deletes.remove(tp)
            else:
                raise error

    # ------------------------------------------------------------------------------------ rewinding

    def rewind(self, offsets: Mapping[TopicPartition, int], requested_by: str = "") -> None:
        """Set the group's committed offsets of these partitions, whoever owns them, and tell the owners.

        The offsets are written unconditionally and ``/consumers/<group>/rewind`` is bumped in the same
        transaction(s); each owner reloads its rewound partitions and goes on from there (an owner's commit
        racing with this fails its version check, so the rewind wins).
        """
        for offset in offsets.values():
            if offset < 0:
                raise ValueError(f"group {self.group}: cannot rewind to a negative offset ({offset})")
        self._ensure_parents({tp.topic for tp in offsets})
        rewind_path = zk_paths.group_rewind_path(self.group)
        items = sorted(offsets.items())
        chunks = [
            items[i : i + MAX_OPS_PER_TRANSACTION - 1]
            for i in range(0, len(items), MAX_OPS_PER_TRANSACTION - 1)
        ]
        now_ms = int(time.time() * 1000)
        for chunk in chunks or [[]]:
            topics: dict[str, list[int]] = {}
            for tp, _ in chunk:
                topics.setdefault(tp.topic, []).append(tp.partition)
            marker = zk_paths.encode_json(
                {"id": uuid.uuid4().hex, "partitions": topics, "timestamp_ms": now_ms}
            )
            for _ in range(_REWIND_ROUNDS):
                exists = [
                    (
                        tp,
                        offset,
                        self._client.exists_async(
                            zk_paths.group_offset_path(self.group, tp.topic, tp.partition)
                        ),
                    )
                    for tp, offset in chunk
                ]
                transaction = self._client.transaction()
                for tp, offset, result in exists:
                    path = zk_paths.group_offset_path(self.group, tp.topic, tp.partition)
                    data = CommittedOffset(offset, requested_by, now_ms).encode()
                    if result.get() is None:
                        transaction.create(path, data)
                    else:
                        transaction.set_data(path, data)
                if self._client.exists(rewind_path) is None:
                    transaction.create(rewind_path, marker)
                else:
                    transaction.set_data(rewind_path, marker)
                results = transaction.commit()
                failures = [
                    r
                    for r in results
                    if isinstance(r, Exception) and not isinstance(r, RolledBackError | RuntimeInconsistency)
                ]
                if not failures:
                    break
                if not all(isinstance(r, NodeExistsError | NoNodeError) for r in failures):
                    raise failures[0]
            else:
                raise GroupError(f"group {self.group}: the rewind kept racing with other writers; try again")
        log.info("group %s: rewound %d partitions", self.group, len(items))

    def _ensure_parents(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._client.ensure_path(zk_paths.group_offsets_path(self.group, topic))


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []
