"""One stream of a group member: the records of the partitions the group gives it, as they arrive.

``create_message_streams({"events": 2})`` gives a member two streams of ``events`` (paper section 3.2); the
group assigns partitions to streams, and each stream reads its partitions with its own
:class:`~broker.client.consumer.consumer.Consumer` (background prefetch). Iterating a stream never ends: it
blocks until new messages arrive (until the member is closed). ``poll`` is the same stream, batch-wise.

Positions, per partition of the stream::

    consumed <= delivered
    delivered: the offset after the last record handed to the application
    consumed:  ``delivered`` as it was when the application last came back for more (next(), poll()) or
               called commit(); records between the two are "in hand", being processed

Only consumed offsets are committed automatically, so a crash never commits a record that was being
processed (at-least-once). When the group moves a partition away, the member first stops fetching it and
handing out its records, then waits (``release_timeout_ms``) for the application to come back for more,
so that the records in hand count as consumed, then commits and lets go.

**Explicit positions** (``explicit_positions=True``, e.g. the mirror, which finishes records long after it
polled them, out of step with its polls): coming back for more does *not* consume anything; only
:meth:`MessageStream.acknowledge` moves ``consumed``, to any offset up to ``delivered``. Every commit
(automatic, :meth:`~broker.client.groups.group_consumer.GroupConsumer.commit`, a release, ``close``) then
commits exactly the acknowledged positions, and a release waits (``release_timeout_ms``) until the
partition's records are all acknowledged. Records in hand are never counted as consumed by the member.

**Whole batches.** :meth:`MessageStream.poll_batches` hands out the fetched batches themselves
(:class:`~broker.client.consumer.fetched_batch.FetchedBatch`: raw, CRC-checked bytes, ``from_offset`` where
the partition's position falls inside the first one) instead of records; ``delivered`` moves to each batch's
``next_offset``. A stream is read either with ``poll``/iteration or with ``poll_batches``, not both.

Concurrency: the member's condition (one per member) guards every field. The application's thread waits
for data inside the Consumer without holding it, then hands records out under it; the member's
coordination thread changes the partitions under it. A batch is taken only if it starts where the last one
of its partition ended (or the Consumer moved by itself, an offset reset, with no change made meanwhile):
a batch fetched before a change to its partition (a seek, a release) is dropped, never handed out.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.errors import ConsumerClosedError, GroupClosedError, GroupError
from broker.record.topic_partition import TopicPartition

_T = TypeVar("_T")


@dataclass
class _Partition:
    delivered: int | None
    consumed: int | None
    #: the offset the next fetched batch must start at (``None``: wherever the offset reset puts it)
    fetched: int | None
    #: the stream's change counter when this partition last changed (batches fetched before are dropped)
    changed: int
    releasing: bool = False


class MessageStream:
    """A member's stream of records (see the module docstring). Iterate it, or ``poll()`` it, from one
    application thread at a time; the group's coordination thread reassigns it."""

    def __init__(
        self,
        name: str,
        consumer: Consumer,
        condition: threading.Condition,
        *,
        explicit_positions: bool = False,
    ) -> None:
        self.name = name
        self.explicit_positions = explicit_positions
        self._consumer = consumer
        self._cond = condition
        self._parts: dict[TopicPartition, _Partition] = {}
        self._buffer: deque[ConsumerRecord] = deque()
        self._batches: deque[FetchedBatch] = deque()
        #: how the stream is read: "records" (poll, iteration) or "batches" (poll_batches); None: not yet
        self._mode: str | None = None
        self._in_hand: set[TopicPartition] = set()
        self._changes = 0
        self._paused = False
        self._closed = False  # no more records handed out
        #: the application's reads: calls inside poll() now, and when the last one returned (monotonic s);
        #: written by the reading thread only, read by the member's (Kafka's max.poll.interval.ms)
        self._reading = 0
        self._last_read = time.monotonic()
        self._closed_why = "the group consumer is closed"
        self._consumer_closed = False

    def __repr__(self) -> str:
        return f"MessageStream({self.name!r}, partitions={sorted(self._parts)})"

    # ------------------------------------------------------------------------------ application side

    def poll(self, timeout_ms: int | None = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records (all that are ready when ``None``), waiting up to ``timeout_ms``
        for the first (``None``: until there is one). The records of the previous call count as consumed
        (unless the stream has explicit positions).

        Raises :class:`~broker.client.errors.GroupClosedError` once the member is closed.
        """
        self._read_as("records")
        return self._poll(timeout_ms, self._buffer, lambda: self._hand_out(max_records), self._keep_records)

    def poll_batches(self, timeout_ms: int | None = 0, max_records: int | None = None) -> list[FetchedBatch]:
        """Whole fetched batches, oldest first, until their records reach ``max_records`` (at least one
        batch; all that are ready when ``None``), waiting up to ``timeout_ms`` for the first (``None``:
        until there is one). A batch's records before its ``from_offset`` are not the stream's (the
        partition's position fell inside it). The batches of the previous call count as consumed (unless
        the stream has explicit positions).

        Raises :class:`~broker.client.errors.GroupClosedError` once the member is closed.
        """
        self._read_as("batches")
        return self._poll(
            timeout_ms, self._batches, lambda: self._hand_out_batches(max_records), self._keep_batches
        )

    def _poll(
        self,
        timeout_ms: int | None,
        ready: deque[Any],
        hand_out: Callable[[], list[_T]],
        keep: Callable[[list[FetchedBatch], int], None],
    ) -> list[_T]:
        """The loop of :meth:`poll` and :meth:`poll_batches`: ``hand_out`` what is ``ready``, else fetch
        and ``keep`` the batches (with the change count seen before fetching) until the deadline."""
        deadline = None if timeout_ms is None or timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        self._reading += 1
        try:
            return self._poll_loop(deadline, ready, hand_out, keep)
        finally:
            self._reading -= 1
            self._last_read = time.monotonic()

    def _poll_loop(
        self,
        deadline: float | None,
        ready: deque[Any],
        hand_out: Callable[[], list[_T]],
        keep: Callable[[list[FetchedBatch], int], None],
    ) -> list[_T]:
        with self._cond:
            self._mark_consumed()
        while True:
            with self._cond:
                if self._closed:
                    raise GroupClosedError(f"stream {self.name}: {self._closed_why}")
                if ready:
                    return hand_out()
                seen = self._changes
            keep(self._fetch(deadline), seen)
            with self._cond:
                if deadline is not None and not ready and time.monotonic() >= deadline:
                    return []

    def _keep_records(self, batches: list[FetchedBatch], seen: int) -> None:
        decoded = [(b, b.records()) for b in batches]  # outside the lock
        with self._cond:
            for batch, records in decoded:
                if self._accept(batch, seen):
                    self._buffer.extend(records)

    def _keep_batches(self, batches: list[FetchedBatch], seen: int) -> None:
        with self._cond:
            for batch in batches:
                if self._accept(batch, seen):
                    self._batches.append(batch)

    def _read_as(self, mode: str) -> None:
        if self._mode is None:
            self._mode = mode
        elif self._mode != mode:
            raise GroupError(
                f"stream {self.name}: read with poll_batches() or with poll()/iteration, not both "
                f"(it is read as {self._mode})"
            )

    def _fetch(self, deadline: float | None) -> list[FetchedBatch]:
        """The Consumer's next batches (without the member's condition held)."""
        remaining_ms = None if deadline is None else int(max(deadline - time.monotonic(), 0) * 1000)
        try:
            return self._consumer.poll_batches(timeout_ms=-1 if remaining_ms is None else remaining_ms)
        except ConsumerClosedError:
            raise GroupClosedError(f"stream {self.name}: the group consumer is closed") from None

    def _accept(self, batch: FetchedBatch, seen: int) -> bool:
        """Under the condition: whether ``batch`` continues its partition (else it is dropped)."""
        part = self._parts.get(batch.topic_partition)
        if part is None or part.releasing or self._paused:
            return False
        from_offset = batch.from_offset
        if part.fetched is not None and from_offset != part.fetched and part.changed > seen:
            return False  # fetched before a change to the partition (a seek): stale
        # else: it continues what was fetched, or the Consumer moved by itself (offset reset)
        if part.delivered is None:
            part.delivered = part.consumed = from_offset
        part.fetched = batch.next_offset
        return True

    def messages(self, timeout_ms: int | None = None) -> Iterator[ConsumerRecord]:
        """Every record as it arrives, blocking while there is none; with ``timeout_ms`` the iteration
        ends once that long passed without a record. Ends when the member is closed."""
        while True:
            try:
                records = self.poll(timeout_ms, max_records=1)
            except GroupClosedError:
                return
            if not records:
                return
            yield records[0]

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Never ends while the member is open: blocks until new messages arrive (paper section 3.2)."""
        return self.messages(None)

    def _hand_out(self, max_records: int | None) -> list[ConsumerRecord]:
        buffer = self._buffer
        count = len(buffer) if max_records is None else min(max_records, len(buffer))
        out = [buffer.popleft() for _ in range(count)]
        parts = self._parts
        for record in out:
            tp = TopicPartition(record.topic, record.partition)
            part = parts[tp]
            part.delivered = record.offset + 1
            self._in_hand.add(tp)
        return out

    def _hand_out_batches(self, max_records: int | None) -> list[FetchedBatch]:
        batches = self._batches
        out = [batches.popleft()]
        taken = out[0].next_offset - out[0].from_offset
        while batches and (max_records is None or taken + batches[0].record_count <= max_records):
            batch = batches.popleft()
            taken += batch.next_offset - batch.from_offset
            out.append(batch)
        parts = self._parts
        for batch in out:
            tp = batch.topic_partition
            parts[tp].delivered = batch.next_offset
            self._in_hand.add(tp)
        return out

    def acknowledge(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The application is done with every record of each partition before ``offsets[tp]``: that is
        the partition's consumed position now (committed with the next commit). Partitions the stream no
        longer has (released meanwhile) and offsets at or below the consumed position are ignored; an
        offset past what was handed out raises :class:`~broker.client.errors.GroupError`."""
        with self._cond:
            for tp, offset in offsets.items():
                part = self._parts.get(tp)
                if part is None or part.consumed is None or offset <= part.consumed:
                    continue
                if part.delivered is None or offset > part.delivered:
                    raise GroupError(
                        f"stream {self.name}: cannot acknowledge {tp} up to offset {offset}: expected at "
                        f"most {part.delivered} (the offset after the last record handed out), got {offset}"
                    )
                part.consumed = offset
                if offset == part.delivered:
                    self._in_hand.discard(tp)
            self._cond.notify_all()

    def _mark_consumed(self) -> None:
        if not self._in_hand or self.explicit_positions:
            return
        for tp in self._in_hand:
            part = self._parts.get(tp)
            if part is not None:
                part.consumed = part.delivered
        self._in_hand.clear()
        self._cond.notify_all()

    # ------------------------------------------------------------------------------ member side
    # Every method below is called with the member's condition held.

    def mark_consumed(self) -> None:
        """The application is done with everything handed out (commit(), close()); with explicit
        positions only :meth:`acknowledge` says so, and this does nothing."""
        self._mark_consumed()

    def partitions(self) -> list[TopicPartition]:
        return list(self._parts)

    def fetching(self) -> set[TopicPartition]:
        """What this stream's Consumer is fetching right now."""
        return set(self._consumer.assignment())

    def add(self, tp: TopicPartition, offset: int | None) -> None:
        """Start consuming ``tp`` at ``offset`` (``None``: where ``auto_offset_reset`` says)."""
        self._changes += 1
        self._parts[tp] = _Partition(offset, offset, offset, self._changes)
        if not self._paused and not self._consumer_closed:
            self._sync()
            if offset is not None:
                self._consumer.seek(tp, offset)

    def stop(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions`` and handing out their records (they stay until :meth:`remove`)."""
        self._changes += 1
        stopped = set()
        for tp in partitions:
            part = self._parts.get(tp)
            if part is not None:
                part.releasing = True
                part.changed = self._changes
                stopped.add(tp)
        self._drop_buffered(stopped)
        if not self._consumer_closed:
            self._sync()

    def idle_since(self) -> float | None:
        """When the application last came back for records (monotonic s), or ``None`` while it is
        inside a poll now."""
        return None if self._reading else self._last_read

    def in_hand(self, partitions: Iterable[TopicPartition]) -> bool:
        return any(tp in self._in_hand for tp in partitions)

    def position(self, tp: TopicPartition, *, consumed: bool = True) -> int | None:
        part = self._parts.get(tp)
        if part is None:
            return None
        return part.consumed if consumed else part.delivered

    def remove(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """Forget ``partitions``; returns each one's consumed offset (``None``: nothing known)."""
        positions: dict[TopicPartition, int | None] = {}
        for tp in partitions:
            part = self._parts.pop(tp, None)
            self._in_hand.discard(tp)
            if part is not None:
                positions[tp] = part.consumed
        self._changes += 1
        self._drop_buffered(set(positions))
        if not self._consumer_closed:
            self._sync()
        return positions

    def rewind(self, tp: TopicPartition, offset: int) -> None:
        """The group's offset of ``tp`` was set to ``offset``: go on from there."""
        part = self._parts.get(tp)
        if part is None:
            return
        self._changes += 1
        part.delivered = part.consumed = part.fetched = offset
        part.changed = self._changes
        self._in_hand.discard(tp)
        self._drop_buffered({tp})
        if not self._paused and not self._consumer_closed and not part.releasing:
            self._consumer.seek(tp, offset)

    def pause(self) -> None:
        """Stop fetching everything now (the ZooKeeper connection is lost: ownership is in doubt)."""
        self._paused = True
        self._changes += 1
        for part in self._parts.values():
            part.changed = self._changes
        self._buffer.clear()
        self._batches.clear()
        if not self._consumer_closed:
            self._consumer.assign([])

    def resume(self) -> None:
        """Fetch again, from the delivered positions (the connection is back within the session)."""
        if not self._paused:
            return
        self._paused = False
        if self._consumer_closed:
            return
        self._sync()
        for tp, part in self._parts.items():
            part.fetched = part.delivered
            if part.delivered is not None and not part.releasing:
                self._consumer.seek(tp, part.delivered)

    def close_delivery(self, why: str | None = None) -> None:
        """Hand out nothing more (the member is closing, or ``why``); waiting callers get
        GroupClosedError (saying ``why``)."""
        self._closed = True
        if why is not None:
            self._closed_why = why
        self._buffer.clear()
        self._batches.clear()

    @property
    def consumer(self) -> Consumer:
        return self._consumer

    def close_consumer(self) -> None:
        """Close the stream's Consumer (called without the member's condition held, after the member left)."""
        with self._cond:
            self._closed = self._consumer_closed = True
            self._buffer.clear()
            self._batches.clear()
        self._consumer.close()

    def _sync(self) -> None:
        wanted = [] if self._paused else [tp for tp, part in self._parts.items() if not part.releasing]
        if set(wanted) != set(self._consumer.assignment()):
            self._consumer.assign(wanted)

    def _drop_buffered(self, partitions: set[TopicPartition]) -> None:
        if partitions and self._buffer:
            kept = [r for r in self._buffer if TopicPartition(r.topic, r.partition) not in partitions]
            self._buffer.clear()
            self._buffer.extend(kept)
        if partitions and self._batches:
            batches = [b for b in self._batches if b.topic_partition not in partitions]
            self._batches.clear()
            self._batches.extend(batches)
