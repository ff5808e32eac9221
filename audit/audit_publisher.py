"""Publishing audit events and waiting until the brokers confirmed every one (``acks = all``).

The producer and mirror tiers publish from an outbox, every interval (:mod:`audit.audit_emitter`); a tier
whose counts are already durable somewhere (the load's manifests: :mod:`pipeline.load_audit_publisher`)
publishes them in steps instead, each confirmed before the next, and keeps its own pointer of what is
published. :class:`AuditPublisher` is that step: :meth:`AuditPublisher.publish` makes sure the audit topic
exists (creating it with ``audit_topic_partitions`` partitions if it does not, as the emitter does:
:func:`~broker.client.producer.internal_topic.ensure_topic`; a refusal raises
:class:`~broker.client.errors.TopicCreationError` at once), encodes the events with
:class:`~audit.audit_codec.AuditEventCodec`, sends them (key: the counted topic), and returns once every
one is confirmed, or raises the first delivery error. Publishing the same events again is harmless: their
ids repeat and readers count each id once.

Not thread-safe: one publisher per job run (the load holds its job's lock while it publishes).
"""

from __future__ import annotations

from collections.abc import Sequence

from audit.audit_codec import AuditEventCodec
from audit.audit_event import AuditEvent
from broker.client.producer.internal_topic import ensure_producer_topic
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from schemas.client import RegistryClientSettings


class AuditPublisher:
    """Sends audit events and waits for their confirmation; see the module docstring."""

    def __init__(
        self,
        settings: ProducerConfig,
        *,
        registry: RegistryClientSettings,
        registry_url: str | None = None,
        zookeeper_connect: str | None = None,
    ) -> None:
        """``settings`` are the producer's (its ``audit_topic`` and ``audit_topic_partitions`` name the
        topic); it is used with ``acks = all`` and without an audit of its own. ``registry``: the
        ``[registry]`` client settings (``registry_url`` instead of its URL)."""
        self.settings = settings.replace(acks="all", audit_interval_ms=0)
        self.topic = settings.audit_topic
        self._codec = AuditEventCodec.from_config(registry, self.topic, url=registry_url)
        self._producer = Producer(self.settings, zookeeper_connect=zookeeper_connect)
        self._topic_ready = False

    def publish(self, events: Sequence[AuditEvent]) -> int:
        """Send ``events`` and wait until each is confirmed; returns how many. Raises the first delivery
        error, :class:`~broker.client.errors.TopicCreationError` or a
        :class:`~schemas.errors.SchemaError` of the registry."""
        if not self._topic_ready:
            ensure_producer_topic(self._producer, self.topic, self.settings.audit_topic_partitions)
            self._topic_ready = True
        codec = self._codec
        futures = [self._producer.send(self.topic, codec.encode(e), key=codec.key(e)) for e in events]
        self._producer.flush()
        for future in futures:
            future.result()  # raises the delivery error
        return len(futures)

    def close(self) -> None:
        try:
            self._producer.close()
        finally:
            self._codec.close()

    def __enter__(self) -> AuditPublisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
