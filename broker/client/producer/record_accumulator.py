"""The producer's accumulator: the batches of every partition, from the first record to the last outcome.

Kafka's ``RecordAccumulator``: :class:`~broker.client.producer.producer.Producer` (the API) appends records
here, and :class:`~broker.client.producer.sender.Sender` (the sender thread) drains the batches that are
ready into requests, puts a batch to retry back at the head of its partition, and frees a batch's buffer
memory once it is done.

State, per partition (``(topic, partition)``):

* **open**: the one batch records are appended to
  (:class:`~broker.client.producer.producer_batch.ProducerBatch`); a record that would grow it past
  ``batch_size`` bytes closes it and opens the next. With no partition given and no key, the partition is the
  sticky one (:class:`~broker.client.producer.partitioner.StickyPartitioner`), which moves on when its batch
  fills;
* **queued**: closed batches waiting for the sender, oldest first (a retry goes back to the head);
* **in flight** (idempotence only): the one batch of the partition in a request. A partition has one batch
  in flight at a time (Kafka allows five), so that a retry never lands after a later batch.

And for the whole producer: the batches not done yet (``flush`` waits for them), the bytes of
``buffer_memory`` they hold, the Produce requests in flight per broker (at most
``max_in_flight_requests_per_connection``), and the idempotent producer's id, epoch and each partition's
next sequence (:meth:`RecordAccumulator.set_producer_id`; a batch is stamped when it is first drained,
:meth:`~broker.client.producer.producer_batch.ProducerBatch.stamp`). A stamped batch that fails for good
leaves a hole in its partition's sequences, so the id is dropped and the sender asks for a new one; the next
batches start over at sequence 0, as Kafka's do.

**When a batch is ready** (:meth:`RecordAccumulator.drain_or_wait`): a queued batch at once (after its
``retry_backoff_ms`` for a retry); the open batch ``linger_ms`` after its first record, or at once while
someone flushes, closes or waits for buffer space. A batch whose leader is unknown waits (and asks for
metadata), and so does one whose partition has a batch in flight or that waits for a producer id.
Batches past ``delivery_timeout_ms`` are taken out to fail. Each broker gets one request of one batch
per partition (at most ``max_request_size`` bytes); with ``acks=0``, which keeps nothing in flight, as
many requests as its partitions have batches queued (up to :data:`MAX_UNANSWERED_REQUESTS`). A thread that
closed many batches since the sender's last pass waits for its next (:mod:`~broker.client.producer.hand_off`).

**Backpressure.** Records hold ``buffer_memory`` bytes (their size bound) from the append until their batch
is done (:meth:`RecordAccumulator.deallocate`): the buffered bytes are, at every moment, the sum of the
``buffer_bytes`` of the batches not done (the accumulator adds what each append grew a batch by). An
append that does not fit waits up to ``max_block_ms`` (every batch is ready meanwhile), then raises
:class:`~broker.client.errors.BufferExhaustedError`.

Concurrency: one lock guards all of the above. The application's threads take it to append; the sender
thread to drain, and to sleep on the ``work`` condition until a batch may be ready (a new batch whose
linger ends before the sender's wake-up, a closed batch, a response, a retry, a flush or a close notifies
it; a busy sender is not notified, it drains again before it sleeps); completions take it to free the
memory and the partition (a connection's reader thread, or the sender). Waiters for buffer space sleep on
the ``space`` condition, notified when memory is freed. The batches' own fields change only through their
methods, called under this lock (appends, stamps, requeues) or, for building and completing, by the one
thread that holds the batch at that moment.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence

from broker.client.errors import BufferExhaustedError, ClientError, ProducerClosedError, UnknownPartitionError
from broker.client.metadata.cluster_metadata import ClusterMetadata
from broker.client.producer.hand_off import HANDOFF_WEIGHT, HandOff
from broker.client.producer.partitioner import StickyPartitioner
from broker.client.producer.producer_batch import BulkDelivery, DeliveryCallback, ProducerBatch, RecordFuture
from broker.client.producer.producer_config import MAX_IDEMPOTENT_IN_FLIGHT, ProducerConfig
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType

log = logging.getLogger(__name__)

#: Bytes of a Produce request around its batches: header, client id, topic names, counts (a bound).
REQUEST_OVERHEAD_BYTES = 512
#: With ``acks=0``, the most Produce requests the sender writes to one broker at once.
MAX_UNANSWERED_REQUESTS = 500
_NOT_WAITING = float("inf")
_new_tuple = tuple.__new__
_MAX_SEQUENCE = 2**31 - 1

PartitionKey = tuple[str, int]
#: Per broker (node id), the requests to send: each a list of batches, one per partition.
ReadyRequests = dict[int, list[list[ProducerBatch]]]
Expired = list[tuple[ProducerBatch, ClientError]]


def _length(value: bytes | None) -> int:
    return 0 if value is None else len(value)


class RecordAccumulator:
    """The batches of one producer; see the module docstring."""

    def __init__(self, config: ProducerConfig, metadata: ClusterMetadata, *, keep_records: bool) -> None:
        self._config = config
        self._metadata = metadata
        self._codec = CompressionType[config.compression_type.upper()]
        self._level = config.compression_level
        self._keep_records = keep_records
        self._acks = config.acks_value
        self._request_limit = config.max_request_size - REQUEST_OVERHEAD_BYTES
        #: A batch's records may take this many bytes (the batch header excluded).
        self.batch_records_limit = max(1, min(config.batch_size, self._request_limit) - HEADER_SIZE)
        self._buffer_memory = config.buffer_memory
        self._linger_s = config.linger_ms / 1000
        self._max_block_s = config.max_block_ms / 1000
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._idempotent = config.enable_idempotence
        self._raw_parts_per_batch = MAX_IDEMPOTENT_IN_FLIGHT if config.enable_idempotence else 2**31 - 1

        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._space = threading.Condition(self._lock)
        self._hand_off = HandOff(self._lock, self._work)
        self._open: dict[PartitionKey, ProducerBatch] = {}
        self._queued: dict[PartitionKey, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._in_flight: dict[int, int] = {}
        self._buffered_bytes = 0
        self._space_waiters = 0
        self._flushing = 0
        self._closing = False
        self._force_closed = False
        #: When the sleeping sender wakes up by itself; _NOT_WAITING while it works.
        self._sender_wake_at = _NOT_WAITING
        self._partitioner = StickyPartitioner()
        self._sticky_partitions = self._partitioner.current
        #: Idempotence: the id and epoch new batches get (-1 until InitProducerId answered, and again
        #: after a reset), each partition's next sequence, and the batch each partition has in flight.
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_sequence: dict[PartitionKey, int] = {}
        self._partition_in_flight: dict[PartitionKey, ProducerBatch] = {}
        self._next_init_at = 0.0

    # ------------------------------------------------------------------------------------- appending

    def append(
        self,
        topic: str,
        partition: int | None,
        count: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        header_bytes: bytes,
        size: int,
        on_delivery: DeliveryCallback | None,
    ) -> RecordFuture:
        """Append one record of about ``size`` bytes to ``partition`` of ``topic`` (``count`` partitions;
        None: the sticky partition), waiting for buffer space up to ``max_block_ms``."""
        limit = self.batch_records_limit
        with self._lock:
            if self._closing:
                raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
            if self._buffered_bytes + size > self._buffer_memory:
                self._wait_for_space(size, topic)
            sticky = partition is None
            if partition is None:
                partition = self._sticky_partitions.get(topic)
                if partition is None or partition >= count:
                    partition = self._partitioner.partition(topic, count)
            elif not 0 <= partition < count:
                raise UnknownPartitionError(topic, partition, count)
            key_tuple = (topic, partition)
            found = self._open.get(key_tuple)
            if found is None:
                index = -1
            else:
                batch = found
                held = found.size_bytes
                index = found.append(timestamp_ms, key, value, header_bytes, limit)
            if index < 0:
                batch, key_tuple, index, held = self._append_to_new_batch(
                    found, key_tuple, sticky, count, timestamp_ms, key, value, header_bytes
                )
            self._buffered_bytes += batch.size_bytes - held  # a batch holds its records' size bound
            if on_delivery is not None:
                batch.add_callback(index, timestamp_ms, on_delivery)
            if batch.size_bytes >= limit:
                self._close_batch(key_tuple, batch)
            if self._hand_off.weight >= HANDOFF_WEIGHT:
                self._hand_off.wait_for_sender()
        return _new_tuple(RecordFuture, (batch, index, timestamp_ms))  # no constructor frame: RecordFuture's

    def _append_to_new_batch(
        self,
        batch: ProducerBatch | None,
        key_tuple: PartitionKey,
        sticky: bool,
        count: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        header_bytes: bytes,
    ) -> tuple[ProducerBatch, PartitionKey, int, int]:
        """Under the lock: the record did not fit the open batch (or there is none): close it, move the
        sticky partition on if it chose this one, and append to the next batch. Returns the batch, its
        partition, the record's index and the batch's size before the record."""
        limit = self.batch_records_limit
        if batch is not None:
            self._close_batch(key_tuple, batch)
        if sticky:
            key_tuple = (key_tuple[0], self._partitioner.on_new_batch(key_tuple[0], count, key_tuple[1]))
            found = self._open.get(key_tuple)
            if found is not None:
                held = found.size_bytes
                index = found.append(timestamp_ms, key, value, header_bytes, limit)
                if index >= 0:
                    return found, key_tuple, index, held
                self._close_batch(key_tuple, found)
        fresh = self._new_batch(key_tuple)
        return fresh, key_tuple, fresh.append(timestamp_ms, key, value, header_bytes, limit), 0

    def append_many(
        self,
        topic: str,
        partition: int | None,
        count: int,
        timestamp_ms: int,
        key: bytes | None,
        values: Sequence[bytes | None],
        header_bytes: bytes,
        fixed: int,
    ) -> BulkDelivery:
        """Append ``values`` in order (each record ``fixed`` bytes plus its value), to ``partition`` or
        the sticky partitions, waiting for space as :meth:`append` does."""
        delivery = BulkDelivery()
        position = 0
        total = len(values)
        limit = self.batch_records_limit
        with self._lock:
            if self._closing:
                raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
            while position < total:
                need = fixed + _length(values[position])
                if self._buffered_bytes + need > self._buffer_memory:
                    try:
                        self._wait_for_space(need, topic)
                    except BufferExhaustedError as exc:
                        exc.delivery = delivery
                        raise
                chosen = partition if partition is not None else self._partitioner.partition(topic, count)
                key_tuple = (topic, chosen)
                batch = self._open.get(key_tuple)
                if batch is None:
                    if partition is None:
                        chosen = self._partitioner.on_new_batch(topic, count, chosen)
                        key_tuple = (topic, chosen)
                        batch = self._open.get(key_tuple)
                    if batch is None:
                        batch = self._new_batch(key_tuple)
                first = batch.count
                held = batch.size_bytes
                bound = min(limit, batch.size_bytes + self._buffer_memory - self._buffered_bytes)
                after = batch.append_values(timestamp_ms, key, values, position, header_bytes, bound)
                if after == position:  # the batch is full
                    self._close_batch(key_tuple, batch)
                    continue
                position = after
                self._buffered_bytes += batch.size_bytes - held
                delivery._add(batch, first, batch.count - first)
                if batch.size_bytes >= limit:
                    self._close_batch(key_tuple, batch)
            if self._hand_off.weight >= HANDOFF_WEIGHT:
                self._hand_off.wait_for_sender()
        return delivery

    def append_raw(
        self,
        topic: str,
        partition: int,
        data: bytes | memoryview,
        record_count: int,
        first_timestamp_ms: int,
        on_delivery: DeliveryCallback | None,
    ) -> BulkDelivery:
        """Queue one whole record batch v2 (``data``) after the records appended to the partition before
        it (their open batch is closed), with the raw batches queued before it while they fit."""
        key = (topic, partition)
        size = len(data)
        limit = self.batch_records_limit + HEADER_SIZE
        delivery = BulkDelivery()
        with self._lock:
            if self._closing:
                raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
            if self._buffered_bytes + size > self._buffer_memory:
                self._wait_for_space(size, topic)
            open_batch = self._open.get(key)
            if open_batch is not None:  # records sent before this batch are sent before it
                self._close_batch(key, open_batch)
            queue = self._queued.get(key)
            target = queue[-1] if queue else None
            parts = self._raw_parts_per_batch
            index = -1 if target is None else target.append_raw(data, record_count, limit, parts)
            if target is None or index < 0:
                target = ProducerBatch.raw(topic, partition, time.monotonic())
                self._incomplete.add(target)
                index = target.append_raw(data, record_count, limit, parts)
                self._close_batch(key, target)
            self._buffered_bytes += size
            if on_delivery is not None:
                target.add_callback(index, first_timestamp_ms, on_delivery)
            delivery._add(target, index, record_count)
            if self._hand_off.weight >= HANDOFF_WEIGHT:
                self._hand_off.wait_for_sender()
        return delivery

    def _wait_for_space(self, size: int, topic: str) -> None:
        """Under the lock: wait until ``size`` bytes fit in the buffer, or raise after ``max_block_ms``."""
        deadline = time.monotonic() + self._max_block_s
        self._space_waiters += 1
        self._work.notify()  # batches are ready at once while someone waits for space
        try:
            while self._buffered_bytes + size > self._buffer_memory:
                if self._closing:
                    raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"cannot send a {size}-byte record to topic {topic!r}: {self._buffered_bytes} of "
                        f"buffer_memory={self._buffer_memory} bytes are held by unacknowledged records, and "
                        f"none were freed within max_block_ms={self._config.max_block_ms}"
                    )
                self._space.wait(remaining)
        finally:
            self._space_waiters -= 1

    def _new_batch(self, key: PartitionKey) -> ProducerBatch:
        batch = ProducerBatch(
            key[0], key[1], self._codec, time.monotonic(), keep_records=self._keep_records, level=self._level
        )
        self._open[key] = batch
        self._incomplete.add(batch)
        wake_at = self._sender_wake_at
        if wake_at != _NOT_WAITING and batch.created_at + self._linger_s < wake_at:
            self._work.notify()  # it sleeps past this batch's linger
        return batch

    def _close_batch(self, key: PartitionKey, batch: ProducerBatch) -> None:
        """Under the lock: no more appends to ``batch``; it waits in its partition's queue."""
        if self._open.get(key) is batch:
            del self._open[key]
        queue = self._queued.get(key)
        if queue is None:
            queue = self._queued[key] = deque()
        queue.append(batch)
        self._hand_off.weight += 1 + len(batch.segments)
        if self._sender_wake_at != _NOT_WAITING:  # a busy sender drains it anyway before it sleeps
            self._work.notify()

    # ------------------------------------------------------------------------------ flush and close

    @property
    def buffered_bytes(self) -> int:
        """Bytes held by records not yet done."""
        return self._buffered_bytes

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def force_closed(self) -> bool:
        return self._force_closed

    def begin_flush(self) -> list[ProducerBatch]:
        """Every batch is ready from now until :meth:`end_flush`; returns the batches not done yet."""
        with self._lock:
            self._flushing += 1
            pending = list(self._incomplete)
            self._work.notify()
        return pending

    def end_flush(self) -> None:
        with self._lock:
            self._flushing -= 1

    def close(self) -> None:
        """No more appends; every batch is ready; the sender stops once none is left."""
        with self._lock:
            self._closing = True
            self._work.notify()
            self._space.notify_all()

    def abort_undrained(self) -> list[ProducerBatch]:
        """Close at once: take every batch not drained yet out (the caller fails them); the sender stops."""
        with self._lock:
            self._force_closed = True
            self._hand_off.held_back = True  # for good: the sender makes no more passes
            waiting = [b for q in self._queued.values() for b in q] + list(self._open.values())
            self._queued.clear()
            self._open.clear()
            self._work.notify()
        return waiting

    # ---------------------------------------------------------------------------------- the sender's

    def drain_or_wait(self) -> tuple[ReadyRequests, Expired] | None:
        """The batches ready to send, by leader, and those past ``delivery_timeout_ms``; when there are
        none, sleeps until something may be ready and returns empty ones. None: the sender must stop
        (closed and every batch done, or closed by force)."""
        with self._lock:
            ready, expired, wake_in = self._drain(time.monotonic())
            if ready or expired:
                return ready, expired
            if (self._closing and not self._incomplete) or self._force_closed:
                return None
            self._sender_wake_at = time.monotonic() + wake_in
            self._work.wait(wake_in)
            self._sender_wake_at = _NOT_WAITING
            return {}, []

    def _drain(self, now: float) -> tuple[ReadyRequests, Expired, float]:
        """Under the lock: take the batches that are ready and whose leader can take a request (see "When
        a batch is ready" in the module docstring); also returns how long the sender may sleep."""
        snapshot = self._metadata.snapshot
        self._hand_off.pass_begins()
        held_back = False  # by the brokers (see hand_off)
        hurry = self._flushing > 0 or self._closing or self._space_waiters > 0
        wake_in = 1.0 if self._incomplete else 5.0
        ready: ReadyRequests = {}
        sizes: dict[int, int] = {}
        request_sizes: dict[int, list[int]] = {}  # acks=0: bytes of each request after the first
        expired: Expired = []
        limit = self._request_limit
        timeout_ms = self._config.delivery_timeout_ms
        keys = set(self._queued) | set(self._open)
        for key in keys:
            queue = self._queued.get(key)
            # expire what waited too long
            while queue and now - queue[0].created_at >= self._delivery_timeout_s:
                batch = queue.popleft()
                expired.append((batch, batch.expiry_error(now, timeout_ms)))
            open_batch = self._open.get(key)
            if open_batch is not None and now - open_batch.created_at >= self._delivery_timeout_s:
                del self._open[key]
                expired.append((open_batch, open_batch.expiry_error(now, timeout_ms)))
                open_batch = None
            if queue:
                head = queue[0]
                if head.retry_at > now:
                    wake_in = min(wake_in, head.retry_at - now)
                    held_back = True
                    continue
            elif open_batch is not None:
                head = open_batch
                due = head.created_at + self._linger_s
                if not hurry and due > now:
                    wake_in = min(wake_in, due - now)
                    continue
            else:
                if queue is not None:
                    del self._queued[key]
                continue
            if self._idempotent:
                if key in self._partition_in_flight:
                    held_back = True
                    continue  # its batch in flight completes (or is retried) first; a response wakes us
                if head.producer_id < 0 and self._producer_id < 0:
                    wake_in = min(wake_in, max(self._next_init_at - now, 0.01))
                    held_back = True
                    continue  # it waits for a producer id
            leader = snapshot.leader(key[0], key[1])
            if leader is None:
                self._metadata.request_update()
                wake_in = min(wake_in, max(self._retry_backoff_s, 0.01))
                held_back = True
                continue
            node = leader.node_id
            if self._acks != 0 and node not in ready and self._in_flight.get(node, 0) >= self._max_in_flight:
                held_back = True
                continue  # a response will wake the sender
            size = head.size_bytes + HEADER_SIZE
            taken = sizes.get(node, 0)
            if taken and taken + size > limit:
                wake_in = 0.0
                continue
            sizes[node] = taken + size
            if queue:
                queue.popleft()
            else:
                del self._open[key]
            head.mark_drained()
            if self._idempotent:
                self._partition_in_flight[key] = head
                sequence = self._next_sequence.get(key, 0)
                if head.stamp(self._producer_id, self._producer_epoch, sequence):  # retries keep theirs
                    self._next_sequence[key] = (sequence + head.count) & _MAX_SEQUENCE
            requests = ready.get(node)
            if requests is None:
                requests = ready[node] = [[]]
            requests[0].append(head)
            if self._acks == 0 and queue:
                # nothing stays in flight: the next batches of this partition go in the next requests
                sizes_of = request_sizes.setdefault(node, [])
                index = 1
                while queue and index < MAX_UNANSWERED_REQUESTS and queue[0].retry_at <= now:
                    size = queue[0].size_bytes + HEADER_SIZE
                    if index == len(requests):
                        requests.append([])
                        sizes_of.append(0)
                    if sizes_of[index - 1] and sizes_of[index - 1] + size > limit:
                        break  # that request is full; the rest goes next time
                    batch = queue.popleft()
                    batch.mark_drained()
                    requests[index].append(batch)
                    sizes_of[index - 1] += size
                    index += 1
        if ready and self._acks != 0:
            for node in ready:
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self._hand_off.held_back = held_back
        return ready, expired, max(wake_in, 0.0)

    def request_done(self, node_id: int) -> None:
        """A request to ``node_id`` got its response (or failed): the broker may take another."""
        with self._lock:
            self._in_flight[node_id] = self._in_flight.get(node_id, 1) - 1
            self._work.notify()

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        """``batch`` goes back to the head of its partition, to be sent again from ``retry_at``."""
        with self._lock:
            key = (batch.topic, batch.partition)
            if self._partition_in_flight.get(key) is batch:
                del self._partition_in_flight[key]
            batch.requeue(retry_at)
            queue = self._queued.get(key)
            if queue is None:
                queue = self._queued[key] = deque()
            queue.appendleft(batch)
            self._work.notify()

    def deallocate(self, batches: Sequence[ProducerBatch], error: BaseException | None) -> None:
        """``batches`` are done (failed with ``error`` unless None): free their buffer memory and their
        partitions (see the module docstring for the idempotent producer's reset)."""
        with self._lock:
            incomplete = self._incomplete
            freed = 0
            done = False
            if self._idempotent:
                self._idempotent_done(batches, error)
            for batch in batches:
                if batch in incomplete:
                    incomplete.discard(batch)
                    freed += batch.buffer_bytes
                    done = True
            if done:
                self._buffered_bytes -= freed
                if self._space_waiters:
                    self._space.notify_all()
                if self._closing or self._flushing:
                    self._work.notify()

    def _idempotent_done(self, batches: Sequence[ProducerBatch], error: BaseException | None) -> None:
        """Under the lock: ``batches`` are done; their partitions may send again. A stamped batch that
        failed leaves a hole in its partition's sequences (or an unknown outcome), so the producer starts
        over with a new producer id, as Kafka's does; the batches stamped before keep theirs."""
        in_flight = self._partition_in_flight
        freed = False
        for batch in batches:
            key = (batch.topic, batch.partition)
            if in_flight.get(key) is batch:
                del in_flight[key]
                freed = True
        if freed and (self._queued or self._open):
            self._work.notify()  # the partition's next batch may go now
        if error is None:
            return
        stamped = [b for b in batches if b.producer_id >= 0]
        if stamped and any(b.producer_id == self._producer_id for b in stamped):
            log.warning(
                "producer id %d: %d batches failed after their sequences were given (%s); the next batches "
                "get a new producer id",
                self._producer_id,
                len(stamped),
                error,
            )
            self._producer_id = self._producer_epoch = -1
            self._next_sequence.clear()
            self._work.notify()

    # -------------------------------------------------------------------------------- idempotence

    def needs_producer_id(self, now: float) -> bool:
        """Idempotent, without a producer id, and past the back-off of the last failed request."""
        return self._idempotent and self._producer_id < 0 and now >= self._next_init_at

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """InitProducerId answered: new batches get this id and epoch, sequences start over at 0."""
        with self._lock:
            self._producer_id, self._producer_epoch = producer_id, producer_epoch
            self._next_sequence.clear()
            self._work.notify()

    def producer_id_failed(self, retry_at: float) -> None:
        """No broker gave a producer id: ask again from ``retry_at`` (new batches wait meanwhile)."""
        self._next_init_at = retry_at
