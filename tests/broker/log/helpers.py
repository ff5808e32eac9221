"""Shared helpers for the log tests: deterministic batches and reading a whole log back."""

from __future__ import annotations

from pathlib import Path

from broker.config import LogConfig
from broker.log.log import Log
from broker.record.batch_scan import scan_batches
from broker.record.compression import CompressionType
from broker.record.record import Record
from broker.record.record_batch_builder import RecordBatchBuilder

BASE_TS = 1_700_000_000_000


def value_for(offset: int, size: int = 100) -> bytes:
    """A deterministic value that names its offset (so a test can check every record it reads back)."""
    head = f"offset={offset};".encode()
    return (head * (size // len(head) + 1))[:size]


def make_batch(
    first_offset: int,
    count: int,
    *,
    timestamp_ms: int = BASE_TS,
    codec: CompressionType = CompressionType.NONE,
    value_size: int = 100,
) -> bytes:
    """A batch whose records carry ``value_for(first_offset + i)``; base offset 0 as a producer sends it."""
    builder = RecordBatchBuilder(codec)
    for i in range(count):
        builder.append(
            timestamp_ms + i, f"k{first_offset + i}".encode(), value_for(first_offset + i, value_size)
        )
    return builder.build()


def config(tmp_path: Path, **overrides: object) -> LogConfig:
    values: dict[str, object] = {"log_dirs": [str(tmp_path)], "expose": "appended"}
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def read_all(log: Log, *, max_offset: int | None = None, max_bytes: int = 64 * 1024) -> list[Record]:
    """Every record from the log start up to ``max_offset`` (default: the high watermark), validating
    every batch that a read returns."""
    records: list[Record] = []
    offset = log.log_start_offset
    limit = log.high_watermark if max_offset is None else max_offset
    while offset < limit:
        region = log.read(offset, max_bytes, max_offset=max_offset)
        if region is None:
            break
        scan = scan_batches(region.read_bytes())
        assert scan.partial_tail_bytes == 0
        assert scan.complete_bytes == region.size_bytes
        for batch in scan.batches:
            batch.validate()
            records.extend(r for r in batch.records() if r.offset >= offset)
        assert region.next_offset == scan.batches[-1].next_offset
        offset = region.next_offset
    return records


def assert_records_match(records: list[Record], first: int, until: int) -> None:
    """``records`` are exactly offsets [first, until), each carrying ``value_for(offset)``."""
    assert [r.offset for r in records] == list(range(first, until))
    for record in records:
        assert record.value is not None
        assert record.value.startswith(f"offset={record.offset};".encode())
        assert record.key == f"k{record.offset}".encode()
