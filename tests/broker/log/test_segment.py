from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.errors import CorruptIndexError
from broker.log.segment import Segment
from broker.log.segment_scan import scan_segment
from broker.record.batch_scan import scan_batches
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from tests.broker.log.helpers import BASE_TS, make_batch

DAY_MS = 24 * 3600 * 1000


def fill(
    segment: Segment, batches: int, records: int = 5, *, timestamps: list[int] | None = None
) -> list[int]:
    """Append ``batches`` batches of ``records`` records; return each batch's start position."""
    positions = []
    for i in range(batches):
        offset = segment.next_offset
        ts = timestamps[i] if timestamps else BASE_TS + offset
        positions.append(segment.size_bytes)
        segment.append([RecordBatch(make_batch(offset, records, timestamp_ms=ts))], [offset])
    return positions


@pytest.fixture
def segment(tmp_path: Path) -> Segment:
    return Segment.create(tmp_path, 100, index_interval_bytes=1000, now_ms=0)


def test_files_and_offsets(tmp_path: Path, segment: Segment) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    fill(segment, 3, records=4)
    assert segment.next_offset == 112
    data = segment.path.read_bytes()
    scan = scan_batches(data)
    assert [b.base_offset for b in scan.batches] == [100, 104, 108]
    assert scan.complete_bytes == len(data) == segment.size_bytes
    for batch in scan.batches:
        batch.validate()
    segment.close()


def test_sparse_index_every_interval_bytes(segment: Segment) -> None:
    positions = fill(segment, 12, records=5)  # 5 records of 100 bytes: ~676-byte batches
    batch_size = positions[1] - positions[0]
    assert 600 < batch_size < 1000
    # Kafka's rule: index a batch once more than index_interval_bytes (1000) were written since the last one.
    expected, since = [], 0
    for i, position in enumerate(positions):
        if since > 1000:
            expected.append((100 + 5 * i, position))
            since = 0
        since += batch_size
    assert segment.offset_index.entries() == expected
    assert len(expected) == 5
    segment.close()


def test_the_index_files_get_the_entries_at_flush_the_same_for_one_append_of_many_batches(
    tmp_path: Path,
) -> None:
    """Index entries reach the files at the segment's flush (not one write per entry, issue 39), and the
    files then hold exactly what the same batches appended one by one leave."""
    batches = [RecordBatch(make_batch(100 + 5 * i, 5, timestamp_ms=BASE_TS + 5 * i)) for i in range(12)]
    offsets = [100 + 5 * i for i in range(12)]
    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    one_by_one = Segment.create(tmp_path / "one", 100, index_interval_bytes=1000, now_ms=0)
    for batch, offset in zip(batches, offsets, strict=True):
        one_by_one.append([batch], [offset])
    at_once = Segment.create(tmp_path / "many", 100, index_interval_bytes=1000, now_ms=0)
    at_once.append(batches[:1], offsets[:1])
    at_once.append(batches[1:], offsets[1:])
    assert at_once.offset_index.entries() == one_by_one.offset_index.entries()
    assert len(at_once.offset_index.entries()) == 5
    for folder in ("one", "many"):
        assert (tmp_path / folder / "00000000000000000100.index").read_bytes() == b""
        assert (tmp_path / folder / "00000000000000000100.timeindex").read_bytes() == b""
    one_by_one.flush()
    at_once.flush()
    for suffix in ("log", "index", "timeindex"):
        written = (tmp_path / "many" / f"00000000000000000100.{suffix}").read_bytes()
        assert written == (tmp_path / "one" / f"00000000000000000100.{suffix}").read_bytes()
        if suffix != "log":
            assert len(written) == 5 * (8 if suffix == "index" else 12)
    one_by_one.close()
    at_once.close()


def test_read_whole_batches_from_the_one_holding_the_offset(segment: Segment) -> None:
    positions = fill(segment, 10, records=5)
    size = positions[1]
    end = segment.size_bytes
    region = segment.read(117, 1, end, segment.next_offset)  # inside the 4th batch, max_bytes below one batch
    assert region is not None
    assert (region.position, region.size_bytes, region.base_offset, region.next_offset) == (
        positions[3],
        size,
        115,
        120,
    )
    region = segment.read(115, 3 * size + 10, end, segment.next_offset)
    assert region is not None
    assert (region.position, region.size_bytes, region.next_offset) == (positions[3], 3 * size, 130)
    region = segment.read(100, 10**9, end, segment.next_offset)
    assert region is not None
    assert (region.position, region.size_bytes, region.next_offset) == (0, end, 150)
    assert segment.read(150, 1000, end, 150) is None
    # never past max_position, even if max_bytes allows it
    region = segment.read(100, 10**9, positions[4], 120)
    assert region is not None
    assert (region.size_bytes, region.next_offset) == (positions[4], 120)
    assert segment.read(120, 10**9, positions[4], 120) is None
    segment.close()


def test_position_of(segment: Segment) -> None:
    positions = fill(segment, 10, records=5)
    for offset in range(100, 150):
        found = segment.position_of(offset, segment.size_bytes)
        batch = (offset - 100) // 5
        assert found == (positions[batch], 100 + 5 * batch, positions[1])
    assert segment.position_of(150, segment.size_bytes) is None
    segment.close()


def test_find_offset_by_timestamp(segment: Segment) -> None:
    # batch i holds offsets 100+5i .. 104+5i with timestamps ts_i + 0..4; timestamps not monotonic
    stamps = [1000, 2000, 1500, 4000, 3000, 6000, 5000, 8000, 7000, 9000]
    fill(segment, 10, records=5, timestamps=stamps)
    end = segment.size_bytes

    def brute(ts: int) -> tuple[int, int] | None:
        for i, base in enumerate(stamps):
            for j in range(5):
                if base + j >= ts:
                    return 100 + 5 * i + j, base + j
        return None

    for ts in [0, 1000, 1003, 1005, 2002, 2500, 3999, 4004, 4005, 6001, 8888, 9004, 9005, 10**9]:
        assert segment.find_offset_by_timestamp(ts, end) == brute(ts), ts
    assert segment.max_timestamp_ms == 9004
    segment.close()


def test_should_roll(segment: Segment) -> None:
    assert not segment.should_roll(10**9, BASE_TS, 100, 0, segment_bytes=1000, segment_ms=DAY_MS)  # empty
    fill(segment, 1, records=5, timestamps=[BASE_TS])
    size = segment.size_bytes

    def roll(batch_bytes: int, ts: int, last: int = 200, now: int = 0) -> bool:
        return segment.should_roll(batch_bytes, ts, last, now, segment_bytes=2 * size, segment_ms=DAY_MS)

    assert not roll(size, BASE_TS)
    assert roll(size + 1, BASE_TS)  # would overflow segment_bytes
    first_max_ts = BASE_TS + 4  # the first batch's max timestamp is the base of time-based rolling
    assert not roll(10, first_max_ts + DAY_MS - 1)
    assert roll(10, first_max_ts + DAY_MS)  # a day of record time after the first batch
    assert not roll(10, -1, now=DAY_MS - 1)  # no timestamp: the clock since creation counts
    assert roll(10, -1, now=DAY_MS)
    assert roll(10, BASE_TS, last=100 + 2**31)  # relative offsets would overflow
    segment.close()


def test_load_trusts_data_and_reads_the_tail(tmp_path: Path, segment: Segment) -> None:
    fill(segment, 12, records=5)
    segment.on_become_inactive()
    entries = segment.offset_index.entries()
    segment.close()
    loaded = Segment.load(tmp_path, 100, index_interval_bytes=1000, now_ms=0)
    assert loaded.next_offset == 160
    assert loaded.offset_index.entries() == entries
    assert loaded.max_timestamp_ms == BASE_TS + 155 + 4
    loaded.close()


def test_load_rejects_an_index_pointing_at_the_wrong_batch(tmp_path: Path, segment: Segment) -> None:
    positions = fill(segment, 6, records=5)
    segment.close()
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(
        (5).to_bytes(4, "big") + positions[2].to_bytes(4, "big")
    )  # offset 105 is at positions[1]
    with pytest.raises(
        CorruptIndexError, match=f"entry \\(105, {positions[2]}\\) points at a batch with base offset 110"
    ):
        Segment.load(tmp_path, 100, index_interval_bytes=1000, now_ms=0)


def test_load_rejects_a_torn_tail(tmp_path: Path, segment: Segment) -> None:
    positions = fill(segment, 3, records=5)
    segment.close()
    log = tmp_path / "00000000000000000100.log"
    data = log.read_bytes()
    log.write_bytes(data[:-10])
    with pytest.raises(CorruptRecordError) as raised:  # the segment framer's check and message
        Segment.load(tmp_path, 100, index_interval_bytes=1000, now_ms=0)
    announced = len(data) - positions[2]
    assert raised.value.reason == (
        f"torn tail: batchLength announces {announced} bytes, only {announced - 10} remain in the file"
    )
    assert (raised.value.where, raised.value.position, raised.value.offset) == (str(log), positions[2], 110)


def test_scan_finds_the_first_invalid_batch(tmp_path: Path, segment: Segment) -> None:
    positions = fill(segment, 5, records=5)
    segment.close()
    log = tmp_path / "00000000000000000100.log"
    data = bytearray(log.read_bytes())
    data[positions[3] + 70] ^= 0xFF
    log.write_bytes(data)
    scan = scan_segment(log, 100, index_interval_bytes=1000)
    assert scan.valid_bytes == positions[3]
    assert scan.truncated_bytes == len(data) - positions[3]
    assert scan.batch_count == 3
    assert scan.next_offset == 115
    assert scan.error is not None
    assert scan.error.startswith("expected CRC 0x")


def test_scan_requires_increasing_offsets_and_accepts_a_cleaned_segments_gaps(
    tmp_path: Path, segment: Segment
) -> None:
    segment.append([RecordBatch(make_batch(100, 5))], [100])
    segment.append([RecordBatch(make_batch(106, 5))], [106])  # a gap (the cleaner's): 105 is missing
    segment.append([RecordBatch(make_batch(108, 5))], [108])  # overlaps 106..110
    segment.close()
    scan = scan_segment(tmp_path / "00000000000000000100.log", 100, index_interval_bytes=1000)
    assert scan.batch_count == 2
    assert scan.next_offset == 111
    assert scan.error == "expected a base offset of at least 111 got 108"


def _batch_spans(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of each batch of a segment file's bytes."""
    spans = []
    for batch in scan_batches(data).batches:
        assert batch.position is not None
        spans.append((batch.position, batch.size_bytes, batch.base_offset, batch.last_offset))
    return spans


def _reference_read(
    data: bytes, offset: int, max_bytes: int, max_position: int
) -> tuple[int, int, int, int] | None:
    """``Segment.read``'s answer computed from the whole file's batches: (position, size, base offset, next
    offset or -1 when the region ends at max_position)."""
    spans = [span for span in _batch_spans(data) if span[0] + span[1] <= max_position]
    first = next((span for span in spans if span[3] >= offset), None)
    if first is None:
        return None
    limit = first[0] + max_bytes
    end = max_position if limit >= max_position else first[0] + first[1]
    following = [span for span in spans if span[0] >= end]
    while following and end < max_position and following[0][0] + following[0][1] <= limit:
        end += following.pop(0)[1]
    return first[0], end - first[0], first[2], following[0][2] if end < max_position else -1


def test_reads_between_sparse_index_entries_match_the_batches_of_the_file(tmp_path: Path) -> None:
    """One-record batches (about 90 bytes: dozens between index entries) and a batch larger than a header
    scan's read: every offset, several max_bytes and max_positions, the same regions as the file's batches."""
    segment = Segment.create(tmp_path, 0, index_interval_bytes=4096, now_ms=0)
    for i in range(300):
        records = 200 if i == 150 else 1  # one batch of ~20 KB
        segment.append([RecordBatch(make_batch(segment.next_offset, records))], [segment.next_offset])
    data = segment.path.read_bytes()
    ends = [position + size for position, size, _, _ in _batch_spans(data)]
    assert len(segment.offset_index.entries()) > 5
    for max_position in (len(data), ends[150], ends[40]):
        for offset in range(0, segment.next_offset, 7):
            for max_bytes in (0, 1, 500, 9000, 30_000, 10**9):
                region = segment.read(offset, max_bytes, max_position, 10**9)
                want = _reference_read(data, offset, max_bytes, max_position)
                got = None if region is None else (region.position, region.size_bytes, region.base_offset)
                assert got == (None if want is None else want[:3]), (offset, max_bytes, max_position)
                if region is not None and want is not None and want[3] >= 0:
                    assert region.next_offset == want[3]
    segment.close()


def test_a_corrupt_header_between_index_entries_names_its_position(tmp_path: Path) -> None:
    segment = Segment.create(tmp_path, 0, index_interval_bytes=4096, now_ms=0)
    for _ in range(100):
        segment.append([RecordBatch(make_batch(segment.next_offset, 1))], [segment.next_offset])
    size = segment.size_bytes
    positions = [span[0] for span in _batch_spans(segment.path.read_bytes())]
    segment.close()
    with segment.path.open("r+b") as file:
        file.seek(positions[20] + 16)  # the magic byte of the 21st batch
        file.write(b"\x07")
    segment = Segment.load(tmp_path, 0, index_interval_bytes=4096, now_ms=0)
    assert segment.offset_index.entries()[0] == (24, positions[24])
    with pytest.raises(
        CorruptRecordError, match=f"at position {positions[20]}, base offset 20: expected magic 2 got 7"
    ):
        segment.read(22, 10**6, size, 100)  # scanned from position 0: the first index entry is offset 24
    with pytest.raises(
        CorruptRecordError, match=f"at position {positions[20]}, base offset 20: expected magic 2 got 7"
    ):
        segment.read(5, positions[23] - positions[5], size, 100)  # the walk to max_bytes crosses it
    region = segment.read(5, positions[19] - positions[5], size, 100)  # stops before it
    assert region is not None
    assert (region.position, region.size_bytes, region.next_offset) == (
        positions[5],
        positions[19] - positions[5],
        19,
    )
    segment.close()
