"""Lumber's producer: batches records per partition and sends them to the leaders (paper section 3.2).

Usage::

    producer = Producer(ProducerConfig(bootstrap_servers=["127.0.0.1:9092"], acks="all"))
    future = producer.send("events", b"value", key=b"user-7")     # returns at once
    producer.send_many("events", values, partition=3)              # many records, one call, one result
    producer.send_batch("events", 3, batch_bytes)                   # a whole record batch v2, as it is
    producer.flush()                                               # everything sent so far is done
    future.result()                 # RecordMetadata(topic, partition, offset, timestamp_ms), or raises
    producer.close()                # sends what was accepted, then stops; loses nothing

How it works:

* **Accumulating.** ``send()`` picks the partition (:mod:`broker.client.partitioner`: murmur2 of the key,
  else the sticky partition) and encodes the record straight into the open
  :class:`~broker.client.producer_batch.ProducerBatch` of that partition, under one lock. A record that
  would grow a batch past ``batch_size`` bytes (61-byte header included, uncompressed) closes it and opens
  the next. Each record's timestamp is its creation time (``CreateTime``) unless given, and each carries a
  ``host`` header with the producing host's name (first, unless the caller sets ``host`` itself).
* **Sending.** One sender thread sends a batch once it is full, or ``linger_ms`` after its first record, or
  at once during ``flush()``/``close()`` or while a caller waits for buffer space. It groups ready batches
  by leader into Produce requests (one batch per partition, at most ``max_request_size`` bytes) and keeps
  up to ``max_in_flight_requests_per_connection`` requests in flight per broker (pipelined on one
  connection). Responses complete the batches in the connection's reader thread.
* **Raw batches.** ``send_batch()`` takes one whole record batch v2 encoded elsewhere (e.g. a
  :class:`~broker.client.fetched_batch.FetchedBatch`'s bytes, fetched from another cluster) and sends it
  unchanged to the given partition: no record is decoded or re-encoded, so keys, values, timestamps,
  headers and compression stay as they are (no ``host`` header is added), and the broker
  assigns the offsets (it rewrites only the base offset, outside the CRC). It goes after the records sent
  to that partition before it (their open batch is closed), and consecutive raw batches of a partition
  travel together, one after the other in one request's records, up to ``batch_size`` bytes (a larger one
  alone, up to ``max_request_size``; at most five with idempotence, the most a broker remembers per
  producer, each stamped with this producer's id and sequences; without it, another cluster's producer id
  is cleared). Queued at once, with no linger; the rest (leaders, requests in
  flight, acks, retries, ``buffer_memory``, ``delivery_timeout_ms``) is as for any batch. Raw batches are
  not counted by the producer's audit: they were counted where they were produced.
* **Acks.** ``acks="0"``: no response (offsets are -1, the paper's asynchronous producer); ``"1"``: the
  leader appended; ``"all"``: the leader flushed (Lumber has one replica per partition).
* **Backpressure.** Records hold ``buffer_memory`` bytes from ``send()`` until their batch is done. A send
  that does not fit waits up to ``max_block_ms`` (while every batch is sent at once), then raises
  :class:`~broker.client.errors.BufferExhaustedError`. Waiting for an unknown topic's metadata is bounded
  by ``max_block_ms`` too (:class:`~broker.client.errors.UnknownTopicError`).
* **Idempotence** (``enable_idempotence``, on by default as in Kafka; it needs ``acks="all"``). The sender
  asks a broker for a producer id (InitProducerId) before the first batch, and stamps the id, its epoch
  and the partition's next sequence on each batch when it is first drained; a retry sends the same bytes,
  which the broker recognises (the original offsets come back) instead of storing them twice. A partition
  has one batch in flight at a time (Kafka allows five), so a retry never lands after a later batch. A
  stamped batch that fails for good (a sequence error such as OUT_OF_ORDER_SEQUENCE_NUMBER, which means
  the broker refused it, or any other final error) leaves a hole in its partition's sequences, so the
  producer asks for a new producer id and the next batches start over at sequence 0, as Kafka's does.
* **Errors.** A retriable error (leader moved, connection lost, request timed out...) sends the batch again
  after ``retry_backoff_ms``, at the head of its partition, after learning the cluster again when the error
  says the leader moved, up to ``retries`` times and within ``delivery_timeout_ms`` of the batch's creation.
  Anything else (MESSAGE_TOO_LARGE, an unknown topic past the deadline, ...) fails the batch: its futures
  raise the error and its callbacks get it. Without idempotence and with several requests in flight a
  retried batch may land after a later one, or twice (as in Kafka). Nothing accepted is dropped silently:
  every record's future ends in an offset or an error.
* **Audit** (paper section 4). With ``audit_interval_ms`` above 0, the records the brokers confirmed are
  counted per topic and window of their timestamp (:mod:`audit.audit_counter`, fed by the
  delivery path) and published to ``audit_topic`` every interval and on close
  (:mod:`audit.audit_emitter`).

Thread safety: every public method may be called from any thread. Delivery callbacks run in a connection's
reader thread (or the sender thread): keep them short, and do not call ``flush()`` or ``close()`` in them.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from time import time_ns as _time_ns
from typing import Any

from audit.audit_emitter import AuditEmitter
from broker.client.broker_pool import BrokerPool
from broker.client.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.cluster_snapshot import ClusterSnapshot
from broker.client.connection import PendingRequest
from broker.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    BufferExhaustedError,
    ClientError,
    DeliveryTimeoutError,
    ProducerClosedError,
    ProducerError,
    RecordTooLargeError,
    UnknownPartitionError,
)
from broker.client.partitioner import StickyPartitioner, partition_for_key
from broker.client.producer_batch import (
    BulkDelivery,
    DeliveryCallback,
    Header,
    ProducerBatch,
    RecordFuture,
    encode_headers,
)
from broker.client.producer_config import MAX_IDEMPOTENT_IN_FLIGHT, ProducerConfig
from broker.client.record_encoder import record_bound
from broker.log.clock import Clock, system_clock_ms
from broker.log.compression import CompressionType
from broker.log.errors import CorruptRecordError
from broker.log.record_batch import HEADER_SIZE, MAGIC, RecordBatch
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)

log = logging.getLogger(__name__)

#: Bytes of a Produce request around its batches: header, client id, topic names, counts (a bound).
_REQUEST_OVERHEAD_BYTES = 512
_NOT_WAITING = float("inf")
#: With ``acks=0``, the most Produce requests the sender writes to one broker at once.
_MAX_UNANSWERED_REQUESTS = 500
_HOST_HEADER = "host"

PartitionKey = tuple[str, int]


class Producer:
    """Sends records to a Lumber (or Kafka) cluster; see the module docstring."""

    def __init__(
        self,
        config: ProducerConfig | None = None,
        *,
        bootstrap_servers: Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        clock_ms: Clock = system_clock_ms,
    ) -> None:
        self.config = config = config if config is not None else ProducerConfig()
        servers = list(bootstrap_servers) if bootstrap_servers is not None else list(config.bootstrap_servers)
        self._clock_ms = clock_ms
        self._system_clock = clock_ms is system_clock_ms
        self._pool = BrokerPool(
            client_id=config.client_id,
            request_timeout_ms=config.request_timeout_ms,
            connect_timeout_ms=config.connect_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self._metadata = ClusterMetadata(
            metadata_source(
                servers,
                zookeeper_connect,
                self._pool,
                section="producer",
                timeout_ms=config.connect_timeout_ms,
            ),
            retry_backoff_ms=config.retry_backoff_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            allow_auto_create=config.allow_auto_topic_creation,
        )
        self._codec = CompressionType[config.compression_type.upper()]
        self._acks = config.acks_value
        host = config.host_name or socket.gethostname()
        self._host = host.encode("utf-8")
        self._host_headers = encode_headers([(_HOST_HEADER, self._host)])
        # A batch's records may take this many bytes (the batch header excluded).
        self._batch_records_limit = max(
            1, min(config.batch_size, config.max_request_size - _REQUEST_OVERHEAD_BYTES) - HEADER_SIZE
        )
        self._max_record_bytes = min(config.max_request_size - _REQUEST_OVERHEAD_BYTES, config.buffer_memory)
        self._buffer_memory = config.buffer_memory
        self._linger_s = config.linger_ms / 1000
        self._max_block_s = config.max_block_ms / 1000
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._request_timeout_ms = config.request_timeout_ms
        self._idempotent = config.enable_idempotence
        #: Idempotence (under the lock): the id and epoch new batches get (-1 until InitProducerId
        #: answered, and again after a reset), each partition's next sequence, and the batch each
        #: partition has in flight (one at a time, so that a retry never lands after a later batch).
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_sequence: dict[PartitionKey, int] = {}
        self._partition_in_flight: dict[PartitionKey, ProducerBatch] = {}
        self._next_init_at = 0.0
        self._raw_parts_per_batch = MAX_IDEMPOTENT_IN_FLIGHT if config.enable_idempotence else 2**31 - 1

        self._lock = threading.Lock()
        self._wake_sender = threading.Condition(self._lock)
        self._space_freed = threading.Condition(self._lock)
        self._open: dict[PartitionKey, ProducerBatch] = {}
        self._queued: dict[PartitionKey, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._in_flight: dict[int, int] = {}
        self._buffered_bytes = 0
        self._space_waiters = 0
        self._flushing = 0
        self._closing = False
        self._force_closed = False
        #: When the sleeping sender wakes up by itself; _NOT_WAITING while it works (under the lock).
        self._sender_wake_at = _NOT_WAITING
        self._partitioner = StickyPartitioner()
        self._sticky_partitions = self._partitioner.current
        self._plain_record_bound = record_bound(0, 0, len(self._host_headers))
        self._audit = AuditEmitter(self, config, host, clock_ms) if config.audit_interval_ms > 0 else None
        self._sender = threading.Thread(target=self._run_sender, name="lumber-producer-sender", daemon=True)
        self._sender.start()

    # ----------------------------------------------------------------------------------------- sending

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        *,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its :class:`RecordFuture` at once (unless the buffer is full).

        ``partition`` overrides the partitioner. ``headers`` follow the ``host`` header. ``on_delivery``
        is called with ``(RecordMetadata, None)`` or ``(None, error)`` once the record's batch is done.
        Raises :class:`UnknownTopicError`, :class:`UnknownPartitionError`, :class:`RecordTooLargeError`,
        :class:`BufferExhaustedError` or :class:`ProducerClosedError`; every other failure reaches the
        future and the callback.
        """
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000 if self._system_clock else self._clock_ms()
        partitions = self._metadata.snapshot.topics.get(topic)
        if partitions is None:
            partitions = self._wait_for_topic(topic)
        count = len(partitions)
        if headers is None:
            header_bytes = self._host_headers
            size = self._plain_record_bound
        else:
            header_bytes = self._encode_headers(headers)
            size = record_bound(0, 0, len(header_bytes))
        if value is not None:
            if type(value) is not bytes:
                value = _as_bytes(value, "value")
            size += len(value)
        if key is not None:
            if type(key) is not bytes:
                key = _as_bytes(key, "key")
            size += len(key) + 5
            if partition is None:
                partition = partition_for_key(key, count)
        if size > self._max_record_bytes:
            self._raise_too_large(topic, size)
        limit = self._batch_records_limit
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
            index = -1 if found is None else found.append(timestamp_ms, key, value, header_bytes, limit)
            if found is None or index < 0:
                batch, key_tuple, index = self._append_to_new_batch(
                    found, key_tuple, sticky, count, timestamp_ms, key, value, header_bytes
                )
            else:
                batch = found
            size = batch.size_bytes
            self._buffered_bytes += size - batch.reserved_bytes
            batch.reserved_bytes = size
            if on_delivery is not None:
                batch.add_callback(index, timestamp_ms, on_delivery)
            if size >= limit:
                self._close_batch(key_tuple, batch)
        return RecordFuture(batch, index, timestamp_ms)

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
    ) -> tuple[ProducerBatch, PartitionKey, int]:
        """Under the lock: the record did not fit the open batch (or there is none): close it, move the
        sticky partition on if it chose this one, and append to the next batch."""
        limit = self._batch_records_limit
        if batch is not None:
            self._close_batch(key_tuple, batch)
        if sticky:
            key_tuple = (key_tuple[0], self._partitioner.on_new_batch(key_tuple[0], count, key_tuple[1]))
            found = self._open.get(key_tuple)
            if found is not None:
                index = found.append(timestamp_ms, key, value, header_bytes, limit)
                if index >= 0:
                    return found, key_tuple, index
                self._close_batch(key_tuple, found)
        fresh = self._new_batch(key_tuple)
        return fresh, key_tuple, fresh.append(timestamp_ms, key, value, header_bytes, limit)

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        *,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
    ) -> BulkDelivery:
        """Queue many records at once: same key, headers and timestamp (default: now), no per-record future.

        The records go to ``partition``, else the key's partition, else the sticky partition (moving on
        when a batch fills), in order. Returns a :class:`BulkDelivery` whose ``result()`` lists where each
        consecutive run landed. If the buffer stays full for ``max_block_ms`` part-way, raises
        :class:`BufferExhaustedError` whose ``delivery`` holds the records accepted so far.
        """
        if timestamp_ms is None:
            timestamp_ms = self._clock_ms()
        partitions = self._metadata.snapshot.topics.get(topic)
        if partitions is None:
            partitions = self._wait_for_topic(topic)
        count = len(partitions)
        header_bytes = self._host_headers if headers is None else self._encode_headers(headers)
        if key is not None and partition is None:
            partition = partition_for_key(key, count)
        if partition is not None and not 0 <= partition < count:
            raise UnknownPartitionError(topic, partition, count)
        if type(values) is not tuple:
            values = tuple(values)  # the batch keeps them until it is sent: the caller may reuse its list
        kinds = set(map(type, values))
        if not kinds <= _VALUE_TYPES:
            bad = next(i for i, v in enumerate(values) if type(v) not in _VALUE_TYPES)
            raise TypeError(
                f"send_many: values must be bytes or None, value #{bad} is {type(values[bad]).__name__}"
            )
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        fixed = record_bound(0, 0 if key is None else len(key) + 5, len(header_bytes))
        largest = max(map(len, values), default=0) if type(None) not in kinds else max(map(_length, values))
        if fixed + largest > self._max_record_bytes:
            self._raise_too_large(topic, fixed + largest)
        delivery = BulkDelivery()
        position = 0
        total = len(values)
        limit = self._batch_records_limit
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
                bound = min(limit, batch.size_bytes + self._buffer_memory - self._buffered_bytes)
                after = batch.append_values(timestamp_ms, key, values, position, header_bytes, bound)
                if after == position:  # the batch is full
                    self._close_batch(key_tuple, batch)
                    continue
                position = after
                size = batch.size_bytes
                self._buffered_bytes += size - batch.reserved_bytes
                batch.reserved_bytes = size
                delivery._add(batch, first, batch.count - first)
                if batch.size_bytes >= limit:
                    self._close_batch(key_tuple, batch)
        return delivery

    def send_batch(
        self,
        topic: str,
        partition: int,
        batch: bytes | memoryview,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> BulkDelivery:
        """Queue ``batch``, one whole record batch v2, for ``partition`` of ``topic``, to be sent as it is
        (see "Raw batches" in the module docstring; its base offset is ignored: the broker assigns).

        Returns a :class:`BulkDelivery` whose ``result()`` is the one range where its records landed.
        ``on_delivery`` is called once, with the metadata of its first record or the error. Raises
        :class:`ProducerError` if ``batch`` is not one whole batch v2 of at least one record (a control
        batch is refused too), and like :meth:`send` otherwise; the broker checks the CRC.
        """
        partitions = self._metadata.snapshot.topics.get(topic)
        if partitions is None:
            partitions = self._wait_for_topic(topic)
        count = len(partitions)
        if not 0 <= partition < count:
            raise UnknownPartitionError(topic, partition, count)
        header = _raw_batch_header(topic, partition, batch)
        size = len(batch)
        if size > self._max_record_bytes:
            raise RecordTooLargeError(
                f"a {size}-byte record batch for {topic}-{partition} (offsets {header.base_offset}.."
                f"{header.last_offset} at the source) is more than the producer can send: max_request_size "
                f"is {self.config.max_request_size} and buffer_memory {self._buffer_memory}"
            )
        record_count = header.record_count
        key = (topic, partition)
        limit = self._batch_records_limit + HEADER_SIZE
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
            index = -1 if target is None else target.append_raw(batch, record_count, limit, parts)
            if target is None or index < 0:
                target = ProducerBatch.raw(topic, partition, time.monotonic())
                self._incomplete.add(target)
                index = target.append_raw(batch, record_count, limit, parts)
                self._close_batch(key, target)
            self._buffered_bytes += size
            target.reserved_bytes += size
            if on_delivery is not None:
                target.add_callback(index, header.first_timestamp_ms, on_delivery)
            delivery._add(target, index, record_count)
        return delivery

    def _encode_headers(self, headers: Sequence[Header]) -> bytes:
        if any(name == _HOST_HEADER for name, _ in headers):
            return encode_headers(headers)
        return encode_headers([(_HOST_HEADER, self._host), *headers])

    def _raise_too_large(self, topic: str, size: int) -> None:
        raise RecordTooLargeError(
            f"a record for topic {topic!r} takes about {size} bytes, more than the producer can send: "
            f"max_request_size is {self.config.max_request_size} and buffer_memory {self._buffer_memory}"
        )

    def _wait_for_topic(self, topic: str) -> Any:
        if self._closing:
            raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
        return self._metadata.wait_for_topic(topic, self.config.max_block_ms)

    def _wait_for_space(self, size: int, topic: str) -> None:
        """Under the lock: wait until ``size`` bytes fit in the buffer, or raise after ``max_block_ms``."""
        deadline = time.monotonic() + self._max_block_s
        self._space_waiters += 1
        self._wake_sender.notify()  # batches are ready at once while someone waits for space
        try:
            while self._buffered_bytes + size > self._buffer_memory:
                if self._closing:
                    raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"cannot send a {size}-byte record to topic {topic!r}: {self._buffered_bytes} of "
                        f"buffer_memory={self._buffer_memory} bytes are held by unacknowledged records, and "
                        f"none were freed within max_block_ms={self.config.max_block_ms}"
                    )
                self._space_freed.wait(remaining)
        finally:
            self._space_waiters -= 1

    def _new_batch(self, key: PartitionKey) -> ProducerBatch:
        batch = ProducerBatch(key[0], key[1], self._codec, time.monotonic())
        self._open[key] = batch
        self._incomplete.add(batch)
        wake_at = self._sender_wake_at
        if wake_at != _NOT_WAITING and batch.created_at + self._linger_s < wake_at:
            self._wake_sender.notify()  # it sleeps past this batch's linger
        return batch

    def _close_batch(self, key: PartitionKey, batch: ProducerBatch) -> None:
        """Under the lock: no more appends to ``batch``; it waits in its partition's queue."""
        if self._open.get(key) is batch:
            del self._open[key]
        queue = self._queued.get(key)
        if queue is None:
            queue = self._queued[key] = deque()
        queue.append(batch)
        if self._sender_wake_at != _NOT_WAITING:  # a busy sender drains it anyway before it sleeps
            self._wake_sender.notify()

    # ---------------------------------------------------------------------------------- flush and close

    def flush(self, timeout_s: float | None = None) -> None:
        """Send every record accepted so far now and wait until each is done (delivered or failed).

        Raises :class:`TimeoutError` if ``timeout_s`` passes first; delivery errors stay in the futures.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            self._flushing += 1
            pending = list(self._incomplete)
            self._wake_sender.notify()
        try:
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.wait(remaining):
                    undone = sum(b.count for b in pending if not b.done)
                    raise TimeoutError(f"flush: {undone} records still undelivered after {timeout_s} s")
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout_s: float | None = None) -> None:
        """Stop accepting records, deliver every record accepted (or fail it with its error), then stop.

        Without ``timeout_s`` this waits as long as delivery takes (bounded by ``delivery_timeout_ms``).
        With it, records still undelivered when it passes fail with :class:`ProducerClosedError` (in their
        futures and callbacks): they are reported, never silently dropped. Idempotent. An audited producer
        first publishes its last audit counts (:meth:`AuditEmitter.close`).
        """
        if self._audit is not None:
            self._audit.close(timeout_s)
        with self._lock:
            self._closing = True
            self._wake_sender.notify()
            self._space_freed.notify_all()
        if self._sender is not threading.current_thread():
            self._sender.join(timeout_s)
        if self._sender.is_alive():
            self._force_close(f"close() timed out after {timeout_s} s")
            self._sender.join(10)
        self._pool.close()
        self._metadata.close()

    def _force_close(self, reason: str) -> None:
        with self._lock:
            self._force_closed = True
            waiting = [b for q in self._queued.values() for b in q] + list(self._open.values())
            self._queued.clear()
            self._open.clear()
            self._wake_sender.notify()
        for batch in waiting:
            self._finish(batch, -1, ProducerClosedError(f"{batch!r} not delivered: {reason}"))
        self._pool.close()  # in-flight requests fail, and so do their batches

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def buffered_bytes(self) -> int:
        """Bytes held by records not yet acknowledged."""
        return self._buffered_bytes

    def partitions_for(self, topic: str) -> int:
        """The number of partitions of ``topic`` (waiting up to ``max_block_ms`` for its metadata)."""
        return len(self._metadata.wait_for_topic(topic, self.config.max_block_ms))

    # ------------------------------------------------------------------------------------ sender thread

    def _run_sender(self) -> None:
        try:
            while True:
                if self._metadata.needs_update():
                    self._metadata.maybe_update()
                if self._idempotent and self._producer_id < 0 and time.monotonic() >= self._next_init_at:
                    self._init_producer_id()
                with self._lock:
                    ready, expired, wake_in = self._drain(time.monotonic())
                    if not ready and not expired:
                        if self._closing and not self._incomplete:
                            return
                        if self._force_closed:
                            return
                        self._sender_wake_at = time.monotonic() + wake_in
                        self._wake_sender.wait(wake_in)
                        self._sender_wake_at = _NOT_WAITING
                        continue
                for batch, error in expired:
                    self._finish(batch, -1, error)
                snapshot = self._metadata.snapshot
                for node_id, requests in ready.items():
                    self._send_to(node_id, requests, snapshot)
        except Exception:
            log.exception("the producer's sender thread failed")
            self._force_close("the sender thread failed")

    def _drain(
        self, now: float
    ) -> tuple[dict[int, list[list[ProducerBatch]]], list[tuple[ProducerBatch, ClientError]], float]:
        """Under the lock: take the batches that are ready and whose leader can take a request.

        Returns them by leader as the batches of each request to send (one request, one batch per
        partition; with ``acks=0``, which keeps nothing in flight, as many requests as the partitions have
        batches queued, up to :data:`_MAX_UNANSWERED_REQUESTS`, written together), the batches past
        ``delivery_timeout_ms`` (to fail), and how long the sender may sleep before something becomes ready.
        """
        snapshot = self._metadata.snapshot
        hurry = self._flushing > 0 or self._closing or self._space_waiters > 0
        wake_in = 1.0 if self._incomplete else 5.0
        ready: dict[int, list[list[ProducerBatch]]] = {}
        sizes: dict[int, int] = {}
        request_sizes: dict[int, list[int]] = {}  # acks=0: bytes of each request after the first
        expired: list[tuple[ProducerBatch, ClientError]] = []
        limit = self.config.max_request_size - _REQUEST_OVERHEAD_BYTES
        keys = set(self._queued) | set(self._open)
        for key in keys:
            queue = self._queued.get(key)
            # expire what waited too long
            while queue and now - queue[0].created_at >= self._delivery_timeout_s:
                batch = queue.popleft()
                expired.append((batch, self._timeout_error(batch, now)))
            open_batch = self._open.get(key)
            if open_batch is not None and now - open_batch.created_at >= self._delivery_timeout_s:
                del self._open[key]
                expired.append((open_batch, self._timeout_error(open_batch, now)))
                open_batch = None
            if queue:
                head = queue[0]
                if head.retry_at > now:
                    wake_in = min(wake_in, head.retry_at - now)
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
                    continue  # its batch in flight completes (or is retried) first; a response wakes us
                if head.producer_id < 0 and self._producer_id < 0:
                    wake_in = min(wake_in, max(self._next_init_at - now, 0.01))
                    continue  # it waits for a producer id
            leader = snapshot.leader(key[0], key[1])
            if leader is None:
                self._metadata.request_update()
                wake_in = min(wake_in, max(self._retry_backoff_s, 0.01))
                continue
            node = leader.node_id
            if self._acks != 0 and node not in ready and self._in_flight.get(node, 0) >= self._max_in_flight:
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
            head.drained = True
            if self._idempotent:
                self._partition_in_flight[key] = head
                if head.producer_id < 0:  # its first send: stamp it; retries keep the stamp
                    sequence = self._next_sequence.get(key, 0)
                    head.producer_id, head.producer_epoch, head.base_sequence = (
                        self._producer_id,
                        self._producer_epoch,
                        sequence,
                    )
                    self._next_sequence[key] = (sequence + head.count) & _MAX_SEQUENCE
            requests = ready.get(node)
            if requests is None:
                requests = ready[node] = [[]]
            requests[0].append(head)
            if self._acks == 0 and queue:
                # nothing stays in flight: the next batches of this partition go in the next requests
                sizes_of = request_sizes.setdefault(node, [])
                index = 1
                while queue and index < _MAX_UNANSWERED_REQUESTS and queue[0].retry_at <= now:
                    size = queue[0].size_bytes + HEADER_SIZE
                    if index == len(requests):
                        requests.append([])
                        sizes_of.append(0)
                    if sizes_of[index - 1] and sizes_of[index - 1] + size > limit:
                        break  # that request is full; the rest goes next time
                    batch = queue.popleft()
                    batch.drained = True
                    requests[index].append(batch)
                    sizes_of[index - 1] += size
                    index += 1
        if ready and self._acks != 0:
            for node in ready:
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
        return ready, expired, max(wake_in, 0.0)

    def _timeout_error(self, batch: ProducerBatch, now: float) -> ClientError:
        cause = batch.last_error
        return DeliveryTimeoutError(
            f"{batch.count} records for {batch.topic}-{batch.partition} not delivered within "
            f"delivery_timeout_ms={self.config.delivery_timeout_ms} ({now - batch.created_at:.1f} s, "
            f"{batch.attempts} attempts)" + (f"; last error: {cause}" if cause else ""),
            cause,
        )

    def _produce_request(self, batches: list[ProducerBatch]) -> ProduceRequest:
        if len(batches) == 1 and self._audit is None:  # every request at batch size 1: keep it short
            batch = batches[0]
            batch.attempts += 1
            partition = PartitionProduceData(batch.partition, batch.build())
            topic = TopicProduceData(batch.topic, (partition,))
            return ProduceRequest(None, self._acks, self._request_timeout_ms, (topic,))
        by_topic: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            batch.attempts += 1
            if self._audit is not None and batch.encoded is None:  # first request: still segments
                self._audit.counter.drained(batch)
            by_topic.setdefault(batch.topic, []).append(
                PartitionProduceData(index=batch.partition, records=batch.build())
            )
        return ProduceRequest(
            transactional_id=None,
            acks=self._acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[TopicProduceData(name=name, partition_data=data) for name, data in by_topic.items()],
        )

    def _send_to(self, node_id: int, requests: list[list[ProducerBatch]], snapshot: ClusterSnapshot) -> None:
        """Send ``requests`` (each a list of batches, one per partition) to broker ``node_id``: with
        ``acks=0`` all in one write, else the one request, completed by its response."""
        address = snapshot.brokers.get(node_id)
        batches = requests[0] if len(requests) == 1 else [b for request in requests for b in request]
        try:
            if address is None:
                raise BrokerConnectionError(f"broker {node_id}", "not in the cluster's metadata any more")
            connection = self._pool.get(address)
            if self._acks == 0:
                connection.send_unanswered([self._produce_request(request) for request in requests])
            else:
                connection.send(
                    self._produce_request(batches),
                    callback=lambda pending: self._on_response(node_id, batches, pending),
                )
        except ClientError as exc:
            if self._acks != 0:
                self._request_done(node_id)
            if isinstance(exc, BrokerConnectionError):
                self._metadata.request_update()
            for batch in batches:
                self._retry_or_fail(batch, exc)
            return
        if self._acks == 0:
            self._finish_all(batches, -1, None)

    def _request_done(self, node_id: int) -> None:
        with self._lock:
            self._in_flight[node_id] = self._in_flight.get(node_id, 1) - 1
            self._wake_sender.notify()

    def _on_response(self, node_id: int, batches: list[ProducerBatch], pending: PendingRequest) -> None:
        """Runs in the connection's reader thread."""
        self._request_done(node_id)
        if pending.error is not None:
            self._metadata.request_update()
            for batch in batches:
                self._retry_or_fail(batch, pending.error)
            return
        response: ProduceResponse = pending.response
        results = {
            (topic.name, part.index): part
            for topic in response.responses
            for part in topic.partition_responses
        }
        for batch in batches:
            result = results.get((batch.topic, batch.partition))
            if result is None:
                self._finish(
                    batch,
                    -1,
                    BrokerResponseError(
                        int(ErrorCode.UNKNOWN_SERVER_ERROR),
                        "produce",
                        topic=batch.topic,
                        partition=batch.partition,
                        detail="the response does not mention this partition",
                    ),
                )
            elif result.error_code == 0:
                self._finish(batch, result.base_offset, None)
            else:
                detail = result.error_message
                if result.error_code in _SEQUENCE_ERROR_CODES:
                    detail = (
                        f"{detail or ErrorCode(result.error_code).name}; the broker refused producer id "
                        f"{batch.producer_id} epoch {batch.producer_epoch} sequences from "
                        f"{batch.base_sequence}, so these records were not stored: the batch fails and the "
                        "producer goes on with a new producer id"
                    )
                error = BrokerResponseError(
                    result.error_code,
                    f"produce of a {len(batch.encoded or b'')}-byte batch of {batch.count} records",
                    topic=batch.topic,
                    partition=batch.partition,
                    detail=detail,
                )
                if error.needs_metadata:
                    self._metadata.request_update()
                self._retry_or_fail(batch, error)

    def _retry_or_fail(self, batch: ProducerBatch, error: ClientError) -> None:
        now = time.monotonic()
        batch.last_error = error
        retry = (
            error.retriable
            and not self._force_closed
            and batch.attempts <= self.config.retries
            and now + self._retry_backoff_s - batch.created_at < self._delivery_timeout_s
        )
        if not retry:
            if error.retriable and not self._force_closed:
                error = self._timeout_error(batch, now) if batch.attempts <= self.config.retries else error
            self._finish(batch, -1, error)
            return
        log.info("retrying %r after: %s", batch, error)
        with self._lock:
            key = (batch.topic, batch.partition)
            if self._partition_in_flight.get(key) is batch:
                del self._partition_in_flight[key]
            batch.drained = False
            batch.retry_at = now + self._retry_backoff_s
            key = (batch.topic, batch.partition)
            queue = self._queued.get(key)
            if queue is None:
                queue = self._queued[key] = deque()
            queue.appendleft(batch)
            self._wake_sender.notify()

    def _finish(self, batch: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
        self._finish_all((batch,), base_offset, error)

    def _finish_all(
        self, batches: Sequence[ProducerBatch], base_offset: int, error: BaseException | None
    ) -> None:
        """``batches`` are done (with ``base_offset`` or ``error``): free their buffer space under one
        lock, count them for the audit, and complete their futures and callbacks."""
        with self._lock:
            incomplete = self._incomplete
            freed = 0
            done = False
            if self._idempotent:
                self._idempotent_done(batches, error)
            for batch in batches:
                if batch in incomplete:
                    incomplete.discard(batch)
                    freed += batch.reserved_bytes
                    done = True
            if done:
                self._buffered_bytes -= freed
                if self._space_waiters:
                    self._space_freed.notify_all()
                if self._closing or self._flushing:
                    self._wake_sender.notify()
        audit = self._audit
        for batch in batches:
            if error is not None:
                log.debug("%r failed: %s", batch, error)
            if audit is not None:  # counted before anyone waiting on the batch wakes up
                audit.counter.done(batch, error)
            batch.complete(base_offset, error)

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
            self._wake_sender.notify()  # the partition's next batch may go now
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
            self._wake_sender.notify()

    def _init_producer_id(self) -> bool:
        """Get a producer id and epoch from any broker (InitProducerId, Kafka's non-transactional way).
        False when none answered: the sender asks again after ``retry_backoff_ms`` (new batches wait,
        bounded by ``delivery_timeout_ms``)."""
        snapshot = self._metadata.snapshot
        error: BaseException | None = None
        for address in list(snapshot.brokers.values()):
            try:
                response: InitProducerIdResponse = self._pool.get(address).request(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
                )
            except ClientError as exc:
                error = exc
                continue
            if response.error_code != 0:
                error = BrokerResponseError(response.error_code, "InitProducerId")
                continue
            with self._lock:
                self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
                self._next_sequence.clear()
            log.info("idempotent producer id %d, epoch %d", response.producer_id, response.producer_epoch)
            return True
        if not snapshot.brokers:
            self._metadata.request_update()
        log.info("no producer id yet (%s); retrying in %d ms", error, self.config.retry_backoff_ms)
        self._next_init_at = time.monotonic() + max(self._retry_backoff_s, 0.01)
        return False


_VALUE_TYPES = frozenset({bytes, type(None)})
_MAX_SEQUENCE = 2**31 - 1
#: Produce errors of the idempotent producer's sequence check: the batch was refused, not stored.
_SEQUENCE_ERROR_CODES = frozenset(
    int(code)
    for code in (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.PRODUCER_FENCED,
    )
)


def _raw_batch_header(topic: str, partition: int, data: bytes | memoryview) -> RecordBatch:
    """``data`` as one whole record batch v2 that a broker appends, or :class:`ProducerError`."""
    where = f"send_batch to {topic}-{partition}"
    try:
        header = RecordBatch(data, where=where)
    except CorruptRecordError as exc:
        raise ProducerError(f"{where}: not a record batch: {exc}") from exc
    base = header.base_offset
    if header.size_bytes != len(data):
        raise ProducerError(
            f"{where}: expected one record batch of {len(data)} bytes, got a batch of {header.size_bytes} "
            f"bytes (offset {base}) followed by {len(data) - header.size_bytes} more"
        )
    if header.magic != MAGIC:
        raise ProducerError(f"{where}: batch at offset {base}: expected magic {MAGIC}, got {header.magic}")
    count = header.record_count
    if count < 1 or header.last_offset_delta != count - 1:
        raise ProducerError(
            f"{where}: batch at offset {base}: expected lastOffsetDelta {count - 1} for {count} records "
            f"(at least one), got {header.last_offset_delta}"
        )
    if header.is_control_batch:
        raise ProducerError(f"{where}: batch at offset {base} is a control batch; clients cannot send those")
    return header


def _length(value: bytes | None) -> int:
    return 0 if value is None else len(value)


def _as_bytes(data: object, what: str) -> bytes:
    """``data`` as bytes if it is a bytes-like object; a clear error otherwise (e.g. for a ``str``)."""
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"a record's {what} must be bytes (or None), got {type(data).__name__}")
