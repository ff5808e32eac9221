"""What a producer tells someone else about its batches: the interface of a delivery listener.

A :class:`~broker.client.producer.producer.Producer` built with ``delivery_listener=`` calls it once per batch
when the batch is done (acknowledged by the brokers, or failed for good), with the batch itself, *before*
the batch's futures and callbacks learn the outcome: whoever waits on a record (``flush()`` included)
wakes up after the listener saw it. It is Kafka's ``ProducerInterceptor.onAcknowledgement`` per batch
instead of per record, so that a listener costs the producer nothing per record (the batch keeps its
records until it is done: :meth:`~broker.client.producer.producer_batch.ProducerBatch.record_runs`). A raw
batch (``send_batch``) is reported too, with ``is_raw`` set and no records to read.

The listener is closed by :meth:`Producer.close` *after* the producer's sender stopped, that is once every
batch accepted before the close has been reported (or the close timed out): the place to publish a last
summary. Lumber's audit (:class:`audit.audit_emitter.AuditEmitter`) is one; the client package knows it
only through this interface.

Thread safety: :meth:`DeliveryListener.on_completion` runs in whichever thread completes the batch (a
connection's reader thread, the sender thread, or the closing thread) and may run concurrently for batches
of different partitions: a listener guards its own state. It must be quick and must not call the producer's
``flush()`` or ``close()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.client.producer.producer_batch import ProducerBatch


class DeliveryListener(Protocol):
    """Told of every batch a producer finished; see the module docstring."""

    def on_completion(self, batch: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
        """``batch`` is done: acknowledged when ``error`` is None (``base_offset`` is its first record's
        offset, -1 with ``acks`` 0), else failed with ``error``. Read it, never change it."""

    def close(self, timeout_s: float | None) -> None:
        """The producer closed (every batch it accepted was reported); ``timeout_s`` is what is left of
        the close's own time limit (None: none)."""
