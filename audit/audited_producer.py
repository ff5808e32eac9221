"""A producer whose ``audit_interval_ms`` is honoured: the producer and its audit emitter, built together.

The Kafka client (:mod:`broker.client`) knows nothing of the audit: a
:class:`~broker.client.producer.producer.Producer` takes a
:class:`~broker.client.producer.delivery_listener.DeliveryListener`. :func:`audited_producer` is how the apps
(the ``lumber produce`` command, the demo, the benchmarks) make the producer the paper's section 4 describes:
with ``[producer] audit_interval_ms`` above 0, the producer gets an
:class:`~audit.audit_emitter.AuditEmitter` as its listener, which counts what the brokers confirmed and
publishes the counts through a producer of its own every interval and when the producer closes; at 0 it
is a plain producer.
"""

from __future__ import annotations

from collections.abc import Sequence

from audit.audit_emitter import AuditEmitter
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.clock import Clock, system_clock_ms
from schemas.client import RegistryClientSettings


def audited_producer(
    config: ProducerConfig | None = None,
    *,
    bootstrap_servers: Sequence[str] | None = None,
    zookeeper_connect: str | None = None,
    clock_ms: Clock = system_clock_ms,
    registry: RegistryClientSettings,
) -> Producer:
    """A :class:`Producer` (same arguments) audited when ``config.audit_interval_ms`` is above 0, its audit
    events encoded through a client of ``registry`` (``[registry]``: its credentials and CA file)."""
    config = config if config is not None else ProducerConfig()
    emitter = None
    if config.audit_interval_ms > 0:
        emitter = AuditEmitter.for_producer(
            config,
            bootstrap_servers=bootstrap_servers,
            zookeeper_connect=zookeeper_connect,
            clock_ms=clock_ms,
            registry=registry,
        )
    try:
        return Producer(
            config,
            bootstrap_servers=bootstrap_servers,
            zookeeper_connect=zookeeper_connect,
            clock_ms=clock_ms,
            delivery_listener=emitter,
        )
    except BaseException:
        if emitter is not None:
            emitter.close(0)
        raise
