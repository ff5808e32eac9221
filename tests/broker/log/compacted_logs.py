"""Compacted logs for the cleaner's tests (test_log_cleaner*.py, test_deferred_release.py): a log opened with
``cleanup.policy=compact``, key/value operations appended and replayed into a dict, the log read back as a
consumer fetches it, and a cleaner over it run pass by pass.

A :class:`LogCleaner` holds the segments its passes replaced for ``file_delete_delay_ms`` (60 s) before it
lets their descriptors go (:mod:`broker.log.deferred_release`); the cleaners :func:`new_cleaner` made are shut
down after each test (:func:`shut_down_cleaners`, by ``conftest.py``), or the tests of one process held
over a thousand descriptors of unlinked segments at once and ``select()`` failed in later tests."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from broker.clock import system_clock_ms
from broker.log.checkpoint import read_checkpoint
from broker.log.cleaner import Cleaner
from broker.log.cleaner_stats import CleanerStats
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.record import Record
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.helpers import BASE_TS, config

Op = tuple[bytes, bytes | None]  # key, value (None: a tombstone)

#: how to shut down each cleaner :func:`new_cleaner` made in the running test, in order
_to_shut_down: list[Callable[[], None]] = []


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
    cleaner = log_cleaner.new_cleaner()
    _to_shut_down.extend((cleaner.close, log_cleaner.shutdown))
    return log_cleaner, cleaner


def shut_down_cleaners() -> None:
    """Close the cleaners :func:`new_cleaner` made and drop the segments they replaced, at once."""
    while _to_shut_down:
        _to_shut_down.pop(0)()


def clean_all(log_cleaner: LogCleaner, cleaner: Cleaner) -> list[CleanerStats]:
    passes: list[CleanerStats] = []
    while (stats := log_cleaner.clean_once(cleaner)) is not None:
        passes.append(stats)
        assert len(passes) < 100
    return passes


def first_dirty(root: Path, log: Log) -> int | None:
    return read_checkpoint(root / CLEANER_OFFSET_CHECKPOINT_FILE_NAME).get(log.topic_partition)
