"""The log validator: every rejection reason, and what a refused append leaves behind (nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.errors import BrokerError
from broker.log.errors import LogError, OutOfOrderSequenceError, RecordTooLargeError
from broker.log.log import Log
from broker.log.log_validator import validate_append, validate_batches, validate_stored_batch
from broker.record.batch_header import TimestampType
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    UnsupportedCompressionError,
)
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.server.error_codes import error_code_of
from tests.broker.log.helpers import BASE_TS, config, make_batch, read_all
from tests.support.poison_batches import (
    forge_batch,
    gzip_flag_on_plain_records,
    random_records_batch,
    record,
    record_count_mismatch,
    record_length_past_the_end,
    records,
)

MAX = 1024 * 1024


def check(data: bytes, *, validate_records: bool = True) -> None:
    batches = scan_batches(data, where="t-0 append").batches
    validate_batches(batches, where="t-0 append", max_message_bytes=MAX, validate_records=validate_records)


def refused(data: bytes) -> BrokerError:
    with pytest.raises((LogError, RecordError)) as info:
        check(data)
    return info.value


@pytest.mark.parametrize("codec", list(CompressionType))
def test_well_formed_batches_pass_in_every_codec(codec: CompressionType) -> None:
    builder = RecordBatchBuilder(codec)
    for i in range(50):
        builder.append(1000 + i, f"k{i}".encode(), b"v" * 100, (("host", b"h1"), ("n", None)))
    data = builder.build()
    result = validate_batches(scan_batches(data + make_batch(0, 3)).batches, where="w", max_message_bytes=MAX)
    assert (result.record_count, result.max_timestamp_ms) == (53, 1_700_000_000_002)
    validate_stored_batch(RecordBatch(data))
    assert len(list(RecordBatch(data).records())) == 50


def test_forged_well_formed_records_pass() -> None:
    check(forge_batch(records(7), 7))
    check(forge_batch(records(7), 7, compress_with=CompressionType.LZ4))
    check(forge_batch(records(7), 7, compress_with=CompressionType.GZIP))


def test_random_record_bytes_are_corrupt() -> None:
    for seed in range(20):
        error = refused(random_records_batch(seed))
        assert isinstance(error, (CorruptRecordError, InvalidRecordError)), error
        assert error_code_of(error) in (2, 87)


def test_gzip_flag_on_a_plain_payload() -> None:
    error = refused(gzip_flag_on_plain_records())
    assert type(error) is CorruptRecordError
    assert error_code_of(error) == 2
    assert "cannot decompress GZIP records" in str(error)
    assert "t-0 append" in str(error)


def test_record_length_past_the_batch_end() -> None:
    error = refused(record_length_past_the_end())
    assert type(error) is CorruptRecordError
    assert "record #2: record length" in str(error)


@pytest.mark.parametrize(("actual", "claimed", "reason"), [(3, 5, "holds 3"), (5, 3, "bytes are left")])
def test_record_count_not_matching_the_records(actual: int, claimed: int, reason: str) -> None:
    error = refused(record_count_mismatch(actual, claimed))
    assert type(error) is InvalidRecordError
    assert error_code_of(error) == 87
    assert f"the header counts {claimed} records" in str(error)
    assert reason in str(error)


def test_decompressed_data_must_be_consumed_exactly() -> None:
    error = refused(forge_batch(records(4) + b"\x00\x00", 4, compress_with=CompressionType.LZ4))
    assert type(error) is InvalidRecordError
    assert "2 bytes are left after them" in str(error)


def test_offset_deltas_must_count_up() -> None:
    body = record(0) + record(2) + record(1)
    error = refused(forge_batch(body, 3))
    assert type(error) is InvalidRecordError
    assert "record #1: offset delta 2, expected 1" in str(error)


def test_record_length_longer_than_its_fields() -> None:
    error = refused(forge_batch(record(0, length_delta=1) + b"\x00", 1))
    assert type(error) is CorruptRecordError
    assert "record #0: record length says" in str(error)


def test_key_length_past_the_record() -> None:
    error = refused(forge_batch(record(0, key_length=40), 1))
    assert type(error) is CorruptRecordError
    assert "key length 40 runs past the record's end" in str(error)


def test_negative_key_length_other_than_null() -> None:
    error = refused(forge_batch(record(0, key_length=-3), 1))
    assert type(error) is CorruptRecordError
    assert "key length -3" in str(error)


def test_varint_longer_than_ten_bytes() -> None:
    body = b"\x14\x00" + b"\xff" * 11 + b"\x00" * 8
    error = refused(forge_batch(body, 1))
    assert type(error) is CorruptRecordError
    assert "record #0" in str(error)


def test_header_key_not_utf8() -> None:
    headers = b"\x02" + b"\x04" + b"\xff\xfe" + b"\x01"  # one header, key of 2 bytes, null value
    error = refused(forge_batch(record(0, header_bytes=headers), 1))
    assert type(error) is CorruptRecordError
    assert "header key is not UTF-8" in str(error)


def test_header_level_checks() -> None:
    good = make_batch(0, 3)
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    assert "expected CRC" in str(refused(bytes(flipped)))
    bad_codec = forge_batch(records(1), 1, attributes=7)
    assert type(refused(bad_codec)) is UnsupportedCompressionError
    assert "lastOffsetDelta 5 does not match" in str(refused(forge_batch(records(3), 3, last_offset_delta=5)))
    assert "must hold records" in str(refused(forge_batch(b"", 0)))
    control = forge_batch(records(1), 1, attributes=0x20)
    assert "control batches" in str(refused(control))
    with pytest.raises(RecordTooLargeError):
        validate_batches(scan_batches(good).batches, where="w", max_message_bytes=len(good) - 1)


def test_validation_off_checks_only_the_header() -> None:
    check(gzip_flag_on_plain_records(), validate_records=False)
    with pytest.raises(CorruptRecordError):
        check(gzip_flag_on_plain_records(), validate_records=True)


def test_a_refused_append_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path))
    try:
        log.append(make_batch(0, 3))
        size = log.size_bytes
        # a good batch followed by a poisoned one in the same request: neither is appended
        with pytest.raises(InvalidRecordError):
            log.append(make_batch(3, 2) + record_count_mismatch())
        with pytest.raises(CorruptRecordError):
            log.append(gzip_flag_on_plain_records())
        assert (log.log_end_offset, log.size_bytes) == (3, size)
        assert log.append(make_batch(3, 2)).first_offset == 3
    finally:
        log.close()


def test_a_zstd_bomb_is_refused_without_exhausting_memory() -> None:
    """65 MiB of zeros compress to a few kilobytes of zstd: the validator refuses the batch at the
    64 MiB limit instead of materialising whatever it claims."""
    bomb = forge_batch(b"\x00" * (65 * 1024 * 1024), 1, compress_with=CompressionType.ZSTD)
    assert len(bomb) < 64 * 1024
    error = refused(bomb)
    assert type(error) is CorruptRecordError
    assert "ZSTD records decompress to more than 67108864 bytes" in str(error)


# -- step 6: the topic's compression.type


def idempotent_batch(codec: CompressionType, base_sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(codec, producer_id=11, producer_epoch=2, base_sequence=base_sequence)
    for i in range(count):
        builder.append(BASE_TS + i, f"k{base_sequence + i}".encode(), b"GET /index.html 200 " * 10)
    return builder.build()


def stored_batches(log: Log) -> list[RecordBatch]:
    region = log.read(log.log_start_offset, 1 << 20)
    assert region is not None
    batches = list(scan_batches(region.read_bytes()).batches)
    for batch in batches:
        batch.validate()
    return batches


def test_the_topic_codec_recompresses_each_batch_of_another_codec() -> None:
    lz4, plain = make_batch(0, 5, codec=CompressionType.LZ4), make_batch(5, 2)
    zstd = make_batch(7, 3, codec=CompressionType.ZSTD)
    validated = validate_append(
        lz4 + plain + zstd, where="t-0 append", max_message_bytes=MAX, target_codec=CompressionType.ZSTD
    )
    assert [b.compression for b in validated.batches] == [CompressionType.ZSTD] * 3
    assert validated.batches[2].buffer == zstd  # already zstd: kept as it is
    assert [b.records_data() for b in validated.batches] == [
        RecordBatch(lz4).records_data(),
        RecordBatch(plain).records_data(),
        RecordBatch(zstd).records_data(),
    ]
    assert (validated.record_count, validated.size_bytes) == (
        10,
        sum(b.size_bytes for b in validated.batches),
    )
    assert validated.size_bytes != len(lz4 + plain + zstd)


@pytest.mark.parametrize(
    ("target", "data"),
    [
        (None, make_batch(0, 5, codec=CompressionType.LZ4)),  # producer: the producer's codec
        (CompressionType.NONE, make_batch(0, 5)),  # uncompressed, and so is the batch
        (CompressionType.LZ4, make_batch(0, 5, codec=CompressionType.LZ4)),
    ],
)
def test_a_batch_of_the_topics_codec_is_not_copied(target: CompressionType | None, data: bytes) -> None:
    scanned = scan_batches(data).batches
    validated = validate_append(data, where="t-0 append", max_message_bytes=MAX, target_codec=target)
    assert validated.batches[0].buffer.obj is scanned[0].buffer.obj  # the request's own bytes
    assert validated.size_bytes == len(data)


def test_a_batch_too_large_once_recompressed_is_refused() -> None:
    """A zstd batch of 2,000 records is 21,982 bytes; stored uncompressed it is over the limit: the
    request is refused after the recompression, as Kafka's append refuses it."""
    data = make_batch(0, 2_000, codec=CompressionType.ZSTD, value_size=100)
    assert len(data) == 21_982
    with pytest.raises(RecordTooLargeError) as info:
        validate_append(data, where="t-0 append", max_message_bytes=32_768, target_codec=CompressionType.NONE)
    assert str(info.value) == (
        "t-0 append (recompressed: compression.type uncompressed): record batch at position 0 is 230823 "
        "bytes, larger than max_message_bytes 32768"
    )
    assert error_code_of(info.value) == 10  # MESSAGE_TOO_LARGE


def test_a_log_stores_the_topics_codec_and_keeps_the_idempotent_producers_state(tmp_path: Path) -> None:
    directory = tmp_path / "gz-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path, compression_type="gzip"))
    try:
        first = log.append(idempotent_batch(CompressionType.LZ4, 0, 4), leader_epoch=3)
        second = log.append(idempotent_batch(CompressionType.NONE, 4, 3), leader_epoch=3)
        again = log.append(idempotent_batch(CompressionType.LZ4, 0, 4), leader_epoch=3)  # a retry
        assert (first.first_offset, first.last_offset, second.first_offset, second.last_offset) == (
            0,
            3,
            4,
            6,
        )
        assert (again.duplicate, again.first_offset, again.last_offset) == (True, 0, 3)
        batches = stored_batches(log)
        assert [
            (b.base_offset, b.last_offset, b.compression, b.partition_leader_epoch, b.base_sequence)
            for b in batches
        ] == [(0, 3, CompressionType.GZIP, 3, 0), (4, 6, CompressionType.GZIP, 3, 4)]
        assert [(b.producer_id, b.producer_epoch) for b in batches] == [(11, 2), (11, 2)]
        records = [r for b in batches for r in b.records()]
        assert [(r.offset, r.key, r.timestamp_ms) for r in records] == [
            (i, f"k{i}".encode(), BASE_TS + (i if i < 4 else i - 4)) for i in range(7)
        ]
        assert log.size_bytes == sum(b.size_bytes for b in batches) == first.size_bytes + second.size_bytes
        with pytest.raises(OutOfOrderSequenceError):  # the sequence continues at 7
            log.append(idempotent_batch(CompressionType.LZ4, 9, 1))
    finally:
        log.close()


def test_log_append_time_stamps_the_recompressed_batch_and_a_follower_copies_it(tmp_path: Path) -> None:
    now_ms = BASE_TS + 60_000
    (tmp_path / "leader-0").mkdir()
    (tmp_path / "follower-0").mkdir()
    settings = config(tmp_path, compression_type="zstd", message_timestamp_type="LogAppendTime")
    leader = Log(tmp_path / "leader-0", settings, clock=lambda: now_ms)
    follower = Log(tmp_path / "follower-0", settings.model_copy(update={"compression_type": "snappy"}))
    try:
        leader.append(make_batch(0, 3, codec=CompressionType.GZIP), leader_epoch=0)
        (batch,) = stored_batches(leader)
        assert (batch.compression, batch.timestamp_type, batch.max_timestamp_ms) == (
            CompressionType.ZSTD,
            TimestampType.LOG_APPEND_TIME,
            now_ms,
        )
        assert [r.timestamp_ms for r in batch.records()] == [now_ms] * 3
        region = leader.read(0, 1 << 20)
        assert region is not None
        follower.append_as_follower(region.read_bytes())  # no recompression: the leader's bytes
        again = follower.read(0, 1 << 20)
        assert again is not None
        assert again.read_bytes() == region.read_bytes()
    finally:
        leader.close()
        follower.close()


def test_the_topics_level_recompresses_and_a_batch_of_its_codec_keeps_its_level() -> None:
    """KIP-390: a batch of another codec is recompressed at the topic's level (zstd 19 smaller than zstd 1,
    the same records); a zstd batch stays as its producer compressed it, at whatever level, as Kafka's
    LogValidator decides by codec alone (``inPlaceAssignment``)."""
    gzip = make_batch(0, 500, codec=CompressionType.GZIP, value_size=200)
    at = {
        level: validate_append(
            gzip,
            where="t-0 append",
            max_message_bytes=MAX,
            target_codec=CompressionType.ZSTD,
            target_level=level,
        ).batches[0]
        for level in (1, 19, None)
    }
    assert [b.compression for b in at.values()] == [CompressionType.ZSTD] * 3
    assert {level: b.size_bytes for level, b in at.items()} == {1: 5_113, 19: 3_948, None: 6_776}
    assert {b.records_data() for b in at.values()} == {RecordBatch(gzip).records_data()}
    zstd_1 = RecordBatchBuilder(CompressionType.ZSTD, level=1)
    for i in range(50):
        zstd_1.append(BASE_TS + i, f"k{i}".encode(), b"GET /index.html 200 " * 10)
    kept = zstd_1.build()
    validated = validate_append(
        kept, where="t-0 append", max_message_bytes=MAX, target_codec=CompressionType.ZSTD, target_level=19
    )
    assert validated.batches[0].buffer == kept


def test_a_log_recompresses_at_its_topics_level_and_reads_back_every_record(tmp_path: Path) -> None:
    records_sent = [
        (f"k{i}".encode(), f"GET /items/{i} 200 user={i % 97} agent=lumber\n".encode() * 4)
        for i in range(400)
    ]
    sizes = {}
    for level in (1, 19):
        directory = tmp_path / f"zstd{level}-0"
        directory.mkdir()
        log = Log(directory, config(tmp_path, compression_type="zstd", compression_zstd_level=level))
        try:
            for first in range(0, 400, 100):
                lz4 = RecordBatchBuilder(CompressionType.LZ4)
                for i, (key, value) in enumerate(records_sent[first : first + 100]):
                    lz4.append(BASE_TS + first + i, key, value)
                log.append(lz4.build(), leader_epoch=0)
            batches = stored_batches(log)
            assert [(b.base_offset, b.compression) for b in batches] == [
                (0, CompressionType.ZSTD),
                (100, CompressionType.ZSTD),
                (200, CompressionType.ZSTD),
                (300, CompressionType.ZSTD),
            ]
            assert [(r.offset, r.key, r.value) for r in read_all(log)] == [
                (i, key, value) for i, (key, value) in enumerate(records_sent)
            ]
            sizes[level] = log.size_bytes
        finally:
            log.close()
    assert sizes == {1: 4_805, 19: 4_088}
