"""The member's partitions between its streams and ZooKeeper: claim, fetch, move, stop, commit, release.

:class:`~broker.client.groups.zookeeper.group_membership.GroupMembership` reads each generation and hands this
class the partitions it gives the member (partition -> stream number); this class moves them, in this order:

1. **release** what the member no longer gets: stop fetching those partitions and handing out their
   records, call the listener's ``on_partitions_revoked``, wait up to ``release_timeout_ms`` for the
   application to finish the records it has in hand, then commit their offsets and delete their owner
   nodes in one transaction fenced by the registration (:meth:`PartitionOwnership.commit`). Stop fetching,
   commit, then release: the next owner cannot create the owner node before the commit is visible.
   Releases come before any claim, so no claim waits on another claim;
2. **move** between the member's own streams what changes stream only: no ZooKeeper step;
3. **claim** the rest (:meth:`PartitionOwnership.claim`), and start each partition got at its committed
   offset (``auto_offset_reset`` when there is none); the others wait on their owner nodes and are claimed
   again the moment the node goes.

State, written only by the member's coordination thread: ``owned`` (partition -> its stream, number,
offset node version and committed offset), ``pending`` (given by the generation, not yet claimed) and
``releasing`` (stopped, their commit not done yet: :meth:`finish_releases` does it again after a
ZooKeeper error). :meth:`holds_partitions` is read by kazoo's session listener (a snapshot of two dicts'
emptiness). The streams are guarded by the member's condition, which the consumer's iterators share; it
is never held across a ZooKeeper call: every ZooKeeper step is made before taking it or after leaving it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import CommitFailedError
from broker.client.groups.partition_assignor import StreamKey
from broker.client.groups.rebalance_listener import RebalanceListener, call_listener
from broker.client.groups.zookeeper.group_offsets import GroupOffsets, OffsetCommit
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.client.groups.zookeeper.partition_ownership import PartitionOwnership
from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)


@dataclass
class _Owned:
    """A partition this member owns (its owner node exists, created by this session)."""

    stream: MessageStream
    number: int
    #: version of the offset node as last read or written (None: there is none)
    offset_version: int | None
    #: the offset committed (or read at the claim)
    committed: int | None


class PartitionHandover:
    """The partitions of one member and its streams (see the module docstring)."""

    def __init__(
        self,
        group: str,
        streams: Mapping[StreamKey, MessageStream],
        condition: threading.Condition,
        listener: RebalanceListener,
        ownership: PartitionOwnership,
        offsets: GroupOffsets,
        release_timeout_ms: int,
    ) -> None:
        self._group = group
        self._streams = dict(streams)
        self._unique_streams = list({id(s): s for s in self._streams.values()}.values())
        self._cond = condition
        self._listener = listener
        self._ownership = ownership
        self._offsets = offsets
        self._release_timeout_s = release_timeout_ms / 1000
        self._owned: dict[TopicPartition, _Owned] = {}
        self._pending: dict[TopicPartition, int] = {}
        self._releasing: dict[TopicPartition, tuple[int | None, _Owned]] = {}

    def owned(self) -> set[TopicPartition]:
        return set(self._owned)

    def pending(self) -> set[TopicPartition]:
        """Partitions the generation gives the member that it has not claimed yet."""
        return set(self._pending)

    def holds_partitions(self) -> bool:
        """Whether the member owns or is releasing partitions (read by kazoo's session listener)."""
        return bool(self._owned or self._releasing)

    # ------------------------------------------------------------------------------ every stream

    def pause(self) -> None:
        """Stop fetching everything at once (the connection is lost)."""
        with self._cond:
            for stream in self._unique_streams:
                stream.pause()

    def resume(self, connected: threading.Event) -> None:
        """Fetch again, unless the connection was lost meanwhile (the session listener clears
        ``connected`` before it takes the condition to pause, so checking under it cannot miss a loss)."""
        with self._cond:
            if connected.is_set():
                for stream in self._unique_streams:
                    stream.resume()

    def mark_consumed(self, *, close_delivery: bool = False) -> None:
        """Every record handed out so far is done with (``close_delivery``: and hand out no more)."""
        with self._cond:
            for stream in self._unique_streams:
                if close_delivery:
                    stream.close_delivery()
                stream.mark_consumed()

    def drop_all(self) -> None:
        """Forget every partition without a ZooKeeper step (the session that owned them is gone)."""
        with self._cond:
            for stream in self._unique_streams:
                stream.remove(stream.partitions())
        self._owned.clear()
        self._pending.clear()
        self._releasing.clear()

    def drop(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching ``partitions`` at once: their owner nodes are not this session's any more."""
        with self._cond:
            for tp in partitions:
                self._owned.pop(tp).stream.remove([tp])

    def release_all(self) -> None:
        """Commit and release every partition, all its records consumed (the member is leaving)."""
        self.finish_releases()
        if self._owned:
            self.release(list(self._owned), all_consumed=True)

    # ------------------------------------------------------------------------------ a generation

    def apply(self, target: Mapping[TopicPartition, int], generation: int) -> list[TopicPartition]:
        """Move to a generation that gives this member ``target`` (partition -> stream number): release
        first, then move between own streams, then claim. Returns the partitions to claim again at once."""
        unknown = {tp: n for tp, n in target.items() if (tp.topic, n) not in self._streams}
        if unknown:
            log.error(
                "group %s: generation gives this member streams it does not have: %s", self._group, unknown
            )
            target = {tp: n for tp, n in target.items() if tp not in unknown}
        release = [tp for tp in self._owned if tp not in target]
        if release:
            self.release(release)
        moves = [tp for tp, owned in self._owned.items() if target[tp] != owned.number]
        if moves:
            self._move(moves, target)
        self._pending = {tp: number for tp, number in target.items() if tp not in self._owned}
        return self.claim(list(self._pending), generation) if self._pending else []

    def release(self, partitions: list[TopicPartition], *, all_consumed: bool = False) -> None:
        """Stop fetching, wait for the records in hand, then commit and delete the owner nodes."""
        by_stream: dict[int, tuple[MessageStream, list[TopicPartition]]] = {}
        for tp in partitions:
            owned = self._owned[tp]
            by_stream.setdefault(id(owned.stream), (owned.stream, []))[1].append(tp)
        with self._cond:
            for stream, tps in by_stream.values():
                stream.stop(tps)
        call_listener(self._group, self._listener.on_partitions_revoked, sorted(partitions))
        with self._cond:
            if all_consumed:
                for stream, _ in by_stream.values():
                    stream.mark_consumed()
            elif not self._cond.wait_for(
                lambda: not any(s.in_hand(tps) for s, tps in by_stream.values()),
                self._release_timeout_s,
            ):
                log.warning(
                    "group %s: the application did not come back within release_timeout_ms; the records it "
                    "holds of %s will be delivered again by their next owners",
                    self._group,
                    sorted(partitions),
                )
            positions: dict[TopicPartition, int | None] = {}
            for stream, tps in by_stream.values():
                positions.update(stream.remove(tps))
        for tp in partitions:
            self._releasing[tp] = (positions.get(tp), self._owned.pop(tp))
        self.finish_releases()

    def finish_releases(self) -> None:
        """Commit and release what was stopped (again, after a ZooKeeper error interrupted it)."""
        if not self._releasing:
            return
        commits = {
            tp: OffsetCommit(position, owned.offset_version)
            for tp, (position, owned) in self._releasing.items()
            if position is not None and position != owned.committed
        }
        outcome = self._ownership.commit(commits, release=list(self._releasing))
        if outcome.fenced:
            log.warning(
                "group %s: released %d partitions without committing: session expired",
                self._group,
                len(commits),
            )
        elif commits:
            log.debug(
                "group %s: committed %s and released",
                self._group,
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
                self._release_timeout_s,
            )
            for tp in partitions:
                owned = self._owned[tp]
                position = owned.stream.remove([tp]).get(tp)
                number = target[tp]
                owned.stream = self._streams[(tp.topic, number)]
                owned.number = number
                owned.stream.add(tp, position)

    def claim(self, partitions: list[TopicPartition], generation: int) -> list[TopicPartition]:
        """Create the owner nodes of those of ``partitions`` still pending; wait (watch) on those still held
        by someone else; start fetching those got. Returns the partitions to claim again at once."""
        partitions = [tp for tp in partitions if tp in self._pending]
        if not partitions:
            return []
        member_id = self._ownership.member_id
        session_id = self._ownership.session_id
        claim = self._ownership.claim(
            {tp: PartitionOwner(member_id, self._pending[tp], generation) for tp in partitions}
        )
        got, freed = claim.got, claim.freed
        committed = self._offsets.read(got)
        with self._cond:
            if self._ownership.session_id != session_id:
                return []
            for tp in got:
                number = self._pending.pop(tp)
                stream = self._streams[(tp.topic, number)]
                found = committed.get(tp)
                offset = None if found is None else found.offset
                self._owned[tp] = _Owned(stream, number, None if found is None else found.zk_version, offset)
                stream.add(tp, offset)
        if got:
            log.debug("group %s: member %s claimed %s", self._group, member_id, sorted(got))
            call_listener(self._group, self._listener.on_partitions_assigned, sorted(got))
        return freed

    def commit(self) -> bool:
        """Commit the owned partitions' consumed positions; returns whether some offset was rewound
        meanwhile (then :meth:`adopt_rewound`). Raises :class:`CommitFailedError` when fenced."""
        with self._cond:
            positions = {tp: owned.stream.position(tp) for tp, owned in self._owned.items()}
        commits = {
            tp: OffsetCommit(position, self._owned[tp].offset_version)
            for tp, position in positions.items()
            if position is not None and position != self._owned[tp].committed
        }
        if not commits:
            return False
        outcome = self._ownership.commit(commits)
        if outcome.fenced:
            raise CommitFailedError(
                f"group {self._group}: {self._ownership.member_path} is gone: the member's session expired; "
                "nothing committed"
            )
        for tp, version in outcome.versions.items():
            owned = self._owned.get(tp)
            if owned is not None:
                owned.offset_version = version
                owned.committed = commits[tp].offset
        return bool(outcome.conflicts)

    def adopt_rewound(self) -> None:
        """Adopt every owned partition's offset that someone else rewrote (a rewind)."""
        member_id = self._ownership.member_id
        found = self._offsets.read(list(self._owned))
        with self._cond:
            for tp, committed in found.items():
                owned = self._owned.get(tp)
                if owned is None or committed is None or committed.zk_version == owned.offset_version:
                    continue
                owned.offset_version = committed.zk_version
                owned.committed = committed.offset
                if committed.member == member_id:
                    continue  # our own commit whose reply was lost
                log.info("group %s: %s rewound to offset %d", self._group, tp, committed.offset)
                owned.stream.rewind(tp, committed.offset)
