"""Compiles a struct class at one version into a pair of fast, straight-line Python functions.

For each ``(struct class, version, flexible)`` the first use generates the source of a decoder and an
encoder with every branch on the schema already taken (absent fields are constants, nested structs and
arrays are inlined as loops), and ``exec``s it once. What the generated code does per message:

* consecutive fixed-size fields, together with the int16/int32 length prefix of the string, bytes or array
  that follows them, are read or written with **one** precompiled :class:`struct.Struct` call;
* a struct is built with one ``tuple.__new__`` (messages are NamedTuples) and read with one unpacking;
* ``records`` decode as a ``memoryview`` slice of the frame (zero copy); when encoding, a ``records`` value
  that is not bytes is a region (any object with ``size_bytes``): its length is written and the object
  itself is handed to the encoder's ``region`` callback, for the caller to ``sendfile``;
* every length is checked against the bytes that remain before it is used, and an array's count against
  the smallest size its elements can have, so a huge length never allocates or loops;
* tagged-field sections are one byte test on the common path (no tags); present tags go to
  :mod:`broker.protocol.interpreter`.

The generated code does not build error messages. When it fails (``struct.error`` on a short read, an
impossible length, bad UTF-8, a value that does not fit), the wrapper runs the reference codec
(:mod:`broker.protocol.interpreter`) on the same input, whose error names the message, field path and byte
position. If the reference codec does not fail too, the two disagree: that raises an error saying so
rather than returning either result. Compilation is thread-safe (a race compiles twice, harmlessly).

The generators are :mod:`broker.protocol.decoder_builder` and :mod:`broker.protocol.encoder_builder`, over
the shared machinery of :mod:`broker.protocol.codegen`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.protocol import interpreter
from broker.protocol.codegen import DECODE_FAILURES, ENCODE_FAILURES, Decoder, Encoder
from broker.protocol.decoder_builder import DecoderBuilder
from broker.protocol.encoder_builder import EncoderBuilder
from broker.protocol.errors import EncodeError, MalformedMessageError, ProtocolError
from broker.protocol.schema import (
    StructClass,
)

__all__ = [
    "DECODE_FAILURES",
    "ENCODE_FAILURES",
    "Decoder",
    "Encoder",
    "StructCodec",
    "codec_for",
    "decode",
    "diagnose_decode",
    "diagnose_encode",
    "encode",
]


@dataclass(frozen=True, slots=True)
class StructCodec:
    """The compiled codec of one struct class at one version."""

    cls: StructClass
    version: int
    flexible: bool
    decode: Decoder
    encode: Encoder
    decoder_source: str
    encoder_source: str


_CODECS: dict[tuple[StructClass, int, bool], StructCodec] = {}


def codec_for(cls: StructClass, version: int, *, flexible: bool) -> StructCodec:
    """The compiled codec of ``cls`` at ``version`` (compiled on first use, then cached)."""
    key = (cls, version, flexible)
    codec = _CODECS.get(key)
    if codec is None:
        decoder_source, decoder = DecoderBuilder(cls, version, flexible).build()
        encoder_source, encoder = EncoderBuilder(cls, version, flexible).build()
        codec = _CODECS[key] = StructCodec(
            cls, version, flexible, decoder, encoder, decoder_source, encoder_source
        )
    return codec


def decode(
    cls: StructClass, buf: memoryview, pos: int, version: int, *, flexible: bool, context: str
) -> tuple[Any, int]:
    """Decode one ``cls`` at ``pos`` of ``buf`` with the compiled codec; failures are diagnosed."""
    try:
        return codec_for(cls, version, flexible=flexible).decode(buf, buf, pos)
    except DECODE_FAILURES as exc:
        raise diagnose_decode(cls, buf, pos, version, flexible=flexible, context=context, cause=exc) from None


def encode(
    obj: tuple[Any, ...], cls: StructClass, version: int, *, flexible: bool, context: str
) -> list[Any]:
    """Encode ``obj`` as chunks (bytes, and regions) with the compiled codec; failures are diagnosed."""
    if type(obj) is not cls:
        raise EncodeError(f"expected a {cls.__name__}, got {type(obj).__name__}", context=context)
    out: list[Any] = []
    try:
        codec_for(cls, version, flexible=flexible).encode(obj, out.append, out.append)
    except ENCODE_FAILURES as exc:
        raise diagnose_encode(obj, cls, version, flexible=flexible, context=context, cause=exc) from None
    return out


def diagnose_decode(
    cls: StructClass,
    buf: memoryview,
    pos: int,
    version: int,
    *,
    flexible: bool,
    context: str,
    cause: BaseException,
) -> ProtocolError:
    """The error explaining why the compiled decoder failed on ``buf``, from the reference codec."""
    try:
        interpreter.decode_message(cls, buf, pos, version, flexible=flexible, context=context)
    except MalformedMessageError as exc:
        return exc
    return ProtocolError(
        f"{context}: the compiled decoder failed ({type(cause).__name__}: {cause}) where the reference "
        "decoder succeeds: a bug in broker.protocol.compiler"
    )


def diagnose_encode(
    obj: tuple[Any, ...],
    cls: StructClass,
    version: int,
    *,
    flexible: bool,
    context: str,
    cause: BaseException,
) -> ProtocolError:
    """The error explaining why the compiled encoder failed on ``obj``, from the reference codec."""
    try:
        interpreter.encode_message(obj, cls, version, flexible=flexible, context=context)
    except EncodeError as exc:
        return exc
    return ProtocolError(
        f"{context}: the compiled encoder failed ({type(cause).__name__}: {cause}) where the reference "
        "encoder succeeds: a bug in broker.protocol.compiler"
    )
