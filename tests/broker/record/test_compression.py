from __future__ import annotations

import gzip
import io
import struct
import warnings

import cramjam
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.compression import LEVELS, XERIAL_MAGIC, CompressionType, compress, decompress
from broker.record.errors import CorruptRecordError, UnsupportedCompressionError

with warnings.catch_warnings():
    # kafka-python's protocol package calls importlib.resources.read_text, deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec

CODECS = list(CompressionType)
DATA = st.binary(max_size=200_000) | st.text(max_size=5000).map(lambda t: t.encode() * 7)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@settings(max_examples=30, deadline=None)
@given(data=DATA)
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), where="t") == data


def test_snappy_is_xerial_framed_in_32_kib_blocks() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: blocks of 32768, 32768, 11264
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    position = 16
    decoded = []
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        decoded.append(bytes(cramjam.snappy.decompress_raw(framed[position + 4 : position + 4 + length])))
        position += 4 + length
    assert [len(block) for block in decoded] == [32768, 32768, 11264]
    assert b"".join(decoded) == data


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    data = b"librdkafka writes one raw snappy block " * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(CompressionType.SNAPPY, raw, where="t") == data


def test_lz4_frames_have_independent_blocks_and_no_content_checksum() -> None:
    framed = compress(CompressionType.LZ4, b"abc" * 100_000)
    assert framed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic 0x184D2204, little-endian
    flg = framed[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence: Java's reader refuses dependent blocks
    assert not flg & 0x04  # no content checksum
    assert not flg & 0x08  # no content size


#: 233,370 bytes of access-log lines: compressible, and the same every run.
LOG_LINES = b"".join(b"GET /items/%d 200 user=%d agent=lumber-bench\n" % (i, i % 97) for i in range(5000))


@pytest.mark.parametrize(
    ("codec", "sizes"),
    [
        (CompressionType.GZIP, {None: 19_499, 1: 20_573, 6: 19_499, -1: 19_499}),
        (CompressionType.LZ4, {None: 37_987, 1: 37_987, 3: 36_017, 9: 37_987, 17: 35_329}),
        (CompressionType.ZSTD, {None: 10_166, -5: 28_275, 1: 10_231, 3: 10_166, 19: 8_512}),
    ],
    ids=lambda c: getattr(c, "name", ""),
)
def test_a_level_changes_the_bytes_and_every_level_reads_back(
    codec: CompressionType, sizes: dict[int | None, int]
) -> None:
    """Kafka's levels (KIP-390): the default (None) is gzip -1 (zlib's 6), lz4 9 (the fast compressor,
    as lz4 1 here) and zstd 3; zstd 19 is smaller than zstd 1, lz4 17 than lz4's fast compressor."""
    got = {level: compress(codec, LOG_LINES, level) for level in sizes}
    assert {level: len(framed) for level, framed in got.items()} == sizes
    for framed in got.values():
        assert decompress(codec, framed, where="t") == LOG_LINES
    assert len(LOG_LINES) == 233_370


@pytest.mark.parametrize("codec", list(LEVELS), ids=lambda c: c.name)
def test_the_ends_of_each_range_compress(codec: CompressionType) -> None:
    levels = LEVELS[codec]
    for level in (levels.lowest, levels.highest, levels.default):
        assert decompress(codec, compress(codec, b"abc" * 1000, level), where="t") == b"abc" * 1000


@pytest.mark.parametrize(
    ("codec", "level", "message"),
    [
        (CompressionType.GZIP, 0, "gzip compression level 0: it takes an integer from 1 to 9, or -1"),
        (CompressionType.GZIP, 10, "gzip compression level 10: it takes an integer from 1 to 9, or -1"),
        (CompressionType.LZ4, 18, "lz4 compression level 18: it takes an integer from 1 to 17"),
        (CompressionType.ZSTD, 23, "zstd compression level 23: it takes an integer from -131072 to 22"),
        (CompressionType.ZSTD, -131073, "zstd compression level -131073: it takes an integer from -131072"),
        (CompressionType.SNAPPY, 1, "snappy compression level 1: it takes no level"),
        (CompressionType.NONE, 1, "none compression level 1: it takes no level"),
    ],
)
def test_a_level_outside_the_codecs_range_is_refused(
    codec: CompressionType, level: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compress(codec, b"abc", level)


def test_gzip_with_several_members_and_zero_padding() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second") + b"\x00\x00"
    assert decompress(CompressionType.GZIP, data, where="t") == b"first second"


def test_zstd_without_content_size_as_java_streams_it() -> None:
    buffer = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
        writer.write(b"streamed by ZstdOutputStream " * 1000)
    framed = buffer.getvalue()
    assert zstandard.get_frame_parameters(framed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, framed, where="t") == b"streamed by ZstdOutputStream " * 1000


@pytest.mark.parametrize("codec", [c for c in CODECS if c != CompressionType.NONE], ids=lambda c: c.name)
def test_garbage_raises_corrupt_record_naming_the_source(codec: CompressionType) -> None:
    garbage = b"\x00\x01\x02 this is not compressed data \xff\xfe" * 3
    if codec == CompressionType.SNAPPY:
        garbage = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 1000) + b"short"
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, garbage, where="clicks-3", position=77)
    assert info.value.where == "clicks-3"
    assert info.value.position == 77
    assert codec.name in info.value.reason or "xerial" in info.value.reason


def test_truncated_gzip_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="GZIP"):
        decompress(CompressionType.GZIP, gzip.compress(b"x" * 1000)[:-9], where="t")


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(7, b"", where="t")  # type: ignore[arg-type]


@pytest.mark.interop
@pytest.mark.parametrize("codec", [c for c in CODECS if c != CompressionType.NONE], ids=lambda c: c.name)
def test_kafka_python_codecs_read_ours_and_we_read_theirs(codec: CompressionType) -> None:
    encode, decode = {
        CompressionType.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
        CompressionType.SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
        CompressionType.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
        CompressionType.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
    }[codec]
    data = b"interop between two independent implementations " * 2000
    assert decode(compress(codec, data)) == data
    assert decompress(codec, encode(data), where="t") == data


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_a_decompression_bomb_is_refused_at_the_limit(codec: CompressionType) -> None:
    """More output than ``max_bytes`` is refused while decompressing; exactly ``max_bytes`` passes."""
    limit = 256 * 1024
    exact = compress(codec, b"\x00" * limit)
    assert decompress(codec, exact, where="t-0", max_bytes=limit) == b"\x00" * limit
    bomb = compress(codec, b"\x00" * (limit + 1))
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, bomb, where="t-0", position=7, max_bytes=limit)
    assert f"{codec.name} records decompress to more than {limit} bytes" in str(info.value)
    assert info.value.position == 7
