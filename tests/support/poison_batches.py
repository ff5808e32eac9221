"""Record batches that are CRC-valid but whose records are not (the poison a buggy producer can send).

:func:`forge_batch` frames any record bytes as a batch v2 with a correct CRC, so that only the record walk
(:mod:`broker.log.log_validator`) can refuse it. :func:`record` encodes one record field by field, with
every length and delta under the test's control.
"""

from __future__ import annotations

import random
import struct

import crc32c

from broker.record.compression import CompressionType, compress
from broker.record.varint import encode_varint

BASE_TS = 1_700_000_000_000
_BEFORE_CRC = struct.Struct(">qiib")
_FROM_ATTRIBUTES = struct.Struct(">hiqqqhii")


def record(
    offset_delta: int,
    value: bytes | None = b"value",
    *,
    key: bytes | None = b"key",
    length_delta: int = 0,
    key_length: int | None = None,
    header_bytes: bytes = b"\x00",
) -> bytes:
    """One record; ``length_delta`` skews its length prefix, ``key_length`` its key length varint."""
    body = b"".join(
        (
            b"\x00",  # attributes
            encode_varint(offset_delta),  # timestamp delta
            encode_varint(offset_delta),
            encode_varint((len(key) if key is not None else -1) if key_length is None else key_length),
            key or b"",
            encode_varint(len(value) if value is not None else -1),
            value or b"",
            header_bytes,
        )
    )
    return encode_varint(len(body) + length_delta) + body


def records(count: int) -> bytes:
    """``count`` well-formed records with offset deltas 0..count-1."""
    return b"".join(record(i, f"value-{i}".encode()) for i in range(count))


def forge_batch(
    payload: bytes,
    count: int,
    *,
    attributes: int = 0,
    compress_with: CompressionType = CompressionType.NONE,
    last_offset_delta: int | None = None,
) -> bytes:
    """``payload`` (the records, compressed with ``compress_with`` if given) as a CRC-valid batch v2 that
    claims ``count`` records; ``attributes`` default to the codec's id."""
    data = compress(compress_with, payload) if compress_with != CompressionType.NONE else payload
    attributes = attributes or int(compress_with)
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    tail = _FROM_ATTRIBUTES.pack(attributes, delta, BASE_TS, BASE_TS + max(delta, 0), -1, -1, -1, count)
    crc = crc32c.crc32c(data, crc32c.crc32c(tail))
    head = _BEFORE_CRC.pack(0, 49 + len(data), -1, 2) + struct.pack(">I", crc)
    return head + tail + data


def random_records_batch(seed: int, size: int = 200, count: int = 5) -> bytes:
    """Random record bytes under a valid header and CRC."""
    return forge_batch(random.Random(seed).randbytes(size), count)


def gzip_flag_on_plain_records(count: int = 3) -> bytes:
    """Well-formed uncompressed records under a header whose codec says gzip."""
    return forge_batch(records(count), count, attributes=int(CompressionType.GZIP))


def record_length_past_the_end(count: int = 3) -> bytes:
    """The last record's length prefix says 1,000 bytes more than the batch holds."""
    body = records(count - 1) + record(count - 1, length_delta=1000)
    return forge_batch(body, count)


def record_count_mismatch(actual: int = 3, claimed: int = 5) -> bytes:
    """``actual`` well-formed records under a header (and lastOffsetDelta) claiming ``claimed``."""
    return forge_batch(records(actual), claimed)
