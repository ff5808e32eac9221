"""The log cleaner on real logs and files (broker/log/log_cleaner.py, log_cleaner_manager.py,
segment_swap.py): compaction against a dict replay, multi-pass, tombstones, the compaction lag, the swap's
crash states, followers across the gaps, retention and the validator on compacted logs."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import crc32c
import pytest

from broker import compiled
from broker.clock import system_clock_ms
from broker.log.checkpoint import read_checkpoint
from broker.log.cleaner import Cleaner
from broker.log.cleaner_stats import CleanerStats
from broker.log.errors import CleaningAbortedError
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.kernel_load import load_kernels
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import CleaningState, LogCleanerManager, cleanable_section
from broker.log.log_manager import LogManager
from broker.log.log_verifier import verify_partition
from broker.log.offset_map import OffsetMap
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.errors import InvalidRecordError
from broker.record.record import Record
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.broker.log.helpers import BASE_TS, config

Op = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


def open_log(root: Path, name: str = "compacted-0", **overrides: object) -> Log:
    values: dict[str, object] = {
        "cleanup_policy": "compact",
        "segment_bytes": 64 * 1024,
        "min_cleanable_dirty_ratio": 0.0,
        "delete_retention_ms": 86_400_000,
        "cleaner_dedupe_buffer_bytes": 4 * 1024 * 1024,
    }
    values.update(overrides)
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    return Log(directory, config(root, **values))


def append_ops(
    log: Log,
    ops: Sequence[Op],
    *,
    per_batch: int = 50,
    timestamp_ms: int = BASE_TS,
    codec: CompressionType = CompressionType.NONE,
    headers: bool = False,
) -> None:
    for start in range(0, len(ops), per_batch):
        builder = RecordBatchBuilder(codec)
        for key, value in ops[start : start + per_batch]:
            builder.append(timestamp_ms, key, value, [("h", key)] if headers else ())
        log.append(builder.build(), leader_epoch=3)


def random_ops(rng: random.Random, count: int, keys: int, tombstones: float = 0.1) -> list[Op]:
    ops: list[Op] = []
    for i in range(count):
        key = f"key-{rng.randrange(keys):05d}".encode()
        value = None if rng.random() < tombstones else f"v{i}-{rng.random()}".encode()
        ops.append((key, value))
    return ops


def replay(ops: Iterable[Op], into: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
    state = {} if into is None else into
    for key, value in ops:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def read_records(log: Log) -> list[Record]:
    """Every record of the log through reads (as a consumer fetches: each read from the last batch's next
    offset), checking every batch's CRC and that offsets strictly increase."""
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 256 * 1024, max_offset=log.log_end_offset)
        if region is None:
            break
        scan = scan_batches(region.read_bytes())
        assert scan.partial_tail_bytes == 0
        for batch in scan.batches:
            batch.validate()
            assert batch.base_offset >= offset
            records.extend(batch.records())
            offset = batch.next_offset
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    return records


def read_bytes(log: Log) -> bytes:
    return b"".join(s.path.read_bytes() for s in log.segments)


def log_map(log: Log) -> dict[bytes, bytes]:
    state: dict[bytes, bytes] = {}
    for record in read_records(log):
        assert record.key is not None
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = record.value
    return state


def new_cleaner(
    root: Path, logs: list[Log], dedupe_bytes: int = 4 * 1024 * 1024
) -> tuple[LogCleaner, Cleaner]:
    log_config = config(root, cleaner_dedupe_buffer_bytes=dedupe_bytes)
    manager = LogCleanerManager([root], lambda: {root: logs}, system_clock_ms)
    log_cleaner = LogCleaner(log_config, manager)
    return log_cleaner, log_cleaner.new_cleaner()


def clean_all(log_cleaner: LogCleaner, cleaner: Cleaner) -> list[CleanerStats]:
    passes: list[CleanerStats] = []
    while (stats := log_cleaner.clean_once(cleaner)) is not None:
        passes.append(stats)
        assert len(passes) < 100
    return passes


def first_dirty(root: Path, log: Log) -> int | None:
    return read_checkpoint(root / CLEANER_OFFSET_CHECKPOINT_FILE_NAME).get(log.topic_partition)


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
    for log, _, _ in logs.values():
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
    for log, _, _ in logs.values():
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


# ---------------------------------------------------------------------------------------------- crash states


def _cleaned_pair(tmp_path: Path) -> tuple[Path, Path, list[Op], list[Record]]:
    """A log of four segments (one group) before cleaning, and the same log after, as two folders."""
    rng = random.Random(22)
    ops = random_ops(rng, 4_000, 500, tombstones=0.05)
    log = open_log(tmp_path / "work", segment_bytes=1024 * 1024)
    for quarter in range(4):
        append_ops(log, ops[quarter * 1000 : (quarter + 1) * 1000])
        log.roll()
    log.close()
    before = tmp_path / "before"
    shutil.copytree(tmp_path / "work", before)
    log = open_log(tmp_path / "work", segment_bytes=1024 * 1024)
    log_cleaner, cleaner = new_cleaner(tmp_path / "work", [log])
    assert len(clean_all(log_cleaner, cleaner)) == 1
    cleaned_records = read_records(log)
    log.close()
    return before / "compacted-0", tmp_path / "work" / "compacted-0", ops, cleaned_records


def _segment_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.endswith(".log")}


@pytest.mark.parametrize(
    ("stage", "rolled_forward"),
    [
        ("cleaned", False),  # step 1: .cleaned files only
        ("index-swapped", False),  # inside step 2: indexes renamed, the log still .cleaned
        ("swapped", True),  # after step 2: all .swap, every old segment present
        ("old-partly-deleted", True),  # inside step 3: the first two old segments unlinked
        ("partly-finished", True),  # inside step 4: the indexes final, the log still .swap, old gone
    ],
)
def test_recovery_finishes_or_rolls_back_an_interrupted_swap(
    tmp_path: Path, stage: str, rolled_forward: bool
) -> None:
    before, after, ops, cleaned_records = _cleaned_pair(tmp_path)
    base = "00000000000000000000"
    cleaned = {
        suffix: (after / f"{base}{suffix}").read_bytes() for suffix in (".log", ".index", ".timeindex")
    }
    crashed = tmp_path / "crashed" / "compacted-0"
    shutil.copytree(before, crashed)
    old_logs = sorted(p for p in crashed.iterdir() if p.suffix == ".log")
    assert len(old_logs) == 5  # four full segments and the empty active one
    if stage == "cleaned":
        for suffix, data in cleaned.items():
            (crashed / f"{base}{suffix}.cleaned").write_bytes(data)
    elif stage == "index-swapped":
        (crashed / f"{base}.log.cleaned").write_bytes(cleaned[".log"])
        (crashed / f"{base}.index.swap").write_bytes(cleaned[".index"])
        (crashed / f"{base}.timeindex.swap").write_bytes(cleaned[".timeindex"])
    else:
        for suffix, data in cleaned.items():
            (crashed / f"{base}{suffix}.swap").write_bytes(data)
        if stage == "old-partly-deleted":
            for path in old_logs[:2]:
                for suffix in (".log", ".index", ".timeindex"):
                    path.with_suffix(suffix).unlink()
        if stage == "partly-finished":
            for path in old_logs[:4]:
                for suffix in (".log", ".index", ".timeindex"):
                    path.with_suffix(suffix).unlink()
            (crashed / f"{base}.index.swap").rename(crashed / f"{base}.index")
            (crashed / f"{base}.timeindex.swap").rename(crashed / f"{base}.timeindex")
    log = open_log(tmp_path / "crashed", segment_bytes=1024 * 1024)
    assert log_map(log) == replay(ops)
    expected = _segment_files(after if rolled_forward else before)
    assert _segment_files(crashed) == expected
    assert [p.name for p in crashed.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    records = read_records(log)
    if rolled_forward:
        assert records == cleaned_records
    else:
        assert [(r.key, r.value) for r in records] == ops
    log.close()


# ---------------------------------------------------------------------------------------------- others


def test_a_follower_fetching_a_cleaned_leader_copies_its_gaps_and_epochs(tmp_path: Path) -> None:
    rng = random.Random(23)
    ops = random_ops(rng, 5_000, 300)
    leader = open_log(tmp_path / "leader")
    append_ops(leader, ops)
    leader.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path / "leader", [leader])
    clean_all(log_cleaner, cleaner)
    append_ops(leader, ops[:100])  # the active segment, uncleaned
    follower = open_log(tmp_path / "follower", cleanup_policy="delete")
    fetches = 0
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, 2 * 1024, max_offset=leader.log_end_offset)
        assert region is not None
        follower.append_as_follower(region.read_bytes())
        fetches += 1
    assert fetches >= 5
    assert read_records(follower) == read_records(leader)
    assert follower.log_end_offset == leader.log_end_offset
    # the follower's epoch starts at the first batch it got (the leader's first surviving one)
    assert leader.leader_epoch_cache.entries() == [(3, 0)]
    assert follower.leader_epoch_cache.entries() == [
        (3, scan_batches(read_bytes(leader)).batches[0].base_offset)
    ]
    assert follower.end_offset_for_epoch(3) == leader.end_offset_for_epoch(3) == (3, leader.log_end_offset)
    leader.close()
    follower.close()
    reopened = open_log(tmp_path / "follower", cleanup_policy="delete")
    assert log_map(reopened) == replay(ops + ops[:100])
    reopened.close()


def test_a_compact_only_log_deletes_nothing_by_retention_and_compact_delete_does(tmp_path: Path) -> None:
    for policy, deleted in (("compact", False), ("compact,delete", True)):
        log = open_log(tmp_path / policy, cleanup_policy=policy, retention_ms=1, segment_bytes=4096)
        append_ops(log, [(f"k{i}".encode(), b"v" * 100) for i in range(500)])
        segments = len(log.segments)
        removed = log.apply_retention(now_ms=BASE_TS + 10_000)
        assert bool(removed) is deleted
        assert len(log.segments) == (1 if deleted else segments)
        log.close()


@pytest.mark.parametrize("compiled_loaded", [False, True], ids=["walked", "by-columns"])
def test_a_keyless_record_on_a_compacted_log_is_refused_naming_the_partition_and_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled_loaded: bool
) -> None:
    """Both routes of the key check: walked (before the cleaner has loaded the compiled loops: a produce
    never waits for numba) and by the key columns (after)."""
    if compiled_loaded:
        load_kernels()
        assert compiled.loaded()
    else:
        monkeypatch.setattr(compiled, "loaded", lambda: False)
    log = open_log(tmp_path)
    append_ops(log, [(b"a", b"1")])
    builder = RecordBatchBuilder()
    builder.append(BASE_TS, b"b", b"2")
    builder.append(BASE_TS, b"c", b"3")
    builder.append(BASE_TS, None, b"keyless")
    builder.append(BASE_TS, None, b"keyless too")
    size = log.size_bytes
    with pytest.raises(
        InvalidRecordError, match=r"compacted-0 append: .*without a key: record #2 at offset 2"
    ):
        log.append(builder.build())
    assert (log.log_end_offset, log.size_bytes) == (1, size)
    # a request of several batches (read by columns together), the keyless record in a gzip batch
    keyed = RecordBatchBuilder()
    for i in range(70):
        keyed.append(BASE_TS, b"k%d" % i, b"v")
    zipped = RecordBatchBuilder(CompressionType.GZIP)
    zipped.append(BASE_TS, b"d", b"4")
    zipped.append(BASE_TS, None, b"keyless")
    with pytest.raises(InvalidRecordError, match=r"without a key: record #1 at offset 1 of the batch \(of 2"):
        log.append(keyed.build() + zipped.build())
    assert (log.log_end_offset, log.size_bytes) == (1, size)
    log.append(keyed.build() + keyed.build())
    assert log.log_end_offset == 141
    log.close()


def test_truncation_aborts_and_pauses_cleaning_and_moves_the_checkpoint_down(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_ops(log, [(f"k{i % 10}".encode(), b"v") for i in range(1_000)])
    log.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path, [log])
    manager = log_cleaner.manager
    log.set_truncation_guard(manager.paused)
    manager.abort_and_pause(log.topic_partition)
    assert clean_all(log_cleaner, cleaner) == []  # paused
    manager.resume(log.topic_partition)
    assert len(clean_all(log_cleaner, cleaner)) == 1
    assert first_dirty(tmp_path, log) == 1_000
    log.truncate_to(995)  # the cleaned segment is one batch [950, 999]: the whole segment goes
    assert log.log_end_offset <= 995
    assert first_dirty(tmp_path, log) == log.log_end_offset
    # a pass in progress notices an abort at its next check
    to_clean = manager.grab_filthiest_log()
    assert to_clean is None  # nothing dirty: 995 is clean
    append_ops(log, [(b"k1", b"w")] * 100)
    log.roll()
    to_clean = manager.grab_filthiest_log()
    assert to_clean is not None
    aborter = threading.Thread(target=manager.abort_and_pause, args=(log.topic_partition, 5.0))
    aborter.start()
    while manager.state(log.topic_partition) is not CleaningState.ABORTED:
        time.sleep(0.01)
    with pytest.raises(CleaningAbortedError):
        cleaner.clean(to_clean)
    manager.abort_cleaning(log.topic_partition)
    aborter.join(5)
    assert not aborter.is_alive()
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    log.close()


def thread_nice(thread: threading.Thread) -> int:
    """The kernel's nice value of ``thread`` (field 19 of ``/proc/self/task/<tid>/stat``)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


def test_the_log_manager_runs_the_cleaner_threads(tmp_path: Path) -> None:
    """...at ``cleaner_nice`` below the broker's priority, with the threads they start."""
    log_config = config(
        tmp_path,
        cleanup_policy="compact",
        cleaner_backoff_ms=20,
        min_cleanable_dirty_ratio=0.0,
        segment_bytes=8 * 1024,
        cleaner_nice=7,
    )
    before = set(threading.enumerate())
    with LogManager(log_config) as manager:
        manager.start()
        log = manager.get_or_create_log("changelog", 0)
        ops = [(f"k{i % 20}".encode(), f"v{i}".encode()) for i in range(3_000)]
        append_ops(log, ops)
        log.roll()
        deadline = time.monotonic() + 30
        while first_dirty(tmp_path, log) != log.log_end_offset:
            assert time.monotonic() < deadline, "the cleaner thread did not clean the log"
            time.sleep(0.05)
        assert len(read_records(log)) == 20
        assert log_map(log) == replay(ops)
        assert manager.cleaner.totals.passes >= 1
        own = thread_nice(threading.current_thread())
        names = ("lumber-log-cleaner-0", "lumber-log-cleaner-read_0")  # the thread, and its reader
        niced = {t.name: thread_nice(t) for t in set(threading.enumerate()) - before if t.name in names}
        assert niced == dict.fromkeys(names, min(own + 7, 19))
        assert thread_nice(threading.current_thread()) == own
        manager.delete_log("changelog", 0)
        assert TopicPartition("changelog", 0) not in read_checkpoint(
            tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE_NAME
        )


@pytest.mark.slow
def test_cleaning_2m_distinct_keys_under_a_16_mib_dedupe_buffer_stays_within_it_over_several_passes(
    tmp_path: Path,
) -> None:
    """The cleaning runs in a process of its own, whose resident set is measured (``VmRSS`` before, the
    kernel's peak ``VmHWM`` after): it grows by the map's 16 MiB and a bounded working set (one chunk of
    decoded records, the I/O reads), not with the keys. numba and the cleaner's compiled kernels are
    loaded before the measurement (once per process, whatever the log: bounded apart). Takes 45-85 s on
    the shared 2-core machine."""
    run = [sys.executable, "-m", "tests.broker.log.cleaner_memory"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    written = json.loads(
        subprocess.run(
            [*run, "write", str(tmp_path), "2000000"], check=True, capture_output=True, env=env
        ).stdout
    )
    assert written["log_end_offset"] == 2_000_000
    report = json.loads(
        subprocess.run(
            [*run, "clean", str(tmp_path), str(16 * 1024 * 1024)], check=True, capture_output=True, env=env
        ).stdout
    )
    map_bytes = report["map_bytes"]
    assert 16 * 1024 * 1024 - 1024 <= map_bytes <= 16 * 1024 * 1024  # the largest prime slot count
    max_keys = int(map_bytes // 24 * 0.9)
    assert report["passes"] == 4  # 2M keys, at most 629,000 per pass
    assert sum(report["map_keys"]) == 2_000_000
    assert all(keys <= max_keys for keys in report["map_keys"])
    growth = report["peak_rss"] - report["baseline_rss"]
    assert growth <= map_bytes + 12 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB"
    # numba's import and the kernels' code: mostly LLVM's shared library pages (shared between processes)
    kernels, anonymous = report["kernels_rss"], report["kernels_anonymous_rss"]
    assert 0 < anonymous <= 64 * 1024 * 1024, f"the kernels took {anonymous / 2**20:.1f} MiB of anonymous RSS"
    assert anonymous < kernels <= 224 * 1024 * 1024, f"numba and the kernels took {kernels / 2**20:.1f} MiB"
    assert report["batches_after"] == 2_000  # every key distinct: nothing to drop, every batch kept


@pytest.mark.parametrize("stopped_in", ["rewrite", "swap"])
def test_a_pass_stopped_while_a_group_is_being_swapped_leaves_every_group_whole(
    tmp_path: Path, stopped_in: str
) -> None:
    """A group's swap runs on the pass's swap thread while the next group is rewritten: a stop in the
    rewrite (with the previous swap in flight or just done) or in a swap (with the next group's
    ``.cleaned`` files written) waits for the swap in flight, deletes the files not swapped, and leaves
    each group either swapped whole or untouched."""
    rng = random.Random(7)
    log = open_log(tmp_path)
    ops = random_ops(rng, 12_000, 500)
    append_ops(log, ops)
    log.roll()
    before = {s.base_offset: s.size_bytes for s in log.segments[:-1]}
    assert len(before) >= 6
    log_cleaner, _ = new_cleaner(tmp_path, [log])
    swap_checks = 0

    def check_done(tp: TopicPartition) -> None:
        nonlocal swap_checks
        if threading.current_thread().name.startswith("lumber-log-cleaner-swap"):
            swap_checks += 1
            if stopped_in == "swap" and swap_checks == 2:
                raise CleaningAbortedError(f"{tp}: stopped in the second swap")
        elif stopped_in == "rewrite" and swap_checks >= 1:
            raise CleaningAbortedError(f"{tp}: stopped in a rewrite")

    cleaner = Cleaner(OffsetMap(4 * 1024 * 1024), io_buffer_bytes=64 * 1024, check_done=check_done)
    to_clean = log_cleaner.manager.grab_filthiest_log()
    assert to_clean is not None
    with pytest.raises(CleaningAbortedError, match=r"stopped in (a rewrite|the second swap)"):
        cleaner.clean(to_clean)
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    after = {s.base_offset: s.size_bytes for s in log.segments[:-1]}
    swapped = [base for base, size in after.items() if size != before.get(base)]
    assert 1 <= len(swapped) < len(before)
    assert swapped == sorted(after)[: len(swapped)]  # the first groups, in order
    assert set(sorted(before)[len(swapped) :]) <= set(after)  # the others untouched
    assert log_map(log) == replay(ops)
    assert verify_partition(log.dir).damage == ()
    # the same cleaner (its buffers, a read it may have left in flight) finishes the log in its next pass
    log_cleaner.manager.abort_cleaning(log.topic_partition)
    stopped_in = "nowhere"
    to_clean = log_cleaner.manager.grab_filthiest_log()
    assert to_clean is not None
    assert cleaner.clean(to_clean).end_offset == log.log_end_offset
    assert [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    assert log_map(log) == replay(ops)
    assert len(read_records(log)) == len({key for key, _ in ops})  # one record per key: its last
    assert verify_partition(log.dir).damage == ()
    log.close()


def test_a_follower_rolls_at_its_own_log_end_so_its_segments_stay_contiguous_across_gaps(
    tmp_path: Path,
) -> None:
    leader = open_log(tmp_path / "leader")
    append_ops(leader, [(f"k{i % 7}".encode(), b"v" * 200) for i in range(3_000)])
    append_ops(leader, [(f"u{i}".encode(), b"u" * 200) for i in range(150)])  # three batches that all stay
    leader.roll()
    log_cleaner, cleaner = new_cleaner(tmp_path / "leader", [leader])
    clean_all(log_cleaner, cleaner)
    append_ops(leader, [(b"tail", b"t")])
    follower = open_log(tmp_path / "follower", cleanup_policy="delete", segment_bytes=128)  # a roll per batch
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, 1, max_offset=leader.log_end_offset)
        assert region is not None
        follower.append_as_follower(region.read_bytes())
    segments = follower.segments
    assert len(segments) > 2
    assert [s.base_offset for s in segments[1:]] == [s.next_offset for s in segments[:-1]]
    assert verify_partition(follower.dir).damage == ()
    assert verify_partition(leader.dir).damage == ()
    leader.close()
    follower.close()
