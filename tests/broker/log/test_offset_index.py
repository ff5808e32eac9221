from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.errors import CorruptIndexError
from broker.log.offset_index import OffsetIndex


def test_entries_are_written_as_relative_offset_and_position(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex.create(path, 100)
    index.append(105, 4100)
    index.append(130, 8300)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 5, 4100, 30, 8300)
    loaded = OffsetIndex.load(path, 100, log_size_bytes=9000)
    assert loaded.entries() == [(105, 4100), (130, 8300)]
    loaded.close()


def test_lookups(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "x.index", 100, [(110, 1000), (120, 2000), (130, 3000)])
    assert index.lookup(99) == (100, 0)
    assert index.lookup(100) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**9) == (130, 3000)
    assert index.floor_position(999) == 0
    assert index.floor_position(2000) == 2000
    assert index.floor_position(2999) == 2000
    assert index.first_entry() == (110, 1000)
    assert index.last_entry() == (130, 3000)
    index.close()


def test_create_replaces_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"garbage!" * 3)
    OffsetIndex.create(path, 0, [(3, 400)]).close()
    assert path.read_bytes() == struct.pack(">ii", 3, 400)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize(
    ("payload", "log_size", "message"),
    [
        (b"\x00" * 12, 10_000, "size 12 is not a multiple of the entry size 8"),
        (
            struct.pack(">iiii", 5, 100, 5, 200),
            10_000,
            r"entry 1 \(5, 200\) does not increase after \(5, 100\)",
        ),
        (struct.pack(">iiii", 5, 300, 6, 200), 10_000, r"entry 1 \(6, 200\) does not increase"),
        (struct.pack(">ii", -3, 100), 10_000, r"entry 0 \(-3, 100\) does not increase"),
        (struct.pack(">ii", 3, 5000), 4000, "last entry points at position 5000, the log has 4000 bytes"),
        (b"\x00" * 16, 10_000, r"entry 0 \(0, 0\)|entry 1 \(0, 0\)"),
    ],
)
def test_sanity_check_names_the_file_and_the_problem(
    tmp_path: Path, payload: bytes, log_size: int, message: str
) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(payload)
    with pytest.raises(CorruptIndexError, match=message) as info:
        OffsetIndex.load(path, 0, log_size)
    assert info.value.path == str(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex.load(tmp_path / "none.index", 0, 100)


def test_relative_offset_must_fit(tmp_path: Path) -> None:
    index = OffsetIndex.create(tmp_path / "x.index", 0)
    with pytest.raises(ValueError, match="does not fit"):
        index.append(2**31, 10)
    index.close()
