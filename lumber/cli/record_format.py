"""How ``lumber consume`` prints a record: one line per record, fields in Kafka's console-consumer order.

Line layout (fields joined by the separator, a TAB by default; each field in brackets only with its flag)::

    [CreateTime:<ms> SEP] [<partition> SEP <offset> SEP] [<name>:<value>,... SEP] [<key> SEP] <value>

as ``kafka-console-consumer --property print.timestamp=true ...`` prints it: the timestamp as
``CreateTime:<ms>`` or ``LogAppendTime:<ms>``, the headers as ``name:value`` pairs joined by commas
(``NO_HEADERS`` when there are none), a null key, value or header value as ``null``.

Keys and values are printed in a :class:`Format`:

``avro``
    a Confluent-framed Avro payload (magic byte 0, a 4-byte schema id, the record: :mod:`schemas.serde`),
    decoded with the writer schema from the registry and printed in Avro's JSON encoding, as
    ``kafka-avro-console-consumer`` prints it (a non-null union value is wrapped in its branch's name:
    ``{"string": "x"}``; bytes are ISO-8859-1 characters; timestamps are numbers). That is also the input of
    ``lumber produce --value-format avro``. A payload that is not framed Avro is an error.
``json``
    UTF-8 JSON, printed compactly on one line. A value that is not JSON is an error.
``raw``
    the bytes as UTF-8 text.
``hex``
    the bytes in hexadecimal: the exact bytes, whatever they are.
``auto`` (the default)
    ``avro`` when the payload starts with the magic byte and a schema id the registry knows, else ``raw``.

Every line is one record: what cannot be printed is escaped. In ``raw``, bytes that are not UTF-8 become
``\\xNN``, and newlines, tabs and other control or invisible characters ``\\n``, ``\\r``, ``\\t``, ``\\xNN``
or ``\\uXXXX`` (a backslash itself is printed as is: ``hex`` is the unambiguous form). In ``avro`` and
``json`` the same characters are written as JSON's ``\\uXXXX`` escapes, so the line stays valid JSON.

Errors (:class:`RecordFormatError`) name the topic, partition, offset and what was expected.
"""

from __future__ import annotations

import enum
import io
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from fastavro import json_writer

from broker.client.consumer.consumer_record import ConsumerRecord
from pipeline.errors import PipelineError
from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.errors import RegistryUnavailableError, SchemaNotFoundError, SerdeError
from schemas.serde import HEADER_BYTES, MAGIC_BYTE, AvroSerde

log = logging.getLogger(__name__)

#: ConsumerRecord.timestamp_type -> how Kafka's console consumer names it
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Format(enum.StrEnum):
    """How a key or value is printed (see the module docstring)."""

    AUTO = "auto"
    AVRO = "avro"
    JSON = "json"
    RAW = "raw"
    HEX = "hex"


class RecordFormatError(PipelineError):
    """A key or value cannot be printed in the format asked for (the message says where and why)."""


def escape_text(text: str) -> str:
    """``text`` with every character that is not printable escaped (``\\n``, ``\\xNN``, ``\\uXXXX``)."""
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        if char.isprintable():
            out.append(char)
            continue
        named = _NAMED_ESCAPES.get(char)
        code = ord(char)
        if named is not None:
            out.append(named)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def json_line(value: Any) -> str:
    """``value`` as compact JSON on one line, characters that are not printable as ``\\uXXXX``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:  # json.dumps escaped the C0 controls already; these are in strings, so \\u is valid
        if char.isprintable():
            out.append(char)
            continue
        code = ord(char)
        if code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:  # JSON escapes an astral character as its UTF-16 surrogate pair
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return "".join(out)


class AvroText:
    """Confluent-framed Avro payloads as Avro-JSON text, the writer schemas from one registry.

    Schema ids the registry does not know are remembered (an ``auto`` value starting with a zero byte costs
    one request, not one per record). Not thread-safe: one per ``lumber consume``.
    """

    def __init__(self, client: SchemaRegistryClient) -> None:
        self.client = client
        self._serde = AvroSerde(client)
        self._unknown: set[int] = set()
        self._unreachable: RegistryUnavailableError | None = None

    def schema_of(self, payload: bytes) -> AvroSchema | None:
        """The writer schema of a framed payload, or ``None`` when ``payload`` is not framed with a schema
        id the registry knows (or the registry cannot be reached: warned about once)."""
        if len(payload) < HEADER_BYTES or payload[0] != MAGIC_BYTE:
            return None
        schema_id = self._serde.schema_id_of(payload)
        if schema_id in self._unknown or self._unreachable is not None:
            return None
        try:
            return self.client.get_schema(schema_id)
        except SchemaNotFoundError:
            self._unknown.add(schema_id)
            return None
        except RegistryUnavailableError as exc:
            self._unreachable = exc
            log.warning("%s; values that look like Avro are printed raw", exc)
            return None

    def text(self, payload: bytes, schema: AvroSchema, where: str) -> str:
        """``payload`` (written with ``schema``) in Avro's JSON encoding, on one line."""
        try:
            record = self._serde.decode(payload)
        except SerdeError as exc:
            raise RecordFormatError(f"{where}: {exc}") from exc
        buffer = io.StringIO()
        json_writer(buffer, schema.fastavro_schema, [record])
        return json_line(json.loads(buffer.getvalue()))

    def required_schema(self, payload: bytes, where: str) -> AvroSchema:
        """The writer schema of ``payload``; :class:`RecordFormatError` when it has none (``--value-format
        avro`` on a value that is not framed Avro)."""
        try:
            schema_id = self._serde.schema_id_of(payload, where)
            return self.client.get_schema(schema_id)
        except SchemaNotFoundError as exc:
            raise RecordFormatError(
                f"{where}: schema id {schema_id} is not known to the registry at {self.client.url}"
            ) from exc
        except SerdeError as exc:
            raise RecordFormatError(
                f"{exc} (not Confluent-framed Avro; try --value-format raw or hex)"
            ) from exc

    def close(self) -> None:
        self.client.close()


class RecordPrinter:
    """Turns records into lines (see the module docstring). ``avro`` is needed for the ``auto`` and
    ``avro`` formats."""

    def __init__(
        self,
        *,
        key_format: Format = Format.AUTO,
        value_format: Format = Format.AUTO,
        avro: AvroText | None = None,
        print_key: bool = False,
        print_offset: bool = False,
        print_headers: bool = False,
        print_timestamp: bool = False,
        separator: str = "\t",
    ) -> None:
        self.key_format = key_format
        self.value_format = value_format
        self.avro = avro
        self.separator = separator
        fields: list[Callable[[ConsumerRecord], str]] = []
        if print_timestamp:
            fields.append(_timestamp)
        if print_offset:
            fields.append(lambda r: f"{r.partition}{separator}{r.offset}")
        if print_headers:
            fields.append(_headers)
        if print_key:
            fields.append(lambda r: self.render(r.key, self.key_format, r, "key"))
        fields.append(lambda r: self.render(r.value, self.value_format, r, "value"))
        self._fields: Sequence[Callable[[ConsumerRecord], str]] = fields

    def line(self, record: ConsumerRecord) -> bytes:
        """``record`` as one line, its newline included."""
        return (self.separator.join(field(record) for field in self._fields) + "\n").encode("utf-8")

    def render(self, data: bytes | None, fmt: Format, record: ConsumerRecord, what: str) -> str:
        """A key or value of ``record`` in ``fmt``."""
        if data is None:
            return "null"
        if fmt is Format.HEX:
            return data.hex()
        if fmt is Format.RAW:
            return escape_text(data.decode("utf-8", errors="backslashreplace"))
        where = f"{record.topic}-{record.partition} offset {record.offset} {what}"
        if fmt is Format.JSON:
            try:
                return json_line(json.loads(data))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise RecordFormatError(
                    f"{where} is not JSON: {exc} (try --{what}-format raw or hex)"
                ) from exc
        if self.avro is None:
            raise RecordFormatError(f"{where}: the {fmt} format needs the schema registry")
        if fmt is Format.AVRO:
            return self.avro.text(data, self.avro.required_schema(data, where), where)
        schema = self.avro.schema_of(data)
        if schema is None:
            return escape_text(data.decode("utf-8", errors="backslashreplace"))
        return self.avro.text(data, schema, where)


def _timestamp(record: ConsumerRecord) -> str:
    if record.timestamp_ms < 0:
        return "NO_TIMESTAMP"
    return f"{_TIMESTAMP_TYPES.get(record.timestamp_type, 'CreateTime')}:{record.timestamp_ms}"


def _headers(record: ConsumerRecord) -> str:
    if not record.headers:
        return "NO_HEADERS"
    return ",".join(
        f"{escape_text(name)}:"
        + ("null" if value is None else escape_text(value.decode("utf-8", errors="backslashreplace")))
        for name, value in record.headers
    )
