from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.errors import CorruptIndexError
from broker.log.time_index import TimeIndex


def test_entries_only_when_the_timestamp_grows(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex.create(path, 50)
    assert index.maybe_append(1000, 59)
    assert not index.maybe_append(1000, 70)  # no growth
    assert not index.maybe_append(900, 80)
    assert not index.maybe_append(-1, 81)  # records without timestamps
    assert index.maybe_append(2000, 90)
    index.close()
    assert path.read_bytes() == struct.pack(">qi", 1000, 9) + struct.pack(">qi", 2000, 40)
    loaded = TimeIndex.load(path, 50)
    assert loaded.entries() == [(1000, 59), (2000, 90)]
    assert loaded.last_entry() == (2000, 90)
    loaded.close()


def test_last_offset_before(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "x.timeindex", 0, [(1000, 9), (2000, 19), (3000, 29)])
    assert index.last_offset_before(999) is None
    assert index.last_offset_before(1000) is None  # offsets <= 9 may hold ts 1000 exactly
    assert index.last_offset_before(1001) == 9
    assert index.last_offset_before(2500) == 19
    assert index.last_offset_before(10**12) == 29
    index.close()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x00" * 13, "size 13 is not a multiple of the entry size 12"),
        (struct.pack(">qiqi", 100, 1, 100, 2), r"entry 1 \(100, 2\) does not follow \(100, 1\)"),
        (struct.pack(">qiqi", 100, 5, 200, 4), r"entry 1 \(200, 4\) does not follow \(100, 5\)"),
        (struct.pack(">qi", 100, -1), r"entry 0 \(100, -1\)"),
    ],
)
def test_sanity_check(tmp_path: Path, payload: bytes, message: str) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(payload)
    with pytest.raises(CorruptIndexError, match=message):
        TimeIndex.load(path, 0)


def test_offsets_must_not_go_back(tmp_path: Path) -> None:
    index = TimeIndex.create(tmp_path / "x.timeindex", 0, [(100, 10)])
    with pytest.raises(ValueError, match="below the last entry"):
        index.maybe_append(200, 5)
    index.close()
