"""Lumber's producer: batches records per partition and sends them to the leaders (paper section 3.2).

Usage::

    producer = Producer(ProducerConfig(bootstrap_servers=["127.0.0.1:9092"], acks="all"))
    future = producer.send("events", b"value", key=b"user-7")     # returns at once
    producer.send_many("events", values, partition=3)              # many records, one call, one result
    producer.send_batch("events", 3, batch_bytes)                   # a whole record batch v2, as it is
    producer.flush()                                               # everything sent so far is done
    future.result()                 # RecordMetadata(topic, partition, offset, timestamp_ms), or raises
    producer.close()                # sends what was accepted, then stops; loses nothing

The producer is three parts, as Kafka's is: this module is the API (arguments checked, the partition
of a key, the ``host`` header, sizes bounded),
:class:`~broker.client.producer.record_accumulator.RecordAccumulator` holds the batches (appending, readiness,
buffer memory, idempotence's sequences: its docstring has the concurrency rules) and
:class:`~broker.client.producer.sender.Sender` is the thread that sends them and completes them (requests,
responses, retries). A batch (:class:`~broker.client.producer.producer_batch.ProducerBatch`) owns its state:
the others change it only through its methods.

How it works:

* **Accumulating.** ``send()`` picks the partition (:mod:`broker.client.producer.partitioner`: murmur2 of the
  key, else the sticky partition) and encodes the record straight into the open
  :class:`~broker.client.producer.producer_batch.ProducerBatch` of that partition, under one lock. A record
  that would grow a batch past ``batch_size`` bytes (61-byte header included, uncompressed) closes it and
  opens the next. Each record's timestamp is its creation time (``CreateTime``) unless given, and each carries
  a ``host`` header with the producing host's name (first, unless the caller sets ``host`` itself).
* **Sending.** One sender thread sends a batch once it is full, or ``linger_ms`` after its first record, or
  at once during ``flush()``/``close()`` or while a caller waits for buffer space. It groups ready batches
  by leader into Produce requests (one batch per partition, at most ``max_request_size`` bytes) and keeps
  up to ``max_in_flight_requests_per_connection`` requests in flight per broker (pipelined on one
  connection). Responses complete the batches in the connection's reader thread.
* **Raw batches.** ``send_batch()`` takes one whole record batch v2 encoded elsewhere (e.g. a
  :class:`~broker.client.consumer.fetched_batch.FetchedBatch`'s bytes, fetched from another cluster) and sends
  it unchanged to the given partition: no record is decoded or re-encoded, so keys, values, timestamps,
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
  leader appended; ``"all"``: every in-sync replica has the batch (and it is fsynced with ``[log]
  flush_on_ack``).
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
* **Delivery listener.** ``delivery_listener=`` (a
  :class:`~broker.client.producer.delivery_listener.DeliveryListener`) is told of every batch once it is done,
  before its futures, and closed last by ``close()``. Lumber's audit (paper section 4) is one: a producer
  whose ``audit_interval_ms`` is above 0 is built with its emitter by
  :func:`audit.audited_producer.audited_producer`; the client package never imports the audit.

Thread safety: every public method may be called from any thread. Delivery callbacks run in a connection's
reader thread (or the sender thread): keep them short, and do not call ``flush()`` or ``close()`` in them.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence
from time import time_ns as _time_ns
from typing import Any

from broker.client.errors import (
    ProducerClosedError,
    ProducerError,
    RecordTooLargeError,
    UnknownPartitionError,
)
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata, metadata_source
from broker.client.producer.delivery_listener import DeliveryListener
from broker.client.producer.partitioner import partition_for_key
from broker.client.producer.producer_batch import BulkDelivery, DeliveryCallback, RecordFuture
from broker.client.producer.producer_config import ProducerConfig
from broker.client.producer.record_accumulator import REQUEST_OVERHEAD_BYTES, RecordAccumulator
from broker.client.producer.sender import Sender
from broker.clock import Clock, system_clock_ms
from broker.record.batch_header import MAGIC
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.record_encoder import record_bound
from broker.record.record_header import Header, encode_headers

log = logging.getLogger(__name__)

_HOST_HEADER = "host"


class Producer:
    """Sends records to a Lumber (or Kafka) cluster; see the module docstring."""

    def __init__(
        self,
        config: ProducerConfig | None = None,
        *,
        bootstrap_servers: Sequence[str] | None = None,
        zookeeper_connect: str | None = None,
        clock_ms: Clock = system_clock_ms,
        delivery_listener: DeliveryListener | None = None,
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
            security=config.client_security("producer"),
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
        self.host_name = config.host_name or socket.gethostname()
        self._host = self.host_name.encode("utf-8")
        self._host_headers = encode_headers([(_HOST_HEADER, self._host)])
        self._max_record_bytes = min(config.max_request_size - REQUEST_OVERHEAD_BYTES, config.buffer_memory)
        self._buffer_memory = config.buffer_memory
        self._plain_record_bound = record_bound(0, 0, len(self._host_headers))
        if config.audit_interval_ms > 0 and delivery_listener is None:
            log.warning(
                "producer %s: audit_interval_ms is %d but nothing publishes its counts: a producer is "
                "audited by its delivery listener (audit.audited_producer.audited_producer builds both)",
                config.client_id,
                config.audit_interval_ms,
            )
        self._listener = delivery_listener
        self._accumulator = RecordAccumulator(
            config, self._metadata, keep_records=delivery_listener is not None
        )
        self._append = self._accumulator.append
        self._sender = Sender(config, self._accumulator, self._metadata, self._pool, delivery_listener)
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
        return self._append(
            topic, partition, count, timestamp_ms, key, value, header_bytes, size, on_delivery
        )

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
        return self._accumulator.append_many(
            topic, partition, count, timestamp_ms, key, values, header_bytes, fixed
        )

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
        return self._accumulator.append_raw(
            topic, partition, batch, header.record_count, header.first_timestamp_ms, on_delivery
        )

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
        if self._accumulator.closing:
            raise ProducerClosedError(f"cannot send to topic {topic!r}: the producer is closed")
        return self._metadata.wait_for_topic(topic, self.config.max_block_ms)

    # ---------------------------------------------------------------------------------- flush and close

    def flush(self, timeout_s: float | None = None) -> None:
        """Send every record accepted so far now and wait until each is done (delivered or failed).

        Raises :class:`TimeoutError` if ``timeout_s`` passes first; delivery errors stay in the futures.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = self._accumulator.begin_flush()
        try:
            for batch in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.wait(remaining):
                    undone = sum(b.count for b in pending if not b.done)
                    raise TimeoutError(f"flush: {undone} records still undelivered after {timeout_s} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout_s: float | None = None) -> None:
        """Stop accepting records, deliver every record accepted (or fail it with its error), then stop.

        Without ``timeout_s`` this waits as long as delivery takes (bounded by ``delivery_timeout_ms``).
        With it, records still undelivered when it passes fail with :class:`ProducerClosedError` (in their
        futures and callbacks): they are reported, never silently dropped. Idempotent. The delivery
        listener is closed last, once every batch was reported to it, with what is left of ``timeout_s``.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._accumulator.close()
        if not self._sender.join(timeout_s):
            self._sender.abort(f"close() timed out after {timeout_s} s")
            self._sender.join(10)
        self._pool.close()
        self._metadata.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def buffered_bytes(self) -> int:
        """Bytes held by records not yet acknowledged."""
        return self._accumulator.buffered_bytes

    def partitions_for(self, topic: str) -> int:
        """The number of partitions of ``topic`` (waiting up to ``max_block_ms`` for its metadata)."""
        return len(self._metadata.wait_for_topic(topic, self.config.max_block_ms))


_VALUE_TYPES = frozenset({bytes, type(None)})


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
