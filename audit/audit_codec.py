"""Audit events on the wire: Confluent-framed Avro of the shipped ``audit_event`` schema.

Every record of the audit topic is ``0x00 | schema id | Avro binary`` like any other Avro topic's
(:mod:`schemas.serde`). The writer schema is the shipped ``schemas/avro/audit_event.avsc``, looked up under
the subject ``<audit topic>-value`` the first time a codec encodes and registered there if it is not yet
(registering is idempotent, so every producer and load job may do it; a lookup is a read, so with the
registry's authentication on a ``readonly`` user encodes once an ``admin`` registered the schema). Decoding
resolves whatever version wrote an event to the shipped schema: events of older versions get the defaults
of the fields added since.

The key of an audit record is the counted topic (UTF-8), so that all events about one topic land in one
partition of the audit topic, in order.

Thread-safe (the serde is); the schema id is looked up once per codec.
"""

from __future__ import annotations

import threading

from audit.audit_event import AUDIT_TOPIC, AuditEvent
from schemas.client import RegistryClientSettings, SchemaRegistryClient
from schemas.errors import DecodeError, SchemaNotFoundError, SubjectNotFoundError
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema


class AuditEventCodec:
    """Encodes and decodes :class:`AuditEvent` records of one audit topic through one registry."""

    def __init__(self, client: SchemaRegistryClient, audit_topic: str = AUDIT_TOPIC) -> None:
        self.client = client
        self.subject = f"{audit_topic}-value"
        self.schema = shipped_schema("audit_event")
        self._serde = AvroSerde(client, self.schema)
        self._schema_id: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls,
        registry: RegistryClientSettings,
        audit_topic: str = AUDIT_TOPIC,
        *,
        url: str | None = None,
        timeout_s: float | None = None,
    ) -> AuditEventCodec:
        """A codec of ``[registry]``'s client (:meth:`SchemaRegistryClient.from_config`: its URL or ``url``,
        its credentials and CA file; its timeout or ``timeout_s``)."""
        return cls(SchemaRegistryClient.from_config(registry, url, timeout_s=timeout_s), audit_topic)

    def close(self) -> None:
        self.client.close()

    @property
    def schema_id(self) -> int:
        """The registry's id of the shipped schema: looked up under :attr:`subject` on first use, registered
        there if it is not yet (so a ``readonly`` registry user encodes once an ``admin`` has registered it).

        Raises :class:`~schemas.errors.SchemaError` when the registry cannot be reached or refuses it."""
        with self._lock:
            if self._schema_id is None:
                try:
                    self._schema_id = self.client.lookup(self.subject, self.schema).schema_id
                except (SubjectNotFoundError, SchemaNotFoundError):
                    self._schema_id = self.client.register(self.subject, self.schema)
            return self._schema_id

    @staticmethod
    def key(event: AuditEvent) -> bytes:
        return event.topic.encode("utf-8")

    def encode(self, event: AuditEvent) -> bytes:
        return self._serde.encode(self.schema_id, event.to_record())

    def decode(self, payload: bytes) -> AuditEvent:
        """The event in ``payload``; raises :class:`~schemas.errors.SerdeError` for a payload that is not
        one (bad framing, unknown schema id, bytes that do not decode, values out of range)."""
        record = self._serde.decode(payload)
        try:
            return AuditEvent.from_record(record)
        except (ValueError, KeyError, TypeError) as exc:
            raise DecodeError(f"not a valid audit event: {exc}") from exc
