"""The index body both indexes share: the bytes each writes, byte for byte, and what loading checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.errors import CorruptIndexError
from broker.log.index_file import PENDING_ENTRIES
from broker.log.offset_index import OffsetIndex
from broker.log.time_index import TimeIndex

BASE = 1_000


def test_offset_index_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex.create(path, BASE, [(1_000, 0), (1_050, 4_096)])
    index.append(1_300, 70_000)
    index.flush()
    # relativeOffset int32 BE | position int32 BE, per entry
    assert path.read_bytes() == bytes.fromhex("000000000000000000000032000010000000012c00011170")
    assert index.entries() == [(1_000, 0), (1_050, 4_096), (1_300, 70_000)]
    assert index.lookup(1_299) == (1_050, 4_096)
    assert index.lookup(999) == (BASE, 0)
    assert index.floor_position(70_001) == 70_000
    index.close()
    loaded = OffsetIndex.load(path, BASE, 70_001)
    assert (loaded.entry_count, loaded.first_entry(), loaded.last_entry()) == (3, (1_000, 0), (1_300, 70_000))
    loaded.close()
    with pytest.raises(
        CorruptIndexError, match="last entry points at position 70000, the log has 70000 bytes"
    ):
        OffsetIndex.load(path, BASE, 70_000)


def test_entries_reach_the_file_in_one_write_per_pending_run_at_flush_and_at_close(tmp_path: Path) -> None:
    """Appended entries are in memory at once; the file gets them in one write when PENDING_ENTRIES wait,
    at flush and at close, and never after delete."""
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex.create(path, BASE)
    for i in range(PENDING_ENTRIES - 1):
        index.append(BASE + i, 100 * i)
    assert index.entry_count == PENDING_ENTRIES - 1
    assert path.read_bytes() == b""
    index.append(BASE + PENDING_ENTRIES - 1, 100 * (PENDING_ENTRIES - 1))
    assert len(path.read_bytes()) == 8 * PENDING_ENTRIES
    index.append(BASE + PENDING_ENTRIES, 100 * PENDING_ENTRIES)
    assert len(path.read_bytes()) == 8 * PENDING_ENTRIES
    index.flush()
    assert len(path.read_bytes()) == 8 * (PENDING_ENTRIES + 1)
    index.append(BASE + PENDING_ENTRIES + 1, 100 * (PENDING_ENTRIES + 1))
    index.close()
    loaded = OffsetIndex.load(path, BASE, 100 * (PENDING_ENTRIES + 1) + 1)
    assert loaded.entries() == [(BASE + i, 100 * i) for i in range(PENDING_ENTRIES + 2)]
    loaded.append(BASE + PENDING_ENTRIES + 2, 100 * (PENDING_ENTRIES + 2))
    loaded.delete()
    loaded.close()
    assert not path.exists()


def test_time_index_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    index = TimeIndex.create(path, BASE, [(1_700_000_000_000, 1_049)])
    assert index.maybe_append(1_700_000_000_000, 1_100) is False  # the timestamp did not grow
    assert index.maybe_append(1_700_000_000_500, 1_299) is True
    index.flush()
    # timestamp int64 BE | relativeOffset int32 BE, per entry
    assert path.read_bytes() == bytes.fromhex("0000018bcfe56800000000310000018bcfe569f40000012b")
    assert index.last_offset_before(1_700_000_000_500) == 1_049
    assert index.last_offset_before(1_700_000_000_000) is None
    index.close()
    loaded = TimeIndex.load(path, BASE)
    assert loaded.entries() == [(1_700_000_000_000, 1_049), (1_700_000_000_500, 1_299)]
    loaded.close()


def test_a_torn_entry_is_a_corrupt_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(bytes(11))
    with pytest.raises(CorruptIndexError, match="size 11 is not a multiple of the entry size 8"):
        OffsetIndex.load(path, BASE, 1 << 20)
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(bytes(15))
    with pytest.raises(CorruptIndexError, match="size 15 is not a multiple of the entry size 12"):
        TimeIndex.load(path, BASE)


def test_offsets_must_fit_relative_to_the_base(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "a.index", BASE)
    with pytest.raises(ValueError, match="offset 999 does not fit relative to base 1000"):
        index.append(999, 0)
    index.close()
    times = TimeIndex.create(tmp_path / "a.timeindex", BASE)
    with pytest.raises(ValueError, match=f"offset {BASE + 2**31} does not fit relative to base 1000"):
        times.maybe_append(5, BASE + 2**31)
    times.close()


def test_a_new_segments_empty_index_replaces_a_leftover_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(bytes(24))  # left by an earlier segment at that offset
    index = OffsetIndex.create_empty(path, BASE)
    assert path.read_bytes() == b""
    index.append(1_010, 4_096)
    index.flush()
    assert path.read_bytes() == (10).to_bytes(4, "big") + (4_096).to_bytes(4, "big")
    index.close()
    loaded = OffsetIndex.load(path, BASE, 8_192)
    assert loaded.lookup(1_020) == (1_010, 4_096)
    loaded.close()
