"""Requests and responses as whole frames: what the network server and the clients call.

Server side::

    request = decode_request(frame)            # frame: the bytes after the 4-byte size prefix
    ...
    sock.sendall(encode_response(request.header.api_version, request.header.correlation_id, body))
    for chunk in encode_fetch_response(version, correlation_id, fetch_response):
        sock.sendall(chunk) if isinstance(chunk, bytes) else chunk.send_to(sock)    # regions: sendfile

``decode_request`` raises :class:`UnknownApiKeyError` or :class:`UnsupportedVersionError` (both carry the
correlation id) before looking at the body; an ApiVersions request newer than Lumber's is answered with
:func:`encode_api_versions_fallback`, anything else that fails to decode closes the connection, as Kafka
does. Like Kafka, it ignores bytes after the end of a request body (librdkafka sends some); a response
with bytes after its body is malformed. Client side: :func:`encode_request` and :func:`decode_response`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple, cast

from broker.protocol import compiler, interpreter, primitives
from broker.protocol.api_spec import ApiSpec
from broker.protocol.apis import (
    APIS_BY_KEY,
    RequestBody,
    ResponseBody,
    api_for_request,
    api_for_response,
    supported_api_versions,
)
from broker.protocol.error_code import ErrorCode
from broker.protocol.errors import (
    EncodeError,
    MalformedMessageError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from broker.protocol.frame import SIZE_PREFIX
from broker.protocol.messages.api_versions import API_VERSIONS, ApiVersionsResponse
from broker.protocol.messages.fetch import FetchResponse
from broker.protocol.messages.produce import ProduceRequest
from broker.protocol.primitives import UINT32_MAX, encode_uvarint, read_uvarint
from broker.protocol.region import Region
from broker.protocol.request_header import (
    RequestHeader,
    decode_request_header,
    encode_request_header,
    peek_request_header,
)
from broker.protocol.response_header import ResponseHeader, decode_response_header, encode_response_header

_HEADER_V1 = struct.Struct(">hhih")
_CORRELATION_ID = struct.Struct(">i")
_SIZE_PACK = SIZE_PREFIX.pack
_ERROR_CODE = struct.Struct(">h")
_UNSUPPORTED = int(ErrorCode.UNSUPPORTED_VERSION)
_TNEW = tuple.__new__
_STR = str


class Request(NamedTuple):
    """A decoded request: its header and body (one of the ``*Request`` message classes)."""

    header: RequestHeader
    body: RequestBody


class Response(NamedTuple):
    """A decoded response: its header and body (one of the ``*Response`` message classes)."""

    header: ResponseHeader
    body: ResponseBody


class _BodyCodec(NamedTuple):
    spec: ApiSpec
    flexible: bool
    codec: compiler.StructCodec
    context: str


_REQUEST_CODECS: dict[tuple[int, int], _BodyCodec] = {}
#: (api key, version) -> (compiled body decoder, flexible, codec) for the fast path of decode_request.
_FAST_REQUESTS: dict[tuple[int, int], tuple[compiler.Decoder, bool, _BodyCodec]] = {}
_RESPONSE_CODECS: dict[tuple[int, int], _BodyCodec] = {}


def _body_codec(spec: ApiSpec, version: int, *, request: bool) -> _BodyCodec:
    table = _REQUEST_CODECS if request else _RESPONSE_CODECS
    key = (int(spec.key), version)
    found = table.get(key)
    if found is None:
        flexible = spec.is_flexible(version)
        cls = spec.request if request else spec.response
        context = f"{spec.name} v{version} {'request' if request else 'response'}"
        found = table[key] = _BodyCodec(
            spec, flexible, compiler.codec_for(cls, version, flexible=flexible), context
        )
    return found


def compile_all() -> None:
    """Compile every request and response codec now rather than on first use (e.g. at server start)."""
    for spec in APIS_BY_KEY.values():
        for version in spec.versions:
            request = _body_codec(spec, version, request=True)
            _FAST_REQUESTS[(int(spec.key), version)] = (request.codec.decode, request.flexible, request)
            _body_codec(spec, version, request=False)


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    if type(frame) is memoryview and frame.format == "B" and frame.ndim == 1:
        return frame
    return primitives.byte_view(frame)


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode a request frame (the bytes after the size prefix); ``records`` in it are views of ``frame``."""
    if type(frame) is bytes:
        buf: bytes | memoryview = frame
        view = memoryview(frame)
    else:
        buf = view = _view(frame)
    # Fast path: a supported API and version, a client id that is present and valid, no header tags.
    try:
        api_key, api_version, correlation_id, client_id_length = _HEADER_V1.unpack_from(buf, 0)
    except struct.error:
        return _decode_request_carefully(view)
    known = _FAST_REQUESTS.get((api_key, api_version))
    if known is None or client_id_length < 0:
        return _decode_request_carefully(view)
    decoder, flexible, body_codec = known
    pos = 10 + client_id_length
    if pos >= len(buf) and (flexible or pos > len(buf)):
        return _decode_request_carefully(view)
    try:
        client_id = _STR(buf[10:pos], "utf-8")
    except UnicodeDecodeError:
        return _decode_request_carefully(view)
    if flexible:
        if buf[pos]:
            return _decode_request_carefully(view)
        pos += 1
    try:
        body, pos = decoder(buf, view, pos)
    except compiler.DECODE_FAILURES as exc:
        raise compiler.diagnose_decode(
            body_codec.codec.cls,
            view,
            pos,
            api_version,
            flexible=flexible,
            context=body_codec.context,
            cause=exc,
        ) from None
    # Bytes after the body are ignored, as Kafka does: librdkafka 2.x sends three stray bytes after an
    # all-topics Metadata v9+ request (the unused rest of a 4-byte placeholder for the topic count).
    return _TNEW(Request, (_TNEW(RequestHeader, (api_key, api_version, correlation_id, client_id)), body))


def _decode_request_carefully(buf: memoryview) -> Request:
    """:func:`decode_request` for everything off its fast path: short or odd headers, null client ids,
    header tags, unknown APIs and versions (and the first request of each API version)."""
    api_key, api_version, correlation_id = peek_request_header(buf)
    spec = APIS_BY_KEY.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(api_key, api_version, correlation_id)
    if not spec.supports(api_version):
        raise UnsupportedVersionError(
            api_key, api_version, correlation_id, spec.min_version, spec.max_version
        )
    body_codec = _body_codec(spec, api_version, request=True)
    _FAST_REQUESTS[(api_key, api_version)] = (body_codec.codec.decode, body_codec.flexible, body_codec)
    header, pos = decode_request_header(buf, spec.request_header_version(api_version))
    try:
        body, pos = body_codec.codec.decode(buf, buf, pos)
    except compiler.DECODE_FAILURES as exc:
        raise compiler.diagnose_decode(
            spec.request,
            buf,
            pos,
            api_version,
            flexible=body_codec.flexible,
            context=body_codec.context,
            cause=exc,
        ) from None
    return Request(header, cast(RequestBody, body))


class _RegionRefusedError(EncodeError):
    """A region where only bytes can go (anything but :func:`encode_fetch_response`)."""


def _refuse_region(region: object) -> None:
    raise _RegionRefusedError(
        f"records hold a {type(region).__name__} region, which only encode_fetch_response can send"
    )


class _ResponseEncoding(NamedTuple):
    header_v1: bool
    body_codec: _BodyCodec


#: (response class, version) -> how to encode it, for the fast path of the response encoders.
_FAST_RESPONSES: dict[tuple[type[Any], int], _ResponseEncoding] = {}


def _response_encoding(body: ResponseBody, version: int) -> _ResponseEncoding:
    found = _FAST_RESPONSES.get((type(body), version))
    if found is None:
        spec = api_for_response(body)
        if not spec.supports(version):
            raise EncodeError(
                f"{spec.name} v{version} is outside Lumber's range v{spec.min_version} to v{spec.max_version}"
            )
        body_codec = _body_codec(spec, version, request=False)
        header_v1 = spec.response_header_version(version) == 1
        found = _FAST_RESPONSES[(type(body), version)] = _ResponseEncoding(header_v1, body_codec)
    return found


def _encode_body(
    body_codec: _BodyCodec,
    body: Any,
    version: int,
    append: Callable[[Any], None],
    region: Callable[[Any], None],
) -> None:
    try:
        body_codec.codec.encode(body, append, region)
    except _RegionRefusedError as exc:
        raise exc.located(body_codec.context) from None
    except compiler.ENCODE_FAILURES as exc:
        raise compiler.diagnose_encode(
            body,
            body_codec.codec.cls,
            version,
            flexible=body_codec.flexible,
            context=body_codec.context,
            cause=exc,
        ) from None


def encode_response(version: int, correlation_id: int, body: ResponseBody) -> bytes:
    """The response frame, size prefix included; the response's API is the type of ``body``."""
    encoding = _response_encoding(body, version)
    try:
        header = _CORRELATION_ID.pack(correlation_id)
    except struct.error:
        header = encode_response_header(correlation_id, 0)  # raises the EncodeError that names the header
    out: list[Any] = [header + b"\x00" if encoding.header_v1 else header]
    _encode_body(encoding.body_codec, body, version, out.append, _refuse_region)
    payload = b"".join(out)
    return _SIZE_PACK(len(payload)) + payload


def encode_fetch_response(version: int, correlation_id: int, response: FetchResponse) -> list[bytes | Region]:
    """The Fetch response frame as chunks: bytes, and each partition's ``records`` region on its own.

    The size prefix, header, every field and every records length are in the bytes chunks; a region
    (any object with ``size_bytes``, e.g. :class:`broker.log.file_region.FileRegion`) stands for exactly
    ``size_bytes`` bytes the caller sends with ``sendfile``. Adjacent bytes are merged, so the chunks
    alternate between bytes and regions, starting with bytes.
    """
    encoding = _response_encoding(response, version)
    out: list[Any] = [encode_response_header(correlation_id, 1 if encoding.header_v1 else 0)]
    chunks: list[bytes | Region] = []

    def region(value: Region) -> None:
        chunks.append(b"".join(out))
        out.clear()
        chunks.append(value)

    _encode_body(encoding.body_codec, response, version, out.append, region)
    tail = b"".join(out)
    if tail or not chunks:
        chunks.append(tail)
    total = 0
    for chunk in chunks:
        total += len(chunk) if type(chunk) is bytes else chunk.size_bytes  # type: ignore[union-attr]
    chunks[0] = _SIZE_PACK(total) + cast(bytes, chunks[0])
    return chunks


def encode_api_versions_fallback(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request newer than Lumber's: the v0 format (header v0), error
    UNSUPPORTED_VERSION and every supported API with its range, as the protocol guide prescribes (KIP-511);
    the client retries with the highest ApiVersions version both support."""
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=supported_api_versions())
    return encode_response(0, correlation_id, body)


def api_versions_response(version: int) -> ApiVersionsResponse:
    """The ApiVersions response Lumber sends: no error and every supported API with its range."""
    if not API_VERSIONS.supports(version):
        raise EncodeError(
            f"ApiVersions v{version} is outside v{API_VERSIONS.min_version}-v{API_VERSIONS.max_version}"
        )
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=supported_api_versions())


def encode_request(version: int, correlation_id: int, client_id: str | None, body: RequestBody) -> bytes:
    """The request frame, size prefix included; the request's API is the type of ``body``."""
    if type(body) is ProduceRequest and len(body.topic_data) == 1:
        topic = body.topic_data[0]
        if len(topic.partition_data) == 1 and type(topic.partition_data[0].records) is bytes:
            return _encode_single_produce(version, correlation_id, client_id, body)
    return _encode_request(version, correlation_id, client_id, body)


def _encode_request(version: int, correlation_id: int, client_id: str | None, body: RequestBody) -> bytes:
    spec = api_for_request(body)
    if not spec.supports(version):
        raise EncodeError(
            f"{spec.name} v{version} is outside Lumber's range v{spec.min_version} to v{spec.max_version}"
        )
    body_codec = _body_codec(spec, version, request=True)
    header = RequestHeader(int(spec.key), version, correlation_id, client_id)
    out: list[Any] = [encode_request_header(header, spec.request_header_version(version))]
    _encode_body(body_codec, body, version, out.append, _refuse_region)
    payload = b"".join(out)
    return _SIZE_PACK(len(payload)) + payload


class ProduceTemplate(NamedTuple):
    """A Produce request to one partition, cut around its two variable parts, the correlation id and the
    records (with their length): cut from the generic encoding of the same request with empty records.

    The producer encodes with it (:func:`encode_request`); the broker recognises, with
    :meth:`records_of`, the requests a pipelining producer sends one after the other, which differ only in
    those two parts, without decoding each, and with :meth:`partition_records_of` those to any partition of
    the same topic (a producer spreading its records over the topic's partitions).
    """

    head: bytes  # api key and version
    middle: bytes  # from the client id to the partition index
    flexible: bool  # records length as an unsigned varint of length + 1 (else int32)
    tail: bytes  # tagged fields after the records (flexible versions)

    def records_of(self, frame: bytes) -> memoryview | None:
        """The records of ``frame`` (a request frame, size prefix removed) when it is this request with any
        correlation id and records, byte-for-byte; ``None`` otherwise (decode it the general way)."""
        middle = self.middle
        if not (frame.startswith(self.head) and frame.startswith(middle, 8)):
            return None
        return self._records_at(frame, 8 + len(middle))

    def partition_records_of(self, frame: bytes) -> tuple[int, memoryview] | None:
        """The partition index and records of ``frame`` when it is this request to any partition of the
        same topic (the index is the last four bytes of :attr:`middle`), with any correlation id and
        records, byte-for-byte; ``None`` otherwise."""
        middle = self.middle
        index_at = len(middle) - 4
        if not (frame.startswith(self.head) and frame.startswith(middle[:index_at], 8)):
            return None
        try:
            (partition,) = _CORRELATION_ID.unpack_from(frame, 8 + index_at)
        except struct.error:
            return None
        records = self._records_at(frame, 8 + len(middle))
        return None if records is None else (partition, records)

    def same_but_partition(self, other: ProduceTemplate) -> bool:
        """Whether ``other`` is this request to a partition of the same topic (perhaps another)."""
        return (
            self.head == other.head
            and self.middle[:-4] == other.middle[:-4]
            and self.flexible == other.flexible
            and self.tail == other.tail
        )

    def _records_at(self, frame: bytes, pos: int) -> memoryview | None:
        """The records whose length is at ``pos`` of ``frame``, if they and :attr:`tail` end the frame."""
        size = len(frame)
        try:
            if self.flexible:  # length + 1 as a uvarint: two bytes below 16 KiB, read inline
                byte = frame[pos]
                if byte < 0x80:
                    length = byte - 1
                    pos += 1
                elif frame[pos + 1] < 0x80:
                    length = (byte & 0x7F | frame[pos + 1] << 7) - 1
                    pos += 2
                else:
                    length, pos = read_uvarint(frame, pos, 5, UINT32_MAX, "records length")
                    length -= 1
            else:
                (length,) = _CORRELATION_ID.unpack_from(frame, pos)
                pos += 4
        except (IndexError, MalformedMessageError, struct.error):
            return None
        end = pos + length
        tail = self.tail
        if length < 0 or end + len(tail) != size or (tail and not frame.endswith(tail)):
            return None
        return memoryview(frame)[pos:end]


_INT16 = struct.Struct(">h")  # a transactional id's length (before v9), acks
_PRODUCE_KEY = 0
_RECORD_BATCH_PRODUCE_VERSION = 3


def produce_acks(frame: bytes | bytearray | memoryview) -> int | None:
    """The ``acks`` of a Produce v3+ request frame (size prefix removed), read from its header and
    transactional id without decoding the rest; ``None`` when ``frame`` is no such request or those do
    not parse (decode it the general way: :func:`decode_request` then raises or answers as usual).

    A broker deciding whether a request can join a run of ``acks=0`` requests reads this instead of
    decoding a request it will not take (layout: api key, version, correlation id, the int16-sized client
    id, header tagged fields from v9, then the transactional id, int16-sized or from v9 compact, then
    ``acks``)."""
    try:
        api_key, version, _correlation_id, client_id_length = _HEADER_V1.unpack_from(frame, 0)
        if api_key != _PRODUCE_KEY or version < _RECORD_BATCH_PRODUCE_VERSION:
            return None
        spec = APIS_BY_KEY[_PRODUCE_KEY]
        if not spec.supports(version):
            return None
        pos = 10 + max(client_id_length, 0)
        if spec.is_flexible(version):
            if frame[pos]:  # header tagged fields: rare, leave them to the decoder
                return None
            # the transactional id: a compact nullable string, length + 1 as a uvarint (one byte below
            # 127 characters, read inline)
            length = frame[pos + 1]
            if length < 0x80:
                pos += 2
            else:
                length, pos = read_uvarint(frame, pos + 1, 5, UINT32_MAX, "transactional_id length")
            pos += max(length - 1, 0)
        else:
            (length,) = _INT16.unpack_from(frame, pos)
            pos += 2 + max(length, 0)
        (acks,) = _INT16.unpack_from(frame, pos)
    except (struct.error, IndexError, MalformedMessageError):
        return None
    return int(acks)


_PRODUCE_TEMPLATES: dict[tuple[Any, ...], ProduceTemplate] = {}
_MAX_PRODUCE_TEMPLATES = 1024


def produce_template(version: int, client_id: str | None, body: ProduceRequest) -> ProduceTemplate:
    """The (cached) template of ``body``, a Produce request to exactly one partition, at ``version``."""
    topic = body.topic_data[0]
    partition = topic.partition_data[0]
    key = (version, client_id, body.transactional_id, body.acks, body.timeout_ms, topic.name, partition.index)
    template = _PRODUCE_TEMPLATES.get(key)
    if template is None:
        empty = body._replace(topic_data=[topic._replace(partition_data=[partition._replace(records=b"")])])
        frame = _encode_request(version, 0, client_id, empty)
        flexible = api_for_request(body).is_flexible(version)
        # empty records end the partition: int32 0, or the varint 1 then the partition's, topic's and
        # body's (empty) tagged fields
        tail = b"\x00\x00\x00" if flexible else b""
        length = b"\x01" if flexible else b"\x00\x00\x00\x00"
        cut = len(frame) - len(tail) - len(length)
        if frame[cut:] != length + tail:  # pragma: no cover - the layout of Produce changed
            raise EncodeError(f"Produce v{version}: the records are not the last field of the request")
        template = ProduceTemplate(frame[4:8], frame[12:cut], flexible, tail)
        if len(_PRODUCE_TEMPLATES) >= _MAX_PRODUCE_TEMPLATES:
            _PRODUCE_TEMPLATES.clear()
        _PRODUCE_TEMPLATES[key] = template
    return template


def _encode_single_produce(
    version: int, correlation_id: int, client_id: str | None, body: ProduceRequest
) -> bytes:
    """:func:`encode_request` of a Produce request to one partition (a producer's hot path, every request
    at batch size 1): the bytes around the records come from its template, so only the correlation id,
    the records' length and the size are encoded per request. Byte-for-byte the generic encoding."""
    records = body.topic_data[0].partition_data[0].records
    assert type(records) is bytes
    template = produce_template(version, client_id, body)
    n = len(records)
    length = encode_uvarint(n + 1) if template.flexible else _CORRELATION_ID.pack(n)
    size = 8 + len(template.middle) + len(length) + n + len(template.tail)
    return b"".join(
        (
            _SIZE_PACK(size),
            template.head,
            _CORRELATION_ID.pack(correlation_id),
            template.middle,
            length,
            records,
            template.tail,
        )
    )


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> Response:
    """Decode the response frame (size prefix removed) to a request of ``api_key`` at ``version``.

    An ApiVersions response with UNSUPPORTED_VERSION is decoded in the v0 format, whatever was asked.
    """
    spec = APIS_BY_KEY.get(api_key)
    if spec is None or not spec.supports(version):
        raise EncodeError(f"api key {api_key} v{version} is not an API version Lumber implements")
    buf = _view(frame)
    header, pos = decode_response_header(buf, spec.response_header_version(version))
    if spec is API_VERSIONS and len(buf) >= pos + 2 and _ERROR_CODE.unpack_from(buf, pos)[0] == _UNSUPPORTED:
        version = 0
    body_codec = _body_codec(spec, version, request=False)
    body, pos = compiler.decode(
        body_codec.codec.cls, buf, pos, version, flexible=body_codec.flexible, context=body_codec.context
    )
    if pos != len(buf):
        raise MalformedMessageError(
            f"{len(buf) - pos} bytes follow the end of the message", position=pos, context=body_codec.context
        )
    return Response(header, cast(ResponseBody, body))


def decode_request_reference(frame: bytes | bytearray | memoryview) -> Request:
    """:func:`decode_request` done by the reference codec (:mod:`broker.protocol.interpreter`): for tests
    and diagnosis, never the hot path."""
    buf = _view(frame)
    api_key, api_version, correlation_id = peek_request_header(buf)
    spec = APIS_BY_KEY.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(api_key, api_version, correlation_id)
    if not spec.supports(api_version):
        raise UnsupportedVersionError(
            api_key, api_version, correlation_id, spec.min_version, spec.max_version
        )
    flexible = spec.is_flexible(api_version)
    header, pos = decode_request_header(buf, spec.request_header_version(api_version))
    context = f"{spec.name} v{api_version} request"
    body, _ = interpreter.decode_message(
        spec.request, buf, pos, api_version, flexible=flexible, context=context
    )
    return Request(header, cast(RequestBody, body))
