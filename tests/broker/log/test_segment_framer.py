"""broker/log/segment_framer.py: one framing of a ``.log`` file, with one set of checks and messages, for
recovery's scan, ``lumber log verify``, a segment read through, the fetch path's header reads and the log
cleaner's reads; each damage is told the same way, at the same byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.file_handle import FileHandle
from broker.log.log import Log
from broker.log.log_verifier import verify_partition
from broker.log.segment_framer import (
    FrameError,
    SegmentFramer,
    frame_columns,
    offset_regression,
    read_header,
    read_header_prefix,
)
from broker.log.segment_scan import scan_segment
from broker.record.errors import CorruptRecordError
from tests.broker.log.helpers import config, make_batch

BATCHES = 6


def write_segment(tmp_path: Path) -> tuple[Path, list[int]]:
    """One segment of ``BATCHES`` batches of 4 records; returns its ``.log`` and the batch start positions."""
    directory = tmp_path / "clicks-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path))
    for i in range(BATCHES):
        log.append(make_batch(i * 4, 4))
    log.close()
    path = directory / "00000000000000000000.log"
    file = FileHandle.open(path)
    try:
        starts = [batch.position or 0 for batch in SegmentFramer(file)]
    finally:
        file.close()
    return path, starts


def damage_tail(path: Path, kind: str, last_start: int) -> int:
    """Damage the last batch of ``path`` (its indexes, which name it, are dropped: rebuilt at the next
    start); returns the file's size after."""
    for suffix in (".index", ".timeindex"):
        path.with_suffix(suffix).unlink()
    data = bytearray(path.read_bytes())
    if kind == "header":  # the file ends 20 bytes into the last batch
        data = data[: last_start + 20]
    elif kind == "cut":  # the file ends 5 bytes before the last batch does
        data = data[:-5]
    else:  # "length": the last batch's batchLength is 3
        data[last_start + 8 : last_start + 12] = (3).to_bytes(4, "big")
    path.write_bytes(data)
    return len(data)


@pytest.mark.parametrize(
    ("kind", "reason", "torn"),
    [
        ("header", "torn tail: the last 20 bytes cannot hold a batch header (61 bytes)", True),
        ("cut", "torn tail: batchLength announces {size} bytes, only {left} remain in the file", True),
        ("length", "batchLength 3 is below the minimum 49: nothing after it can be framed", False),
    ],
)
def test_recovery_verify_and_a_read_through_tell_a_framing_damage_the_same_way(
    tmp_path: Path, kind: str, reason: str, torn: bool
) -> None:
    path, starts = write_segment(tmp_path)
    last = starts[-1]
    batch_size = path.stat().st_size - last
    size = damage_tail(path, kind, last)
    reason = reason.format(size=batch_size, left=size - last)

    file = FileHandle.open(path)
    try:
        framer = SegmentFramer(file, chunk_bytes=100)  # chunks smaller than a batch: each read whole
        assert [batch.position for batch in framer] == starts[:-1]
    finally:
        file.close()
    assert framer.error is not None
    assert (framer.position, framer.error.position, framer.error.torn, framer.error.reason) == (
        last,
        last,
        torn,
        reason,
    )
    assert framer.error.base_offset == (None if kind == "header" else 20)

    scan = scan_segment(path, 0, index_interval_bytes=4096)
    assert (scan.valid_bytes, scan.batch_count, scan.next_offset, scan.error) == (
        last,
        BATCHES - 1,
        20,
        reason,
    )

    (damage,) = verify_partition(path.parent).damage
    assert (damage.file, damage.position, damage.offset, damage.reason) == (path, last, 20, reason)

    # the fetch path's header reads at the batch's position, and the cleaner's read of the file
    file = FileHandle.open(path)
    try:
        for read in (read_header, read_header_prefix):
            for end in (size, size + 1_000):  # the end the log published; the file may end before it
                if end > size and kind != "header":
                    continue
                with pytest.raises(CorruptRecordError) as raised:
                    read(file, last, end, str(path))
                assert (raised.value.where, raised.value.position, raised.value.reason) == (
                    str(path),
                    last,
                    reason,
                )
                assert raised.value.offset == framer.error.base_offset
        columns, error = frame_columns(memoryview(path.read_bytes()), 0, size)
    finally:
        file.close()
    assert columns.positions.tolist() == starts[:-1]
    assert error == framer.error

    log = Log(path.parent, config(tmp_path))  # recovery cuts the damaged batch off: a clean read after
    try:
        (segment,) = log.segments
        assert [b.base_offset for b in segment.batches(0, segment.size_bytes, 1 << 20)] == [0, 4, 8, 12, 16]
    finally:
        log.close()


def test_a_read_through_raises_the_framers_message(tmp_path: Path) -> None:
    path, starts = write_segment(tmp_path)
    log = Log(path.parent, config(tmp_path))
    try:
        (segment,) = log.segments
        bound = starts[-1] + 100  # a bound inside the last batch
        read: list[int] = []
        with pytest.raises(CorruptRecordError) as raised:
            read.extend(b.base_offset for b in segment.batches(0, bound, 1 << 20))
        assert read == [0, 4, 8, 12, 16]
        announced = path.stat().st_size - starts[-1]
        assert raised.value.reason == (
            f"torn tail: batchLength announces {announced} bytes, only 100 remain in the file"
        )
        assert (raised.value.position, raised.value.offset) == (starts[-1], 20)
    finally:
        log.close()


def test_offsets_only_grow() -> None:
    assert offset_regression(10, 10) is None
    assert offset_regression(10, 12) is None  # a gap: the cleaner leaves them
    assert offset_regression(10, 9) == "expected a base offset of at least 10 got 9"


def test_a_wrong_magic_stops_the_header_readers_and_not_the_walks_over_whole_batches(tmp_path: Path) -> None:
    path, starts = write_segment(tmp_path)
    reason = "expected magic 2 got 7"
    log = Log(path.parent, config(tmp_path))
    try:
        with path.open("r+b") as damaged:  # under the open log: its reads see it, as a disk's damage
            damaged.seek(starts[3] + 16)
            damaged.write(b"\x07")  # magic (the CRC does not cover it)
        data = path.read_bytes()
        (segment,) = log.segments
        # the fetch path reads headers alone: a read ending before the batch before it is served; one
        # reaching the damaged header (from it, or ending at it: it reads the next base offset) refused
        region = segment.read(4, 1, len(data), 24)
        assert region is not None
        assert (region.position, region.next_offset) == (starts[1], 8)
        for offset in (8, 12):
            with pytest.raises(CorruptRecordError) as raised:
                segment.read(offset, 1, len(data), 24)
            found = (raised.value.reason, raised.value.position, raised.value.offset)
            assert found == (reason, starts[3], 12)
    finally:
        log.close()

    file = FileHandle.open(path)
    try:
        for read in (read_header, read_header_prefix):
            with pytest.raises(CorruptRecordError) as raised:
                read(file, starts[3], len(data), str(path))
            assert (raised.value.reason, raised.value.position, raised.value.offset) == (
                reason,
                starts[3],
                12,
            )
        # a walk over whole batches frames on: each batch's validation tells the same
        framer = SegmentFramer(file)
        walked = list(framer)
        assert ([b.position for b in walked], framer.error) == (starts, None)
        with pytest.raises(CorruptRecordError, match=reason):
            walked[3].validate()
    finally:
        file.close()
    # the cleaner's columns stop there
    columns, error = frame_columns(memoryview(data), 0, len(data))
    assert (columns.count, error) == (3, FrameError(starts[3], 12, False, reason))

    # lumber log verify reports the batch and walks on; recovery stops there
    (damage,) = verify_partition(path.parent).damage
    assert (damage.position, damage.offset, damage.reason) == (starts[3], 12, reason)
    scan = scan_segment(path, 0, index_interval_bytes=4096)
    assert (scan.valid_bytes, scan.batch_count, scan.error) == (starts[3], 3, reason)
