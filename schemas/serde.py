"""Avro payloads in the Confluent wire format: what every message of an Avro topic carries (paper section 4).

Byte layout of one payload::

    offset  size  field
    0       1     magic byte, always 0x00
    1       4     schema id, int32 big-endian (the registry's id of the writer schema)
    5       n     the record in Avro binary encoding (no container header, no sync markers)

Decoding looks the writer schema up by id once (:meth:`SchemaRegistryClient.get_schema`, cached for good) and
caches a decoder per (writer id, reader schema): fastavro's parsed writer schema, and the parsed reader schema
when one is given (the record is then resolved to it with Avro's rules; without one, records come out as
written). The whole payload must be one record: bytes left over after it are an error, as is a payload that
ends inside it. Every error names the schema id and the offset (and, in :meth:`AvroSerde.decode_many`, the
payload's index in the batch).

:class:`AvroSerde` is thread-safe and picklable: it pickles its registry client's settings and its reader
schema only (for Spark executors); decoders and the HTTP client are created again, lazily, where it is used.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Iterable
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError

from schemas.avro_schema import AvroSchema
from schemas.client import RegistryClientSettings, SchemaRegistryClient
from schemas.errors import (
    BadMagicByteError,
    DecodeError,
    EncodeError,
    SchemaNotFoundError,
    TruncatedPayloadError,
    UnknownSchemaIdError,
)

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
HEADER_BYTES = HEADER.size
_ID = struct.Struct(">I")
_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, struct.error)


class _Decoder:
    """Decodes payloads of one writer schema id, optionally resolved to one reader schema."""

    __slots__ = ("reader", "schema_id", "writer")

    def __init__(self, schema_id: int, writer: AvroSchema, reader: AvroSchema | None) -> None:
        self.schema_id = schema_id
        self.writer = writer.fastavro_schema
        # same schema: fastavro reads without resolution (it would compare the two on every record otherwise)
        self.reader = None if reader is None or reader == writer else reader.fastavro_schema

    def __call__(self, payload: bytes, where: str) -> Any:
        stream = io.BytesIO(payload)
        stream.seek(HEADER_BYTES)
        try:
            record = schemaless_reader(stream, self.writer, self.reader)
        except EOFError as exc:
            raise TruncatedPayloadError(
                f"{where}: payload of {len(payload)} bytes (schema id {self.schema_id}) ends inside its Avro "
                f"record (read up to offset {stream.tell()})"
            ) from exc
        except SchemaResolutionError as exc:
            raise DecodeError(
                f"{where}: data written with schema id {self.schema_id} does not resolve to the reader "
                f"schema: {exc}"
            ) from exc
        except (*_DECODE_ERRORS, UnicodeDecodeError) as exc:
            if stream.tell() >= len(payload):  # fastavro's C reader reports some short reads as IndexError
                raise TruncatedPayloadError(
                    f"{where}: payload of {len(payload)} bytes (schema id {self.schema_id}) ends inside its "
                    f"Avro record (read up to offset {stream.tell()}): {type(exc).__name__}: {exc}"
                ) from exc
            raise DecodeError(
                f"{where}: payload of {len(payload)} bytes is not an Avro record of schema id "
                f"{self.schema_id} (failed near offset {stream.tell()}): {type(exc).__name__}: {exc}"
            ) from exc
        end = stream.tell()
        if end != len(payload):
            raise DecodeError(
                f"{where}: {len(payload) - end} bytes left over after the Avro record of schema id "
                f"{self.schema_id} (record ends at offset {end} of {len(payload)})"
            )
        return record


class AvroSerde:
    """Encode records to, and decode them from, Confluent-framed Avro payloads (see the module docstring)."""

    def __init__(self, client: SchemaRegistryClient, reader_schema: str | AvroSchema | None = None) -> None:
        self.client = client
        self.reader_schema = (
            AvroSchema.parse(reader_schema) if isinstance(reader_schema, str) else reader_schema
        )
        self._init_runtime()

    @classmethod
    def from_config(
        cls, config: RegistryClientSettings, reader_schema: str | AvroSchema | None = None
    ) -> AvroSerde:
        """A serde of ``[registry]``'s client (:meth:`SchemaRegistryClient.from_config`: its credentials)."""
        return cls(SchemaRegistryClient.from_config(config), reader_schema)

    def close(self) -> None:
        """Close the registry client's connections (the caches stay usable)."""
        self.client.close()

    def __enter__(self) -> AvroSerde:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._decoders: dict[tuple[int, str | None], _Decoder] = {}
        self._writers: dict[int, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        reader = self.reader_schema.canonical if self.reader_schema is not None else None
        return {"client": self.client, "reader_schema": reader}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.client = state["client"]
        reader = state["reader_schema"]
        self.reader_schema = AvroSchema.parse(reader) if reader is not None else None
        self._init_runtime()

    # -- schemas ---------------------------------------------------------------------------------------

    def _writer_schema(self, schema_id: int, where: str) -> AvroSchema:
        try:
            return self.client.get_schema(schema_id)
        except SchemaNotFoundError as exc:
            raise UnknownSchemaIdError(
                f"{where}: schema id {schema_id} is not known to the registry at {self.client.url}"
            ) from exc

    def _decoder(self, schema_id: int, reader: AvroSchema | None, where: str) -> _Decoder:
        key = (schema_id, reader.canonical if reader is not None else None)
        decoder = self._decoders.get(key)
        if decoder is None:
            decoder = _Decoder(schema_id, self._writer_schema(schema_id, where), reader)
            with self._lock:
                self._decoders[key] = decoder
        return decoder

    # -- decode ----------------------------------------------------------------------------------------

    def schema_id_of(self, payload: bytes, where: str = "payload") -> int:
        """The schema id in a payload's header (checked: magic byte, length)."""
        if len(payload) < HEADER_BYTES:
            if payload and payload[0] != MAGIC_BYTE:
                raise BadMagicByteError(
                    f"{where}: magic byte is 0x{payload[0]:02x} at offset 0, expected 0x00"
                )
            raise TruncatedPayloadError(
                f"{where}: payload has {len(payload)} bytes, fewer than the {HEADER_BYTES}-byte header "
                "(magic byte and schema id)"
            )
        if payload[0] != MAGIC_BYTE:
            raise BadMagicByteError(f"{where}: magic byte is 0x{payload[0]:02x} at offset 0, expected 0x00")
        schema_id: int = _ID.unpack_from(payload, 1)[0]
        return schema_id

    def decode(self, payload: bytes, reader_schema: AvroSchema | None = None) -> Any:
        """The record in ``payload``, resolved to ``reader_schema`` (default: the serde's, if any)."""
        reader = reader_schema if reader_schema is not None else self.reader_schema
        schema_id = self.schema_id_of(payload)
        return self._decoder(schema_id, reader, "payload")(payload, "payload")

    def decode_many(self, payloads: Iterable[bytes], reader_schema: AvroSchema | None = None) -> list[Any]:
        """Decode a batch (the load job's path): the decoder lookup is skipped while the id repeats."""
        reader = reader_schema if reader_schema is not None else self.reader_schema
        records = []
        last_id = -1
        decoder: _Decoder | None = None
        for index, payload in enumerate(payloads):
            if len(payload) < HEADER_BYTES or payload[0] != MAGIC_BYTE:
                self.schema_id_of(payload, f"payload {index}")  # raises the precise error
            schema_id = _ID.unpack_from(payload, 1)[0]
            if schema_id != last_id or decoder is None:
                decoder = self._decoder(schema_id, reader, f"payload {index}")
                last_id = schema_id
            records.append(decoder(payload, f"payload {index}"))
        return records

    # -- encode ----------------------------------------------------------------------------------------

    def encode(self, schema_id: int, record: Any) -> bytes:
        """Frame ``record`` written with the schema of ``schema_id``.

        Strict: a record field the schema lacks, or a schema field without a default that the record lacks,
        is an :class:`EncodeError` (nothing is dropped or invented silently).
        """
        parsed = self._writers.get(schema_id)
        if parsed is None:
            parsed = self._writer_schema(schema_id, "encode").fastavro_schema
            with self._lock:
                self._writers[schema_id] = parsed
        stream = io.BytesIO()
        stream.write(HEADER.pack(MAGIC_BYTE, schema_id))
        try:
            schemaless_writer(stream, parsed, record, strict_allow_default=True)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError, struct.error) as exc:
            raise EncodeError(
                f"record does not fit schema id {schema_id}: {type(exc).__name__}: {exc}"
            ) from exc
        return stream.getvalue()
