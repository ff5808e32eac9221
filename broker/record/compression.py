"""Kafka's compression codecs, framed exactly as Kafka frames them inside a record batch v2.

A compressed batch keeps its 61-byte header in clear and replaces the concatenated records with one
compressed blob (the record count stays in the header). The blob's framing per codec:

* ``GZIP`` (1): a gzip stream (RFC 1952), what Java's ``GZIPOutputStream`` writes. Reading accepts several
  concatenated gzip members.
* ``SNAPPY`` (2): Java clients write xerial's ``SnappyOutputStream`` framing::

      header (16 bytes): 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00 | int32 BE version (1) | int32 BE compatible (1)
      then blocks:       int32 BE length | raw snappy block (of at most 32 KiB of input)

  librdkafka writes one raw snappy block with no framing. Reading detects the xerial magic and accepts both;
  writing uses xerial framing with 32 KiB input blocks, as Java does.
* ``LZ4`` (3): the LZ4 frame format (magic 0x184D2204). Java's reader only accepts independent blocks, so we
  write block-independent frames (64 KiB blocks, no content size, no content checksum); reading accepts any
  valid frame, including several concatenated ones.
* ``ZSTD`` (4): zstd frames; reading accepts frames without a content size (what Java's streaming
  ``ZstdOutputStream`` writes) and several concatenated frames.

Levels (Kafka's KIP-390: ``compression.gzip.level``, ``compression.lz4.level``, ``compression.zstd.level``,
for a topic, a broker and a producer): :func:`compress` takes one, checked against Kafka's ranges
(:data:`LEVELS`); None is the codec's default. gzip takes 1 to 9 or -1 (zlib's default, 6, what Java's
``Deflater.DEFAULT_COMPRESSION`` means); zstd -131072 to 22 (default 3; 0 is zstd's own default, also 3);
lz4 1 to 17, default 9, where Kafka's ``Lz4BlockOutputStream`` uses lz4's fast compressor at the default
and its high compressor at any other level: here the default is lz4 frame level 0 (the fast compressor)
and another level is that frame level (lz4's frame library compresses level 1 with the fast compressor,
where lz4-java's high compressor takes it, and 2 and up with its high compressors). Snappy and no codec
have no level.

Decompression failures raise :class:`~broker.record.errors.CorruptRecordError` naming ``where``, and so does a
payload that would decompress to more than ``max_bytes`` (:data:`MAX_DECOMPRESSED_BYTES` by default): the
broker decompresses every produced batch to validate its records, and a few kilobytes of zstd or gzip can
claim gigabytes (a "decompression bomb"). The limit is enforced while decompressing: gzip with zlib's
``max_length``, snappy from its length header, lz4 and zstd into a bounded buffer (one anonymous mapping
per thread, reused: its pages are only committed as far as they are written).
"""

from __future__ import annotations

import mmap
import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import NamedTuple

import cramjam

from broker.record.errors import CorruptRecordError, UnsupportedCompressionError


class CompressionType(IntEnum):
    """Bits 0-2 of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024
_INT32_BE = struct.Struct(">i")
_GZIP_WBITS = 31  # gzip container
_GUNZIP_WBITS = 47  # gzip or zlib header, detected
_LZ4_FAST = 0  # lz4 frame level of the fast compressor, Kafka's at its default level


class CompressionLevels(NamedTuple):
    """A codec's compression levels as Kafka's ``CompressionType`` defines them."""

    lowest: int
    highest: int
    default: int

    def takes(self, level: int) -> bool:
        """Whether ``level`` is one of the codec's (the default too where it is outside the range: gzip's)."""
        return self.lowest <= level <= self.highest or level == self.default

    def describe(self) -> str:
        """The levels in words (config errors)."""
        text = f"an integer from {self.lowest} to {self.highest}"
        return text if self.lowest <= self.default <= self.highest else f"{text}, or {self.default}"


#: The codecs that take a level, with Kafka's ranges and defaults (``CompressionType.GZIP.minLevel()``...).
LEVELS: Mapping[CompressionType, CompressionLevels] = {
    CompressionType.GZIP: CompressionLevels(1, 9, -1),
    CompressionType.LZ4: CompressionLevels(1, 17, 9),
    CompressionType.ZSTD: CompressionLevels(-131072, 22, 3),
}

Buffer = bytes | bytearray | memoryview

#: The most bytes one batch's records may decompress to. A batch is at most ``max_message_bytes`` on the
#: wire (1 MiB by default); real records do not compress 64-fold, a bomb does.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_buffers = threading.local()


class _TooLargeError(Exception):
    """The payload decompresses to more than the limit."""


def compress(codec: CompressionType, data: Buffer, level: int | None = None) -> bytes:
    """``data`` compressed and framed for ``codec`` (``NONE`` returns the bytes unchanged) at ``level``
    (None: the codec's default; a level outside the codec's :data:`LEVELS` is a ValueError, and so is one
    for a codec without levels)."""
    if level is not None:
        levels = LEVELS.get(codec)
        if levels is None or not levels.takes(level):
            takes = "no level" if levels is None else levels.describe()
            raise ValueError(f"{codec.name.lower()} compression level {level}: it takes {takes}")
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        deflater = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec == CompressionType.SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == CompressionType.LZ4:
        frame_level = _LZ4_FAST if level is None or level == LEVELS[codec].default else level
        lz4_frame = cramjam.lz4.Compressor(level=frame_level, content_checksum=False, block_linked=False)
        lz4_frame.compress(data)
        return bytes(lz4_frame.finish())
    if codec == CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=LEVELS[codec].default if level is None else level))
    raise UnsupportedCompressionError("<compress>", f"unknown compression codec {int(codec)}")


def decompress(
    codec: CompressionType,
    data: Buffer,
    *,
    where: str,
    position: int | None = None,
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Undo :func:`compress` (and the other framings Kafka clients write); ``where`` names the source.

    More than ``max_bytes`` of output is refused (:class:`CorruptRecordError`), see the module docstring.
    """
    try:
        if codec == CompressionType.GZIP:
            return _gunzip(data, max_bytes)
        if codec == CompressionType.SNAPPY:
            view = memoryview(data)
            if view[:8] == XERIAL_MAGIC:
                return _xerial_snappy_decompress(view, where, position, max_bytes)
            _check_snappy_length(view, max_bytes)
            return bytes(cramjam.snappy.decompress_raw(view))
        if codec == CompressionType.LZ4:
            return _decompress_bounded(cramjam.lz4.decompress_into, data, max_bytes)
        if codec == CompressionType.ZSTD:
            return _decompress_bounded(cramjam.zstd.decompress_into, data, max_bytes)
        if codec == CompressionType.NONE:
            return bytes(data)
    except _TooLargeError:
        raise CorruptRecordError(
            where,
            f"{codec.name} records decompress to more than {max_bytes} bytes (the most a batch may hold)",
            position=position,
        ) from None
    except (zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(
            where, f"cannot decompress {codec.name} records: {exc}", position=position
        ) from exc
    raise UnsupportedCompressionError(where, f"unknown compression codec {int(codec)}", position=position)


def _decompress_bounded(decompress_into: Callable[..., int], data: Buffer, max_bytes: int) -> bytes:
    """Decompress into this thread's bounded buffer (more than ``max_bytes`` raises _TooLargeError)."""
    buffer: mmap.mmap | None = getattr(_buffers, "buffer", None)
    if buffer is None or len(buffer) <= max_bytes:
        buffer = mmap.mmap(-1, max_bytes + 1)
        _buffers.buffer = buffer
    try:
        size = decompress_into(data, buffer)
    except cramjam.DecompressionError as exc:
        if "failed to write whole buffer" in str(exc):
            raise _TooLargeError from exc
        raise
    if size > max_bytes:
        raise _TooLargeError
    return buffer[:size]


def _check_snappy_length(block: memoryview, max_bytes: int) -> int:
    """The uncompressed length a raw snappy block starts with (an unsigned varint), checked."""
    length = 0
    for i in range(min(len(block), 5)):
        length |= (block[i] & 0x7F) << (7 * i)
        if block[i] < 0x80:
            break
    if length > max_bytes:
        raise _TooLargeError
    return length


def _gunzip(data: Buffer, max_bytes: int) -> bytes:
    out: list[bytes] = []
    rest: Buffer = data
    left = max_bytes
    while True:
        inflater = zlib.decompressobj(_GUNZIP_WBITS)
        chunk = inflater.decompress(rest, left + 1)
        if len(chunk) > left:
            raise _TooLargeError
        left -= len(chunk)
        out.append(chunk)
        if not inflater.eof:
            raise zlib.error("gzip stream is truncated")
        rest = inflater.unused_data
        if not rest.strip(b"\x00"):  # trailing zero padding is what some gzip writers leave
            return b"".join(out)


def _xerial_snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    pack = _INT32_BE.pack
    raw_compress = cramjam.snappy.compress_raw
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block = bytes(raw_compress(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_snappy_decompress(view: memoryview, where: str, position: int | None, max_bytes: int) -> bytes:
    out: list[bytes] = []
    left = max_bytes
    pos = len(_XERIAL_HEADER)
    end = len(view)
    raw_decompress = cramjam.snappy.decompress_raw
    unpack_from = _INT32_BE.unpack_from
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(
                where, f"xerial snappy block length cut short at byte {pos} of {end}", position=position
            )
        (length,) = unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(
                where,
                f"xerial snappy block at byte {pos - 4} claims {length} bytes, {end - pos} remain",
                position=position,
            )
        left -= _check_snappy_length(view[pos : pos + length], left)
        out.append(bytes(raw_decompress(view[pos : pos + length])))
        pos += length
    return b"".join(out)
