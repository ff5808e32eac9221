"""The deep log walk behind ``lumber log verify``: intact logs pass with exact counts, and index damage and a
missing segment are named with file, position and offset (record and batch damage: tests/lumber/cli)."""

from __future__ import annotations

import struct
from pathlib import Path

from broker.log.log import Log
from broker.log.log_verifier import find_partition_dirs, verify_partition
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import retained_batch
from tests.broker.log.helpers import config, make_batch


def write_log(tmp_path: Path, batches: int, **overrides: object) -> Path:
    directory = tmp_path / "clicks-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path, index_interval_bytes=0, **overrides))
    for i in range(batches):
        log.append(make_batch(i * 4, 4))
    log.close()
    return directory


def test_an_intact_log_passes_with_exact_counts(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 30, segment_bytes=4000)
    report = verify_partition(directory)
    assert report.ok, report.damage
    assert (report.batches, report.records, report.next_offset) == (30, 120, 120)
    assert report.segments == len(list(directory.glob("*.log"))) > 1
    assert find_partition_dirs([tmp_path], "clicks") == [directory]
    assert find_partition_dirs([tmp_path], "clicks", 1) == []
    assert find_partition_dirs([tmp_path]) == [directory]


def test_an_index_entry_pointing_nowhere_is_named(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 5)
    index = directory / "00000000000000000000.index"
    entries = index.read_bytes()
    relative, position = struct.unpack_from(">ii", entries, 8)
    index.write_bytes(entries[:8] + struct.pack(">ii", relative, position + 1) + entries[16:])
    (damage,) = verify_partition(directory).damage
    assert (damage.file, damage.position, damage.offset) == (index, 8, relative)
    assert f"entry #1 points at position {position + 1}, where no batch with base offset {relative}" in str(
        damage
    )


def test_a_segment_starting_inside_the_previous_one_is_named(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 30, segment_bytes=4000)
    logs = sorted(directory.glob("*.log"))
    second_base = int(logs[1].stem)
    third_base = int(logs[2].stem)
    moved = logs[2].with_name(f"{third_base - 1:020d}.log")
    logs[2].rename(moved)
    for suffix in (".index", ".timeindex"):  # a missing index is rebuilt at the next start: not damage
        logs[2].with_suffix(suffix).unlink()
    (damage,) = verify_partition(directory).damage
    assert (damage.file, damage.position, damage.offset) == (moved, 0, third_base - 1)
    assert damage.reason == (
        f"the segment starts at offset {third_base - 1}, inside the previous one, which ended before "
        f"offset {third_base}"
    )
    assert second_base < third_base - 1


def test_a_gap_between_segments_is_legal(tmp_path: Path) -> None:
    """The cleaner drops emptied batches: a cleaned segment may end before the next one's base offset."""
    directory = write_log(tmp_path, 30, segment_bytes=4000)
    logs = sorted(directory.glob("*.log"))
    for suffix in (".log", ".index", ".timeindex"):
        logs[1].with_suffix(suffix).unlink()
    report = verify_partition(directory)
    assert report.damage == ()
    assert report.segments == len(logs) - 1


def test_a_segment_of_only_emptied_batches_is_a_warning_not_damage(tmp_path: Path) -> None:
    directory = write_log(tmp_path, 30, segment_bytes=4000)
    logs = sorted(directory.glob("*.log"))
    data = logs[1].read_bytes()
    emptied = []
    position = 0
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        emptied.append(retained_batch(RecordBatch(data[position : position + 12 + length]), []))
        position += 12 + length
    logs[1].write_bytes(b"".join(emptied))
    for suffix in (".index", ".timeindex"):
        logs[1].with_suffix(suffix).write_bytes(b"")
    report = verify_partition(directory)
    assert report.ok, report.damage
    (warning,) = report.empty_segments
    assert (warning.file, warning.base_offset, warning.batches) == (logs[1], int(logs[1].stem), len(emptied))
    assert (
        str(warning)
        == f"{logs[1]}: {len(emptied)} batch(es) from offset {int(logs[1].stem)}, none holding a record"
    )
    assert report.next_offset == 120
