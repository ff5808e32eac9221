"""The reading side of the load job: one Spark task reads exactly one offset range into Arrow batches.

Planning (the driver, :mod:`pipeline.load_job`) hands every task a :class:`ReadTask`, a small JSON-able
description: the range ``[from_offset, until_offset)``, the topic's reader schema (pinned when the run was
planned: the latest schema of the value subject ``<topic>-value``) and the event-time field. The job-wide
:class:`SourceSettings` (``[registry]``, how to find the brokers, consumer settings) travel in the task's
closure; their secrets (the consumer's SASL password, the registry's Basic password) were read on the driver
and travel inside them, pickled, never in Spark's conf nor on a command line. Inside the task
(:mod:`pipeline.task_output` drives it and writes the batches):

1. :func:`fetch_range` opens its own connections: a :class:`~broker.client.consumer.consumer.Consumer`
   of that one partition (it finds the leader through ZooKeeper or bootstrap servers, and checks every batch's
   CRC-32C on receipt), seeks to ``from_offset`` and polls until ``until_offset``, dropping what lies beyond;
   each batch's records become columns (:mod:`pipeline.record_columns`: offset, timestamp, key, value,
   ``host`` header);
2. checks that the offsets are exactly ``from_offset, from_offset + 1, ..., until_offset - 1`` (Lumber's
   offsets are consecutive): a gap, a repeat, or no progress within ``request_timeout_ms`` fails the task;
3. :func:`convert_chunks` decodes the Confluent-framed Avro values with an
   :class:`~schemas.serde.AvroSerde` (writer schemas fetched from the registry once per schema id, per
   Python worker) resolved to the reader schema, so v1 and v2 records land in one table; a chunk decodes
   in one ``decode_many`` call, and only a chunk with a bad record is decoded record by record to find it;
4. quarantines what cannot be decoded, with its raw key and value, topic, partition, offset and reason:
   ``null_value`` (no value), ``bad_framing`` (magic byte not 0, or shorter than the 5-byte header),
   ``unknown_schema_id``, ``schema_mismatch`` (the writer schema does not resolve to the reader schema),
   ``corrupt_bytes`` (the Avro bytes do not decode, or bytes are left over). A registry that cannot be
   reached is not a property of the record: the task fails and Spark retries it;
5. yields, per chunk, one :class:`Converted`: the decoded rows as an Arrow batch (payload columns, then
   ``_topic``, ``_partition``, ``_offset``, ``_timestamp`` (record timestamp, ms), ``_schema_id``, ``_host``
   (the ``host`` header)) and the quarantined records (:data:`~pipeline.avro_arrow.ERROR_SCHEMA`), each row
   with its ``dt``/``hr`` label (UTC hour of the event time) and its record timestamp: every record is
   decoded once and lands in exactly one of the two;
6. at the end checks rows + quarantined == ``until_offset - from_offset`` and raises
   :class:`~pipeline.load_errors.ReadError` otherwise.

A task is deterministic: reading the same range again (a retry, a speculative copy) gives the same rows.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pyarrow as pa
from fastavro import parse_schema, schemaless_reader
from fastavro.read import SchemaResolutionError

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.record.topic_partition import TopicPartition
from pipeline import avro_arrow
from pipeline.faults import Faults
from pipeline.json_value import JsonValue
from pipeline.load_errors import ReadError
from pipeline.ranges import OffsetRange
from pipeline.record_columns import RecordColumns, batch_columns
from schemas.avro_schema import AvroSchema
from schemas.client import RegistryClientSettings
from schemas.errors import (
    BadMagicByteError,
    SchemaError,
    SerdeError,
    TruncatedPayloadError,
    UnknownSchemaIdError,
)
from schemas.serde import HEADER_BYTES, AvroSerde

Mode = Literal["data", "errors"]
_SCHEMA_ID = struct.Struct(">i")
_HOUR_MS = 3_600_000
#: How long a poll waits for the next batches before checking the no-progress deadline.
_POLL_MS = 500


@dataclass(frozen=True, slots=True)
class ReadTask(JsonValue):
    """What one Spark task reads (see the module docstring)."""

    JSON_WHAT: ClassVar[str] = "read task"
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ("range",)

    task_id: int
    range: OffsetRange
    reader_schema: str
    reader_schema_id: int
    event_time_field: str | None = None


@dataclass(frozen=True)
class SourceSettings:
    """Job-wide settings of the reading tasks (picklable)."""

    #: ``[registry]`` with its password held (``with_secrets_read``): the tasks' clients are made from it
    registry: RegistryClientSettings
    bootstrap_servers: tuple[str, ...] = ()
    zookeeper_connect: str | None = None
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    arrow_batch_records: int = 20_000
    faults: Faults = field(default_factory=Faults)

    def consumer_config(self, task_id: int) -> ConsumerConfig:
        """The consumer of one task: no offset resets (a range outside the log is an error), own client id."""
        base = self.consumer
        return base.replace(
            bootstrap_servers=list(self.bootstrap_servers),
            auto_offset_reset="none",
            client_id=f"lumber-load-task-{task_id}",
        )


@dataclass
class _Counts:
    seen: int = 0
    rows: int = 0
    quarantined: int = 0


# Writer schemas and decoders are cached per Python worker (workers are reused across tasks), keyed by
# registry URL, user and reader schema: a schema id is looked up once per worker, not once per task.
_SERDES: dict[tuple[str, str, str], AvroSerde] = {}
_SERDES_LOCK = threading.Lock()


def _serde(settings: SourceSettings, reader_schema: str) -> AvroSerde:
    registry = settings.registry
    auth = registry.basic_auth()
    key = (registry.url, auth[0] if auth else "", reader_schema)
    with _SERDES_LOCK:
        found = _SERDES.get(key)
        if found is None:
            found = _SERDES[key] = AvroSerde.from_config(registry, reader_schema)
        return found


def quarantine_reason(value: bytes | None, error: BaseException | None) -> str:
    """The reason code of a record that did not decode (see the module docstring)."""
    if value is None:
        return "null_value"
    if isinstance(error, BadMagicByteError) or len(value) < HEADER_BYTES:
        return "bad_framing"
    if isinstance(error, UnknownSchemaIdError):
        return "unknown_schema_id"
    if isinstance(error, TruncatedPayloadError):
        return "corrupt_bytes"
    if error is not None and isinstance(error.__cause__, SchemaResolutionError):
        return "schema_mismatch"
    return "corrupt_bytes"


class _HourLabels:
    """``(dt, hr)`` folder labels of an event time in ms, cached per hour."""

    def of_all(self, times_ms: list[int]) -> list[tuple[str, str]]:
        """The label of each of ``times_ms`` (one label repeated when they all fall in one hour, the common
        case: min and max run at C speed)."""
        if not times_ms:
            return []
        low, high = min(times_ms), max(times_ms)
        if low // _HOUR_MS == high // _HOUR_MS:
            return [self(low)] * len(times_ms)
        return [self(ms) for ms in times_ms]

    def __init__(self) -> None:
        self._cache: dict[int, tuple[str, str]] = {}

    def __call__(self, time_ms: int) -> tuple[str, str]:
        hour = time_ms // _HOUR_MS
        found = self._cache.get(hour)
        if found is None:
            moment = dt.datetime.fromtimestamp(hour * 3600, tz=dt.UTC)
            found = self._cache[hour] = (moment.strftime("%Y-%m-%d"), moment.strftime("%H"))
        return found


def _event_time_ms(value: Any, kind: str) -> int | None:
    if value is None:
        return None
    if kind == "ms":
        return int(value)
    delta: dt.timedelta = value - dt.datetime(1970, 1, 1, tzinfo=value.tzinfo)
    return delta // dt.timedelta(milliseconds=1)


def fetch_range(
    task_range: OffsetRange,
    settings: SourceSettings,
    task_id: int,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[RecordColumns]:
    """The records of ``task_range``, in offset order, in chunks as fetched; checks the offsets are exactly
    the range's (raises :class:`ReadError`)."""
    tp = TopicPartition(task_range.topic, task_range.partition)
    config = settings.consumer_config(task_id)
    consumer = Consumer(
        config,
        bootstrap_servers=list(settings.bootstrap_servers),
        zookeeper_connect=None if settings.bootstrap_servers else settings.zookeeper_connect,
        partitions=[tp],
    )
    stall_s = config.request_timeout_ms / 1000 * 2
    try:
        consumer.seek(tp, task_range.from_offset)
        expected = task_range.from_offset
        until = task_range.until_offset
        last_progress = clock()
        while expected < until:
            batches = consumer.poll_batches(timeout_ms=_POLL_MS)
            if not batches:
                if clock() - last_progress > stall_s:
                    raise ReadError(
                        f"{task_range}: no records from offset {expected} within {stall_s:.0f} s (expected "
                        f"{until - expected} more)"
                    )
                continue
            last_progress = clock()
            for batch in batches:
                if batch.base_offset >= until:
                    break
                columns = batch_columns(batch, until)
                offsets = columns.offsets
                if offsets and (offsets[0] != expected or offsets[-1] != expected + len(offsets) - 1):
                    found = next(o for i, o in enumerate(offsets) if o != expected + i)
                    raise ReadError(
                        f"{task_range}: expected offset {expected + offsets.index(found)}, the broker sent "
                        f"{found} (a gap or a repeat in the fetched records)"
                    )
                expected += len(offsets)
                if offsets:
                    yield columns
                if expected >= until:
                    break
    finally:
        consumer.close()


@dataclass(frozen=True)
class Converted:
    """One chunk of a task's records, decoded: its rows and its quarantined records, each with the
    ``(dt, hr)`` label and the record timestamp of every row (what the task's writer splits and counts by).
    """

    data: pa.RecordBatch  # data_schema(payload): payload columns, then the load's META_FIELDS
    data_hours: list[tuple[str, str]]
    data_timestamps_ms: list[int]
    errors: pa.RecordBatch  # ERROR_SCHEMA
    error_hours: list[tuple[str, str]]
    error_timestamps_ms: list[int]


def convert_chunks(
    task: ReadTask, settings: SourceSettings, chunks: Iterable[RecordColumns]
) -> Iterator[Converted]:
    """Steps 3 to 6 of the module docstring over the fetched ``chunks`` of ``task``'s range, in one pass:
    every record is decoded once and lands in the rows or in the quarantine."""
    reader = AvroSchema.parse(task.reader_schema)
    payload = avro_arrow.payload_schema(reader)
    data_schema = avro_arrow.data_schema(payload)
    decoder = ChunkDecoder(_serde(settings, task.reader_schema), reader)
    event_kind = avro_arrow.event_time_type(reader, task.event_time_field) if task.event_time_field else None
    hours = _HourLabels()
    counts = _Counts()
    pending = RecordColumns()
    size = settings.arrow_batch_records
    for chunk in chunks:
        pending.extend(chunk)
        while len(pending) >= size:
            part, pending = pending.split(size)
            yield _convert(part, task, decoder, payload, data_schema, event_kind, hours, counts)
    while len(pending):
        part, pending = pending.split(size)
        yield _convert(part, task, decoder, payload, data_schema, event_kind, hours, counts)
    expected = task.range.record_count
    if counts.seen != expected or counts.rows + counts.quarantined != expected:
        raise ReadError(
            f"task {task.task_id} {task.range}: {counts.rows} rows + {counts.quarantined} quarantined = "
            f"{counts.rows + counts.quarantined} of {counts.seen} records read, expected {expected}"
        )


def records_to_batches(
    task: ReadTask, settings: SourceSettings, mode: Mode, chunks: Iterable[RecordColumns]
) -> Iterator[pa.RecordBatch]:
    """The rows (``mode="data"``) or the quarantined records (``"errors"``) of ``chunks`` as Arrow batches
    with the staging columns ``_task``, ``dt``, ``hr`` appended (for tools and tests; the load writes
    :func:`convert_chunks`'s output directly)."""
    for converted in convert_chunks(task, settings, chunks):
        batch, labels = (
            (converted.data, converted.data_hours)
            if mode == "data"
            else (converted.errors, converted.error_hours)
        )
        if batch.num_rows:
            schema = avro_arrow.staging_schema(batch.schema)
            yield pa.RecordBatch.from_arrays(
                [
                    *batch.columns,
                    pa.array([task.task_id] * batch.num_rows, pa.int32()),
                    pa.array([label[0] for label in labels], pa.string()),
                    pa.array([label[1] for label in labels], pa.string()),
                ],
                schema=schema,
            )


class ChunkDecoder:
    """Decodes the values of a chunk of records to the reader schema, finding the bad ones.

    The fast path calls fastavro once per record with the writer and reader schemas parsed once per schema
    id (the writer schema comes from the serde's registry client, cached for good); a record the fast path
    cannot decode cleanly (bad framing, unknown id, an exception, bytes left over) is decoded again by
    :meth:`AvroSerde.decode`, whose error says exactly why, and whose success would be taken as is.
    """

    def __init__(self, serde: AvroSerde, reader: AvroSchema) -> None:
        self._serde = serde
        self._reader = reader
        self._reader_parsed = parse_schema(json.loads(reader.canonical))
        self._schemas: dict[int, tuple[Any, Any]] = {}

    def _parsed(self, schema_id: int) -> tuple[Any, Any] | None:
        found = self._schemas.get(schema_id)
        if found is None:
            try:
                writer = self._serde.client.get_schema(schema_id)
            except SchemaError:
                return None  # the serde's slow path names the error (unknown id, registry down)
            parsed = parse_schema(json.loads(writer.canonical))
            found = self._schemas[schema_id] = (
                parsed,
                None if writer == self._reader else self._reader_parsed,
            )
        return found

    def decode(self, values: list[bytes | None]) -> list[tuple[Any, SerdeError | None]]:
        """Each value's record, or the error that quarantines it (``(None, None)`` for a null value)."""
        out: list[tuple[Any, SerdeError | None]] = []
        unpack = _SCHEMA_ID.unpack_from
        for value in values:
            if value is None:
                out.append((None, None))
                continue
            record = None
            if len(value) > HEADER_BYTES and value[0] == 0:
                schemas = self._parsed(unpack(value, 1)[0])
                if schemas is not None:
                    stream = io.BytesIO(value)
                    stream.seek(HEADER_BYTES)
                    try:
                        record = schemaless_reader(stream, schemas[0], schemas[1])
                    except Exception:  # noqa: BLE001 - any failure: the serde decodes it again and says why
                        record = None
                    else:
                        if stream.tell() != len(value):
                            record = None
            if record is not None:
                out.append((record, None))
                continue
            try:
                out.append((self._serde.decode(value, self._reader), None))
            except SerdeError as exc:
                out.append((None, exc))
        return out


def _convert(
    records: RecordColumns,
    task: ReadTask,
    decoder: ChunkDecoder,
    payload: pa.Schema,
    data_schema: pa.Schema,
    event_kind: str | None,
    hours: _HourLabels,
    counts: _Counts,
) -> Converted:
    counts.seen += len(records)
    decoded = decoder.decode(records.values)
    good: list[int] = []
    bad: list[int] = []
    for index, (value, error) in enumerate(decoded):
        (bad if error is not None or value is None else good).append(index)
    counts.rows += len(good)
    counts.quarantined += len(bad)
    rows = records if not bad else _pick(records, good)
    values = [decoded[i][0] for i in good]
    event_ms: list[int] = rows.timestamps_ms
    if event_kind is not None and task.event_time_field is not None:
        name = task.event_time_field
        event_ms = [
            fallback if found is None else found
            for found, fallback in zip(
                (_event_time_ms(v.get(name), event_kind) for v in values), event_ms, strict=True
            )
        ]
    data = pa.RecordBatch.from_arrays(
        [*avro_arrow.columns(values, payload), *_meta_columns(rows, task)], schema=data_schema
    )
    quarantined = _pick(records, bad)
    errors = [decoded[i][1] for i in bad]
    error_batch = pa.RecordBatch.from_arrays(
        [
            *_meta_columns(quarantined, task),
            pa.array(quarantined.keys, pa.binary()),
            pa.array(quarantined.values, pa.binary()),
            pa.array(
                [quarantine_reason(v, e) for v, e in zip(quarantined.values, errors, strict=True)],
                pa.string(),
            ),
            pa.array([str(e) if e is not None else "the record has no value" for e in errors], pa.string()),
        ],
        schema=avro_arrow.ERROR_SCHEMA,
    )
    return Converted(
        data,
        hours.of_all(event_ms),
        rows.timestamps_ms,
        error_batch,
        hours.of_all(quarantined.timestamps_ms),
        quarantined.timestamps_ms,
    )


def _pick(records: RecordColumns, keep: list[int]) -> RecordColumns:
    return RecordColumns(
        [records.offsets[i] for i in keep],
        [records.timestamps_ms[i] for i in keep],
        [records.keys[i] for i in keep],
        [records.values[i] for i in keep],
        [records.hosts[i] for i in keep],
    )


def _meta_columns(records: RecordColumns, task: ReadTask) -> list[pa.Array]:
    n = len(records)
    unpack = _SCHEMA_ID.unpack_from
    schema_ids = [
        unpack(v, 1)[0] if v is not None and len(v) >= HEADER_BYTES and v[0] == 0 else None
        for v in records.values
    ]
    try:  # the header's bytes as UTF-8 text, validated at C speed; invalid bytes are replaced, slowly
        hosts = pa.array(records.hosts, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        hosts = pa.array(
            [None if h is None else h.decode("utf-8", errors="replace") for h in records.hosts], pa.string()
        )
    return [
        pa.array([task.range.topic] * n, pa.string()),
        pa.array([task.range.partition] * n, pa.int32()),
        pa.array(records.offsets, pa.int64()),
        pa.array(records.timestamps_ms, pa.int64()),
        pa.array(schema_ids, pa.int32()),
        hosts,
    ]
