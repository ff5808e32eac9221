"""The log cleaner's compaction on real logs and files (broker/log/log_cleaner.py, log_cleaner_manager.py):
against a dict replay, multi-pass under a small dedupe buffer, the rewritten batches' fields, the key readers
cleaning to the same bytes, tombstones and the compaction lag, each log's own config. Interrupted cleaning:
test_log_cleaner_interrupted.py; followers across the gaps: test_log_cleaner_followers.py; the cleaner in the
log manager: test_log_cleaner_running.py."""

from __future__ import annotations

import random
import time
from functools import partial
from pathlib import Path

import crc32c
import pytest

from broker.log.cleaner import Cleaner
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager, cleanable_section
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.record import Record
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.compacted_logs import (
    Op,
    append_ops,
    clean_all,
    first_dirty,
    log_map,
    new_cleaner,
    open_log,
    random_ops,
    read_bytes,
    read_records,
    replay,
)
from tests.broker.log.helpers import BASE_TS, config

# ---------------------------------------------------------------------------------------------- compaction


def test_random_puts_and_tombstones_over_10000_keys_compact_to_the_dict_replay(tmp_path: Path) -> None:
    rng = random.Random(20)
    log = open_log(tmp_path, delete_retention_ms=300)
    ops = random_ops(rng, 60_000, 10_000)
    append_ops(log, ops)
    log.roll()
    segments_before = len(log.segments)
    assert segments_before > 30
    end = log.log_end_offset
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    passes = clean_all(log_cleaner, cleaner)
    assert len(passes) == 1
    assert passes[0].end_offset == end
    assert first_dirty(tmp_path, log) == end
    expected = replay(ops)
    assert log_map(log) == expected
    records = read_records(log)
    # one record per key remains: its last put, or its last tombstone (kept: not yet delete_retention_ms old)
    last_offset: dict[bytes, int] = {}
    for offset, (key, _) in enumerate(ops):
        last_offset[key] = offset
    assert sorted(r.offset for r in records) == sorted(last_offset.values())
    assert {(r.key, r.value) for r in records} == {(k, ops[o][1]) for k, o in last_offset.items()}
    tombstones = sum(r.value is None for r in records)
    assert tombstones == len(last_offset) - len(expected) > 0
    assert len(log.segments) == segments_before  # grouped by their sizes before cleaning (Kafka's rule)
    assert log.log_end_offset == end
    # leader epochs and producer state are untouched by cleaning
    assert log.leader_epoch_cache.entries() == [(3, 0)]

    # KIP-534: the first cleaning stamped the tombstones' batches with a delete horizon of now + 300 ms
    assert {
        b.delete_horizon_ms is not None
        for b in scan_batches(read_bytes(log)).batches
        if any(r.value is None for r in b.records())
    } == {True}
    # a pass after the horizon drops them (a pass needs dirty data: more writes)
    for round_number in range(1):
        time.sleep(0.4)
        more = [(f"later-{round_number}-{i}".encode(), b"x") for i in range(2_000)]
        append_ops(log, more)
        log.roll()
        ops += more
        assert len(clean_all(log_cleaner, cleaner)) == 1
    records = read_records(log)
    assert [r for r in records if r.value is None] == []
    assert log_map(log) == replay(ops)
    assert len(records) == len(replay(ops))
    assert len(log.segments) < segments_before // 2  # the small cleaned segments were grouped
    log.close()
    reopened = open_log(tmp_path, delete_retention_ms=300)
    assert log_map(reopened) == replay(ops)
    reopened.close()


def test_a_rewritten_batch_keeps_offsets_timestamps_headers_producer_fields_epoch_and_codec(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    ops = [(f"k{i % 3}".encode(), f"v{i}".encode()) for i in range(9)]
    for codec in (CompressionType.GZIP, CompressionType.ZSTD):
        first = codec == CompressionType.GZIP
        builder = RecordBatchBuilder(codec, producer_id=77, producer_epoch=2, base_sequence=0 if first else 9)
        for i, (key, value) in enumerate(ops):
            builder.append(BASE_TS + 10 * i, key, value, [("host", b"h" + key)])
        log.append(builder.build(), leader_epoch=5)
        filler = RecordBatchBuilder(codec, producer_id=78, producer_epoch=0, base_sequence=0 if first else 1)
        filler.append(BASE_TS, b"other", b"x")
        log.append(filler.build(), leader_epoch=5)
    log.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    clean_all(log_cleaner, cleaner)
    data = b"".join(s.path.read_bytes() for s in log.segments)
    batches = scan_batches(data).batches
    # batch 1 (gzip, offsets 0-8) lost every record: superseded by batch 3; not producer 77's last batch
    # batch 2 (producer 78's offset 9) lost its record to offset 19 and goes too
    # batch 3 (zstd, offsets 10-18) keeps its last three records; batch 4 (offset 19) is whole
    assert [(b.base_offset, b.last_offset, b.record_count) for b in batches] == [(10, 18, 3), (19, 19, 1)]
    rewritten = batches[0]
    rewritten.validate()
    assert rewritten.compression == CompressionType.ZSTD
    assert (rewritten.producer_id, rewritten.producer_epoch, rewritten.base_sequence) == (77, 2, 9)
    assert rewritten.partition_leader_epoch == 5
    assert rewritten.first_timestamp_ms == BASE_TS
    assert rewritten.max_timestamp_ms == BASE_TS + 80
    assert rewritten.records() == [
        Record(
            10 + i,
            BASE_TS + 10 * i,
            f"k{i % 3}".encode(),
            f"v{i}".encode(),
            (("host", b"hk" + str(i % 3).encode()),),
        )
        for i in (6, 7, 8)
    ]
    log.close()


def test_a_dedupe_buffer_too_small_for_the_dirty_keys_cleans_in_several_passes_to_the_same_result(
    tmp_path: Path,
) -> None:
    rng = random.Random(21)
    ops = random_ops(rng, 30_000, 10_000)
    small = open_log(tmp_path / "small")
    large = open_log(tmp_path / "large")
    for log in (small, large):
        append_ops(log, ops)
        log.roll()
    small_cleaner, small_thread = new_cleaner(tmp_path / "small", [small], dedupe_bytes=64 * 1024)
    assert small_thread.offset_map.max_entries < 2_500
    passes = clean_all(small_cleaner, small_thread)
    assert len(passes) >= 4
    assert [p.end_offset for p in passes] == sorted({p.end_offset for p in passes})
    assert passes[-1].end_offset == small.log_end_offset
    assert all(p.map_keys <= small_thread.offset_map.max_entries for p in passes)
    large_cleaner, large_thread = new_cleaner(tmp_path / "large", [large])
    assert len(clean_all(large_cleaner, large_thread)) == 1
    assert read_records(small) == read_records(large)
    assert log_map(small) == log_map(large) == replay(ops)
    small.close()
    large.close()


def test_the_key_columns_and_the_record_walk_clean_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two readers the batches choose between for the cleaner's key columns, the compiled loop and the
    walk (where the loop declines), write the same segments, pass after pass: varied sizes, tombstones
    (stamped, then dropped), headers, a codec, batches past 64 records."""
    rng = random.Random(22)
    now = [BASE_TS + 10_000_000]
    logs: dict[str, tuple[Log, LogCleaner, Cleaner]] = {}
    for way in ("columns", "walk"):
        log = open_log(tmp_path / way, delete_retention_ms=1_000)
        log_config = config(tmp_path / way, cleaner_dedupe_buffer_bytes=64 * 1024)
        root = tmp_path / way
        manager = LogCleanerManager([root], partial(dict, {root: [log]}), lambda: now[0])
        log_cleaner = LogCleaner(log_config, manager, clock=lambda: now[0])
        logs[way] = (log, log_cleaner, log_cleaner.new_cleaner())
    ops: list[Op] = []
    for round_number in range(3):
        more = random_ops(rng, 6_000, 3_000, tombstones=0.2)
        more = [(k, None if v is None else v * rng.randrange(1, 4)) for k, v in more]
        ops += more
        for way, (log, log_cleaner, cleaner) in logs.items():
            append_ops(log, more[:3_000], per_batch=100, headers=True)
            append_ops(log, more[3_000:], per_batch=70, codec=CompressionType.GZIP)
            log.roll()
            if way == "walk":
                decline_the_compiled_key_columns(monkeypatch)
            passes = clean_all(log_cleaner, cleaner)
            monkeypatch.undo()
            assert len(passes) >= 2  # the small map: several passes
        columns_log, walk_log = logs["columns"][0], logs["walk"][0]
        assert read_bytes(columns_log) == read_bytes(walk_log), f"round {round_number}"
        assert log_map(columns_log) == replay(ops)
        now[0] += 2_000  # past the horizon of the tombstones stamped so far
    for log, log_cleaner, cleaner in logs.values():
        cleaner.close()
        log_cleaner.shutdown()  # the replaced segments' descriptors go now, not 60 s later
        log.close()


def decline_the_compiled_key_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled loop of the key columns declines every batch: the batches' reader walks them."""
    monkeypatch.setattr("broker.record.record_batch.key_columns", lambda *args, **kwargs: None)
    monkeypatch.setattr("broker.record.record_batch.key_columns_in", lambda *args, **kwargs: None)


def log_append_time(batch: bytes) -> bytes:
    """``batch`` marked LogAppendTime (attribute bit 3, its CRC recomputed): every record reads as the
    batch's max timestamp."""
    data = bytearray(batch)
    attributes = int.from_bytes(data[21:23], "big") | 0x08
    data[21:23] = attributes.to_bytes(2, "big")
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    return bytes(data)


def test_the_chunk_columns_the_batch_columns_and_the_walk_clean_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleaner's three ways through a log: by the columns of whole chunks read from a segment (the
    fast path: uncompressed data batches), by batch objects with their key columns, and with the key
    columns of the walk (the compiled loop declining) by both, write the same segments pass after pass:
    chunks of few records (so segments hold many chunks and the map covers only part of them), several
    passes (a small map), uncompressed and gzip batches mixed in one segment, tombstones stamped then
    dropped, headers, varied sizes, batches past 64 records, LogAppendTime batches, idempotent producers
    (a batch that loses every record stays empty when it is its producer's last: producer 900 writes in
    the first round only, so its last batch is emptied by the later rounds), reads of 4 KiB (the larger
    batches read whole on their own)."""
    monkeypatch.setattr("broker.log.cleaner_chunk.CHUNK_RECORDS", 700)
    monkeypatch.setattr("broker.log.cleaner_chunk.MAX_CHUNK_BYTES", 4 * 1024)
    rng = random.Random(23)
    now = [BASE_TS + 10_000_000]
    ways = ("chunks", "batches", "walk")
    logs: dict[str, tuple[Log, LogCleaner, Cleaner]] = {}
    for way in ways:
        root = tmp_path / way
        log = open_log(root, delete_retention_ms=1_000, segment_bytes=256 * 1024)
        log_config = config(root, cleaner_dedupe_buffer_bytes=64 * 1024)
        manager = LogCleanerManager([root], partial(dict, {root: [log]}), lambda: now[0])
        log_cleaner = LogCleaner(log_config, manager, clock=lambda: now[0])
        logs[way] = (log, log_cleaner, log_cleaner.new_cleaner())
    ops: list[Op] = []
    sequences = {900: 0, 901: 0}
    for round_number in range(3):
        more = random_ops(rng, 8_000, 2_500, tombstones=0.15)
        more = [(k, None if v is None else v * rng.randrange(1, 5)) for k, v in more]
        ops += more
        batches: list[bytes] = []
        start = 0
        while start < len(more):
            size = rng.choice((1, 7, 70, 130))
            codec = CompressionType.GZIP if rng.random() < 0.2 else CompressionType.NONE
            producer = rng.choice((-1, 900, 901) if round_number == 0 else (-1, 901))
            builder = RecordBatchBuilder(
                codec,
                producer_id=producer,
                producer_epoch=0 if producer >= 0 else -1,
                base_sequence=sequences.get(producer, -1),
            )
            for key, value in more[start : start + size]:
                builder.append(BASE_TS + rng.randrange(1_000), key, value, [("h", key)] if size == 7 else ())
            if producer >= 0:
                sequences[producer] += builder.record_count
            built = builder.build()
            if codec == CompressionType.NONE and rng.random() < 0.1:
                built = log_append_time(built)
            batches.append(built)
            start += size
        for way, (log, log_cleaner, cleaner) in logs.items():
            for batch in batches:
                log.append(batch, leader_epoch=round_number)
            log.roll()
            if way != "chunks":
                monkeypatch.setattr("broker.log.cleaner_chunk.CleanerChunk.plain", property(lambda _: False))
            if way == "walk":
                decline_the_compiled_key_columns(monkeypatch)
            passes = clean_all(log_cleaner, cleaner)
            monkeypatch.undo()
            monkeypatch.setattr("broker.log.cleaner_chunk.CHUNK_RECORDS", 700)
            monkeypatch.setattr("broker.log.cleaner_chunk.MAX_CHUNK_BYTES", 4 * 1024)
            assert len(passes) >= 2  # the small map: several passes
        chunks_log = logs["chunks"][0]
        for way in ways[1:]:
            assert read_bytes(chunks_log) == read_bytes(logs[way][0]), f"round {round_number}: {way}"
        assert log_map(chunks_log) == replay(ops)
        now[0] += 2_000  # past the horizon of the tombstones stamped so far
    # every emptied batch was dropped, but producer 900's last (its sequence) and the one ending at the
    # last pass's upper bound (the log end: Kafka keeps it whether or not it is empty)
    final = scan_batches(read_bytes(logs["chunks"][0])).batches
    end = logs["chunks"][0].log_end_offset
    empty = [b for b in final if b.record_count == 0]
    kept_for_producers = [
        (b.producer_id, b.base_sequence + b.last_offset_delta) for b in empty if b.next_offset != end
    ]
    assert kept_for_producers == [(900, sequences[900] - 1)]
    for log, log_cleaner, cleaner in logs.values():
        cleaner.close()
        log_cleaner.shutdown()  # the replaced segments' descriptors go now, not 60 s later
        log.close()


def test_records_younger_than_the_compaction_lag_stay(tmp_path: Path) -> None:
    log = open_log(tmp_path, min_compaction_lag_ms=3_600_000)
    old = [(f"k{i % 100}".encode(), f"old{i}".encode()) for i in range(2_000)]
    append_ops(log, old, timestamp_ms=BASE_TS)
    log.roll()
    young_start = log.log_end_offset
    now = int(time.time() * 1000)
    young = [(f"k{i % 100}".encode(), f"young{i}".encode()) for i in range(2_000)]
    append_ops(log, young, timestamp_ms=now)
    log.roll()
    young_bytes = [s.path.read_bytes() for s in log.segments if s.base_offset >= young_start]
    section = cleanable_section(log, tmp_path, None, now)
    assert section.first_uncleanable_offset == young_start
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    passes = clean_all(log_cleaner, cleaner)
    assert [p.end_offset for p in passes] == [young_start]
    # the young segments are byte for byte what was written; the old part keeps one record per key
    assert [s.path.read_bytes() for s in log.segments if s.base_offset >= young_start] == young_bytes
    records = read_records(log)
    assert [r.offset for r in records if r.offset < young_start] == list(
        range(young_start - 100, young_start)
    )
    assert [r.offset for r in records if r.offset >= young_start] == list(
        range(young_start, log.log_end_offset)
    )
    assert log_map(log) == replay(old + young)
    log.close()


def test_the_cleaner_reads_each_logs_own_config_on_each_pass(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="delete")
    append_ops(log, [(b"k", b"v1"), (b"k", b"v2")], per_batch=1)
    log.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    assert clean_all(log_cleaner, cleaner) == []  # not compacted: left alone
    log.update_config(
        log.config.model_copy(update={"cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.9})
    )
    assert [p.end_offset for p in clean_all(log_cleaner, cleaner)] == [2]  # dirty ratio 1.0
    assert [(r.offset, r.value) for r in read_records(log)] == [(1, b"v2")]
    append_ops(log, [(b"k", b"v3")])
    log.roll()
    assert clean_all(log_cleaner, cleaner) == []  # dirty ratio about 0.5, below 0.9
    log.update_config(log.config.model_copy(update={"min_cleanable_dirty_ratio": 0.4}))
    assert [p.end_offset for p in clean_all(log_cleaner, cleaner)] == [3]
    assert [(r.offset, r.value) for r in read_records(log)] == [(2, b"v3")]
    log.close()
