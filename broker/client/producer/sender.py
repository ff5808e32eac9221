"""The producer's sender: one thread that turns ready batches into Produce requests and outcomes.

Kafka's ``Sender``. It loops, in the thread ``lumber-producer-sender``:

1. refreshes the cluster's metadata when it is due, and asks a broker for a producer id (InitProducerId,
   Kafka's non-transactional way) while an idempotent producer has none;
2. takes the ready batches from the :class:`~broker.client.producer.record_accumulator.RecordAccumulator`
   (sleeping there until one may be ready), and fails those past ``delivery_timeout_ms``;
3. sends each broker its request (one batch per partition, pipelined on one connection, up to
   ``max_in_flight_requests_per_connection`` in flight); with ``acks=0`` all its requests in one write
   (``send_unanswered_frames``: no response, the batches are done once written, offsets -1), each request
   framed from its partition's template (:class:`~broker.client.producer.produce_frames.ProduceFrames`).

Responses arrive in the connection's reader thread (:meth:`Sender._on_response`), which completes the
batches: a retriable error (leader moved, connection lost, request timed out...) puts the batch back at
the head of its partition after ``retry_backoff_ms`` (after learning the cluster again when the error says
the leader moved), up to ``retries`` times and within ``delivery_timeout_ms`` of the batch's creation;
anything else fails it. A sequence error of the idempotent producer (OUT_OF_ORDER_SEQUENCE_NUMBER and the
like) means the broker refused the batch: it fails, and the accumulator drops the producer id.

Completing a batch (:meth:`Sender.complete`) frees its memory and partition in the accumulator, tells the
producer's :class:`~broker.client.producer.delivery_listener.DeliveryListener` (if any), then completes its
futures and callbacks: whoever waits on a record wakes up after the listener saw it.

Thread safety: the loop runs in the sender thread only; responses, retries and completions run in reader
threads too, and touch shared state only through the accumulator (its lock) and the batch (done once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from functools import partial

from broker.client.errors import BrokerConnectionError, BrokerResponseError, ClientError, ProducerClosedError
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata
from broker.client.metadata.cluster_snapshot import ClusterSnapshot
from broker.client.network.pending_request import PendingRequest
from broker.client.producer.delivery_listener import DeliveryListener
from broker.client.producer.produce_frames import ProduceFrames
from broker.client.producer.producer_batch import ProducerBatch
from broker.client.producer.producer_config import ProducerConfig
from broker.client.producer.record_accumulator import RecordAccumulator
from broker.protocol.api_key import ApiKey
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from broker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)

log = logging.getLogger(__name__)

_PRODUCE_KEY = int(ApiKey.PRODUCE)

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


class Sender:
    """The sender thread of one producer; see the module docstring."""

    def __init__(
        self,
        config: ProducerConfig,
        accumulator: RecordAccumulator,
        metadata: ClusterMetadata,
        pool: BrokerPool,
        listener: DeliveryListener | None,
    ) -> None:
        self._config = config
        self._accumulator = accumulator
        self._metadata = metadata
        self._pool = pool
        self._listener = listener
        self._acks = config.acks_value
        self._request_timeout_ms = config.request_timeout_ms
        self._frames = ProduceFrames(self._acks, config.request_timeout_ms)
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._thread = threading.Thread(target=self._run, name="lumber-producer-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float | None) -> bool:
        """Wait for the thread to end (it does once the accumulator is closed and empty); True if it did."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def abort(self, reason: str) -> None:
        """Close at once: fail every batch not sent yet, and those in flight (their connections close)."""
        for batch in self._accumulator.abort_undrained():
            self.complete((batch,), -1, ProducerClosedError(f"{batch!r} not delivered: {reason}"))
        self._pool.close()  # in-flight requests fail, and so do their batches

    # ---------------------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        accumulator = self._accumulator
        try:
            while True:
                if self._metadata.needs_update():
                    self._metadata.maybe_update()
                if accumulator.needs_producer_id(time.monotonic()):
                    self._init_producer_id()
                drained = accumulator.drain_or_wait()
                if drained is None:
                    return
                ready, expired = drained
                for batch, error in expired:
                    self.complete((batch,), -1, error)
                snapshot = self._metadata.snapshot
                for node_id, requests in ready.items():
                    self._send_to(node_id, requests, snapshot)
        except Exception:
            log.exception("the producer's sender thread failed")
            self.abort("the sender thread failed")

    def _produce_request(self, batches: list[ProducerBatch]) -> ProduceRequest:
        if len(batches) == 1:  # every request at batch size 1: keep it short
            batch = batches[0]
            partition = PartitionProduceData(batch.partition, batch.start_attempt())
            topic = TopicProduceData(batch.topic, (partition,))
            return ProduceRequest(None, self._acks, self._request_timeout_ms, (topic,))
        by_topic: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            by_topic.setdefault(batch.topic, []).append(
                PartitionProduceData(index=batch.partition, records=batch.start_attempt())
            )
        return ProduceRequest(
            transactional_id=None,
            acks=self._acks,
            timeout_ms=self._request_timeout_ms,
            topic_data=[TopicProduceData(name=name, partition_data=data) for name, data in by_topic.items()],
        )

    def _send_to(self, node_id: int, requests: list[list[ProducerBatch]], snapshot: ClusterSnapshot) -> None:
        """Send ``requests`` (each a list of batches, one per partition) to broker ``node_id``: with
        ``acks=0`` all in one write, as one-partition requests grouped by partition, else the one request,
        completed by its response."""
        address = snapshot.brokers.get(node_id)
        batches = requests[0] if len(requests) == 1 else [b for request in requests for b in request]
        try:
            if address is None:
                raise BrokerConnectionError(f"broker {node_id}", "not in the cluster's metadata any more")
            connection = self._pool.get(address)
            if self._acks == 0:
                # one request per batch, each partition's batches next to each other in their order: the
                # broker appends a run of acks=0 requests to one partition at once (KafkaApis.handle_run),
                # which a request of several partitions would end (issue 39: half the throughput at 2)
                ordered = batches if len(batches) == 1 else sorted(batches, key=_partition_of)
                connection.send_unanswered_frames(_PRODUCE_KEY, partial(self._frames.frames, batches=ordered))
            else:
                connection.send(
                    self._produce_request(batches),
                    callback=lambda pending: self._on_response(node_id, batches, pending),
                )
        except ClientError as exc:
            if self._acks != 0:
                self._accumulator.request_done(node_id)
            if isinstance(exc, BrokerConnectionError):
                self._metadata.request_update()
            for batch in batches:
                self._retry_or_fail(batch, exc)
            return
        if self._acks == 0:
            self.complete(batches, -1, None)

    # ---------------------------------------------------------------------------------------- outcomes

    def _on_response(self, node_id: int, batches: list[ProducerBatch], pending: PendingRequest) -> None:
        """Runs in the connection's reader thread."""
        self._accumulator.request_done(node_id)
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
                self.complete(
                    (batch,),
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
                self.complete((batch,), result.base_offset, None)
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
        batch.note_error(error)
        force_closed = self._accumulator.force_closed
        retry = (
            error.retriable
            and not force_closed
            and batch.attempts <= self._config.retries
            and now + self._retry_backoff_s - batch.created_at < self._delivery_timeout_s
        )
        if not retry:
            if error.retriable and not force_closed and batch.attempts <= self._config.retries:
                error = batch.expiry_error(now, self._config.delivery_timeout_ms)
            self.complete((batch,), -1, error)
            return
        log.info("retrying %r after: %s", batch, error)
        self._accumulator.reenqueue(batch, now + self._retry_backoff_s)

    def complete(
        self, batches: Sequence[ProducerBatch], base_offset: int, error: BaseException | None
    ) -> None:
        """``batches`` are done (with ``base_offset`` or ``error``): free them in the accumulator, tell
        the listener, then complete their futures and callbacks."""
        self._accumulator.deallocate(batches, error)
        listener = self._listener
        for batch in batches:
            if error is not None:
                log.debug("%r failed: %s", batch, error)
            if listener is not None:  # told before anyone waiting on the batch wakes up
                try:
                    listener.on_completion(batch, base_offset, error)
                except Exception:
                    log.exception("the delivery listener failed on %r", batch)
            batch.complete(base_offset, error)

    # ------------------------------------------------------------------------------------ idempotence

    def _init_producer_id(self) -> bool:
        """Get a producer id and epoch from any broker. False when none answered: the sender asks again
        after ``retry_backoff_ms`` (new batches wait, bounded by ``delivery_timeout_ms``)."""
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
            self._accumulator.set_producer_id(response.producer_id, response.producer_epoch)
            log.info("idempotent producer id %d, epoch %d", response.producer_id, response.producer_epoch)
            return True
        if not snapshot.brokers:
            self._metadata.request_update()
        log.info("no producer id yet (%s); retrying in %d ms", error, self._config.retry_backoff_ms)
        self._accumulator.producer_id_failed(time.monotonic() + max(self._retry_backoff_s, 0.01))
        return False


def _partition_of(batch: ProducerBatch) -> tuple[str, int]:
    return batch.topic, batch.partition
