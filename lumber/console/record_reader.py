"""Reading a page of a partition's records, and decoding their values through the schema registry.

:func:`read_records` starts at an offset (checked against the log: an offset outside ``[log start, log
end]`` is a :class:`~lumber.console.errors.BadRequestError`), at the first record at or after a time
(ListOffsets), or by default at the last ``limit`` records; it reads by explicit assignment (no group, no
committed offsets) until it has ``limit`` records or reached the log end it saw first, bounded by the
console's request timeout.

Each value is decoded with :class:`~schemas.serde.AvroSerde` (the Confluent wire format: magic byte,
schema id, Avro binary); a value that is not Avro (no value, another magic byte, an unknown id, bytes that
do not decode) is shown raw with the serde's message instead. The schema id is linked to the subject
version holding it under the topic's value subject (``<topic>-value``, Confluent's TopicNameStrategy).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.record.topic_partition import TopicPartition
from lumber.console.cluster_reader import TopicView, read_topic
from lumber.console.errors import BadRequestError, NotFoundError, SourceUnavailableError
from lumber.console.params import utc_iso
from lumber.console.sources import Sources
from schemas.errors import RegistryError, SchemaError, SerdeError
from schemas.serde import AvroSerde

MAX_LIMIT = 1000
_POLL_MS = 100


@dataclass(frozen=True)
class SchemaRef:
    """Where a schema id is registered under the topic's value subject (``None`` fields: not there)."""

    schema_id: int
    subject: str | None = None
    version: int | None = None


@dataclass(frozen=True)
class DecodedRecord:
    record: ConsumerRecord
    value: Any = None
    schema: SchemaRef | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "timestamp": utc_iso(r.timestamp_ms),
            "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": show_bytes(r.key),
            "headers": [{"key": k, "value": show_bytes(v)} for k, v in r.headers],
            "value_bytes": None if r.value is None else len(r.value),
            "schema_id": None if self.schema is None else self.schema.schema_id,
            "subject": None if self.schema is None else self.schema.subject,
            "version": None if self.schema is None else self.schema.version,
            "value": self.value,
            "value_raw": None if self.error is None else show_bytes(r.value),
            "decode_error": self.error,
        }


@dataclass(frozen=True)
class RecordPage:
    topic: str
    partition: int
    from_offset: int
    log_start_offset: int
    log_end_offset: int
    records: tuple[DecodedRecord, ...]

    @property
    def next_offset(self) -> int:
        return self.records[-1].record.offset + 1 if self.records else self.from_offset

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from_offset": self.from_offset,
            "next_offset": self.next_offset,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "records": [r.to_json() for r in self.records],
        }


def show_bytes(data: bytes | None) -> str | None:
    """UTF-8 text when the bytes are printable text, else ``0x`` and hex."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


def jsonable(value: Any) -> Any:
    """A decoded Avro value as JSON: bytes as base64, decimals and UUIDs as text, times in ISO 8601."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return value


def partition_of(view: TopicView, partition: int) -> tuple[int, int]:
    """The (log start, log end) of ``partition`` of ``view``: 404 if no such partition, 503 if offline."""
    if not 0 <= partition < len(view.partitions):
        raise NotFoundError(
            f"topic {view.name!r} has {len(view.partitions)} partitions (0..{len(view.partitions) - 1}): "
            f"there is no partition {partition}"
        )
    found = view.partitions[partition]
    if found.log_start_offset is None or found.log_end_offset is None:
        raise SourceUnavailableError(
            f"{view.name}-{partition}: its leader (broker {found.replicas[0]}) is not live"
        )
    return found.log_start_offset, found.log_end_offset


def read_records(
    sources: Sources,
    topic: str,
    partition: int,
    *,
    offset: int | None = None,
    time_ms: int | None = None,
    limit: int,
    view: TopicView | None = None,
) -> RecordPage:
    """Up to ``limit`` records of ``topic-partition`` (see the module docstring for where they start);
    ``view``: the topic as the caller just read it (else it is read here)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequestError(f"parameter limit={limit}: expected 1 to {MAX_LIMIT}")
    log_start, log_end = partition_of(view or read_topic(sources, topic), partition)
    tp = TopicPartition(topic, partition)
    consumer = sources.consumer
    if offset is not None:
        if not log_start <= offset <= log_end:
            raise BadRequestError(
                f"offset {offset} is out of range for {tp}: its log holds offsets [{log_start}, {log_end})"
            )
        start = offset
    elif time_ms is not None:
        found = consumer.offsets_for_times({tp: time_ms})[tp]
        start = log_end if found is None else found
    else:
        start = max(log_start, log_end - limit)
    until = min(log_end, start + limit)
    records = _fetch(sources, tp, start, until)
    decoder = _Decoder(sources, topic)
    return RecordPage(topic, partition, start, log_start, log_end, tuple(decoder.decode(r) for r in records))


def read_record(sources: Sources, topic: str, partition: int, offset: int) -> DecodedRecord:
    """The record at ``offset`` (400 when the offset is outside the log or holds no record)."""
    page = read_records(sources, topic, partition, offset=offset, limit=1)
    if not page.records or page.records[0].record.offset != offset:
        raise BadRequestError(
            f"no record at offset {offset} of {topic}-{partition} (its log holds "
            f"[{page.log_start_offset}, {page.log_end_offset}))"
        )
    return page.records[0]


def _fetch(sources: Sources, tp: TopicPartition, start: int, until: int) -> list[ConsumerRecord]:
    if start >= until:
        return []
    consumer = sources.consumer
    consumer.assign([tp])
    consumer.seek(tp, start)
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + sources.timeout_ms / 1000
    while time.monotonic() < deadline:
        out.extend(r for r in consumer.poll(timeout_ms=_POLL_MS) if start <= r.offset < until)
        if out and out[-1].offset >= until - 1:
            return out
    if not out:
        raise SourceUnavailableError(
            f"{tp}: no record of [{start}, {until}) arrived within {sources.timeout_ms} ms"
        )
    return out


class _Decoder:
    """Decodes the values of one page, looking each schema id's subject version up once."""

    def __init__(self, sources: Sources, topic: str) -> None:
        self.sources = sources
        self.subject = f"{topic}-value"
        self.serde = AvroSerde(sources.registry)
        self.refs: dict[int, SchemaRef] = {}

    def decode(self, record: ConsumerRecord) -> DecodedRecord:
        where = f"{record.topic}-{record.partition}@{record.offset}"
        if record.value is None:
            return DecodedRecord(record, error="not Avro: no value (null)")
        try:
            schema_id = self.serde.schema_id_of(record.value, where)
        except SerdeError as exc:
            return DecodedRecord(record, error=f"not Avro: {exc}")
        ref = self._ref(schema_id)
        try:
            value = self.serde.decode(record.value)
        except SerdeError as exc:
            return DecodedRecord(record, schema=ref, error=f"not Avro of schema id {schema_id}: {exc}")
        except RegistryError as exc:
            return DecodedRecord(record, schema=ref, error=f"not decodable: schema id {schema_id}: {exc}")
        return DecodedRecord(record, jsonable(value), ref)

    def _ref(self, schema_id: int) -> SchemaRef:
        ref = self.refs.get(schema_id)
        if ref is None:
            registry = self.sources.registry
            try:
                found = registry.lookup(self.subject, registry.get_schema(schema_id))
                ref = SchemaRef(schema_id, found.subject, found.version)
            except SchemaError:  # unknown id, or not under this subject: the id alone is linked
                ref = SchemaRef(schema_id)
            self.refs[schema_id] = ref
        return ref
