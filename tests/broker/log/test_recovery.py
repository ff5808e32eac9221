from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker.log.errors import LogDirLockedError
from broker.log.log import Log
from broker.log.log_manager import LogManager
from broker.record.batch_scan import scan_batches
from broker.record.record import Record
from tests.broker.log.crash_writer import crash_config
from tests.broker.log.helpers import BASE_TS, assert_records_match, config, make_batch, read_all

REPO_ROOT = Path(__file__).resolve().parents[3]
SEGMENT_BYTES = 3000


def build_log(tmp_path: Path, batches: int = 12) -> Path:
    """A closed log of ``batches`` 5-record batches in several segments; returns its folder."""
    directory = tmp_path / "clicks-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path, segment_bytes=SEGMENT_BYTES, index_interval_bytes=700))
    for _ in range(batches):
        log.append(make_batch(log.log_end_offset, 5))
    assert len(log.segments) == 3
    log.close()
    return directory


def reopen(directory: Path, *, recovery_point: int = 0, clean: bool = False) -> Log:
    return Log(
        directory,
        config(directory.parent, segment_bytes=SEGMENT_BYTES, index_interval_bytes=700),
        recovery_point=recovery_point,
        clean_shutdown=clean,
    )


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every batch of a valid segment file."""
    data = path.read_bytes()
    result, position = [], 0
    for batch in scan_batches(data).batches:
        result.append((position, batch.size_bytes, batch.base_offset))
        position += batch.size_bytes
    return result


def last_segment(directory: Path) -> Path:
    return max(directory.glob("*.log"))


def corrupt_flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x10
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("flip", "expected CRC 0x"),
        ("cut", "torn tail: batchLength announces"),
        ("garbage", ""),
        ("zeros", "batchLength 0 is below the minimum 49"),
    ],
)
def test_recovery_truncates_to_exactly_the_last_valid_batch(
    tmp_path: Path, damage: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory = build_log(tmp_path)
    segment = last_segment(directory)
    batches = batch_positions(segment)
    size = segment.stat().st_size
    position, batch_size, base_offset = batches[1]
    if damage == "flip":
        corrupt_flip(segment, position + batch_size - 7)
        valid, first_lost = position, base_offset
    elif damage == "cut":
        segment.write_bytes(segment.read_bytes()[: position + batch_size // 2])
        valid, first_lost = position, base_offset
    elif damage == "garbage":
        segment.write_bytes(segment.read_bytes() + random.Random(7).randbytes(1000))
        valid, first_lost = size, batches[-1][2] + 5
    else:
        segment.write_bytes(segment.read_bytes() + bytes(4096))
        valid, first_lost = size, batches[-1][2] + 5
    damaged_size = segment.stat().st_size
    with caplog.at_level(logging.WARNING, logger="broker.log.recovery"):
        log = reopen(directory)
    result = log.recovery_result
    assert result.truncation is not None
    assert result.truncation.path == str(segment)
    assert (result.truncation.valid_bytes, result.truncation.size_bytes) == (valid, damaged_size)
    assert result.truncation.first_lost_offset == first_lost
    assert result.truncation.reason.startswith(reason)
    assert segment.stat().st_size == valid
    assert log.log_end_offset == first_lost
    assert result.validated_segments == (0, 20, 40)
    assert result.rebuilt_indexes == (0, 20, 40)
    assert result.deleted_segments == ()
    assert f"pass 3 truncated {segment} from {damaged_size} to {valid} bytes" in caplog.text
    assert f"offsets from {first_lost} on" in caplog.text
    # nothing invalid is served, and everything valid is
    assert_records_match(read_all(log), 0, first_lost)
    # the log goes on from there
    log.append(make_batch(first_lost, 5))
    assert_records_match(read_all(log), 0, first_lost + 5)
    log.close()


def test_corruption_in_a_middle_segment_deletes_the_later_ones(tmp_path: Path) -> None:
    directory = build_log(tmp_path)
    middle = sorted(directory.glob("*.log"))[1]
    position, _, base_offset = batch_positions(middle)[2]
    corrupt_flip(middle, position + 30)
    log = reopen(directory)
    result = log.recovery_result
    assert result.truncation is not None
    assert (result.truncation.valid_bytes, result.truncation.first_lost_offset) == (position, base_offset)
    assert result.validated_segments == (0, 20)  # pass 1 stops at the first invalid batch
    assert result.deleted_segments == (str(directory / "00000000000000000040.log"),)
    assert sorted(p.name for p in directory.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "00000000000000000020.index",
        "00000000000000000020.log",
        "00000000000000000020.snapshot",  # the producer state at the roll; the one at 40 is past the end
        "00000000000000000020.timeindex",
    ]
    assert log.log_end_offset == base_offset
    assert_records_match(read_all(log), 0, base_offset)
    log.close()


def test_only_segments_from_the_recovery_point_on_are_validated(tmp_path: Path) -> None:
    directory = build_log(tmp_path)
    log = reopen(directory, recovery_point=45)
    assert log.recovery_result.validated_segments == (40,)
    assert log.recovery_result.truncation is None
    assert log.log_end_offset == 60
    log.close()
    log = reopen(directory, recovery_point=60)
    assert log.recovery_result.validated_segments == (40,)  # the segment holding the recovery point
    log.close()


def test_a_clean_shutdown_validates_nothing(tmp_path: Path) -> None:
    directory = build_log(tmp_path)
    log = reopen(directory, clean=True)
    result = log.recovery_result
    assert (result.clean_shutdown, result.validated_segments, result.truncation) == (True, (), None)
    assert_records_match(read_all(log), 0, 60)
    log.close()


@pytest.mark.parametrize(
    ("file_name", "damage"),
    [
        ("00000000000000000020.index", "missing"),
        ("00000000000000000020.timeindex", "missing"),
        ("00000000000000000020.index", "garbage"),
        ("00000000000000000020.index", "cut"),
        ("00000000000000000020.timeindex", "garbage"),
        ("00000000000000000040.index", "past-the-end"),
    ],
)
def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path: Path, file_name: str, damage: str) -> None:
    directory = build_log(tmp_path)
    originals = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix != ".log"}
    target = directory / file_name
    assert originals[file_name] != b""
    if damage == "missing":
        target.unlink()
    elif damage == "garbage":
        target.write_bytes(random.Random(1).randbytes(len(originals[file_name])))
    elif damage == "cut":
        target.write_bytes(originals[file_name][:-3])
    else:
        target.write_bytes(originals[file_name] + (60).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    log = reopen(directory, clean=True)
    base = int(file_name.split(".", 1)[0])
    assert log.recovery_result.bad_indexes == (str(directory / f"{base:020d}.log"),)
    assert log.recovery_result.rebuilt_indexes == (base,)
    assert log.recovery_result.truncation is None
    # the rebuilt files are exactly what the log had written
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix != ".log"} == originals
    assert_records_match(read_all(log, max_bytes=1), 0, 60)
    # every batch stamps its records BASE_TS + 0..4
    assert log.offset_for_timestamp(BASE_TS + 3) == (3, BASE_TS + 3)
    assert log.offset_for_timestamp(BASE_TS + 5) is None
    log.close()


def test_stray_files_are_removed(tmp_path: Path) -> None:
    directory = build_log(tmp_path)
    (directory / "00000000000000000020.index.tmp").write_bytes(b"half written")
    (directory / "00000000000000000099.index").write_bytes(b"")
    (directory / "00000000000000000099.timeindex").write_bytes(b"")
    (directory / "notes.txt").write_text("left alone")
    log = reopen(directory, clean=True)
    assert sorted(Path(p).name for p in log.recovery_result.removed_files) == [
        "00000000000000000020.index.tmp",
        "00000000000000000099.index",
        "00000000000000000099.timeindex",
    ]
    assert (directory / "notes.txt").exists()
    log.close()


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize(
    "left",
    [
        (),
        (".log",),
        (".log", ".index"),
        (".log", ".timeindex", "leader-epoch-checkpoint"),
        (".index", ".timeindex"),
        (".log", ".index", ".timeindex", ".snapshot", "leader-epoch-checkpoint"),
    ],
)
def test_a_new_logs_files_a_power_loss_may_take_are_made_again(
    tmp_path: Path, left: tuple[str, ...], clean: bool
) -> None:
    """A new log's segment files are not fsynced before its first flush: a power loss may leave any of
    them. Whatever is left loads as the empty log it was, which then takes appends, reads and a restart."""
    directory = tmp_path / "fresh-0"
    directory.mkdir()
    log = Log(directory, config(tmp_path))
    assert log.recovery_result.created_segment
    log.assign_epoch_start_offset(3, 0)
    log.close()
    made = {p.name for p in directory.iterdir()}
    assert made == {f"{0:020d}{suffix}" for suffix in (".log", ".index", ".timeindex", ".snapshot")} | {
        "leader-epoch-checkpoint"
    }
    for path in directory.iterdir():
        if not any(path.name.endswith(kept) for kept in left):
            path.unlink()
    log = reopen(directory, clean=clean)
    assert log.recovery_result.created_segment == (".log" not in left)
    assert log.recovery_result.truncation is None
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    for _ in range(3):
        log.append(make_batch(log.log_end_offset, 5))
    log.flush()
    log.close()
    log = reopen(directory, clean=True)
    assert log.recovery_result.bad_indexes == ()
    assert_records_match(read_all(log), 0, 15)
    log.close()


# ------------------------------------------------------------------------------------------ crash


def verify_log(log: Log, *, decode_from: int) -> None:
    """Every batch of the log is whole, CRC-valid and in offset order; the records from ``decode_from``
    on (the ones no earlier check decoded) carry the values written for their offsets."""
    offset = 0
    records: list[Record] = []
    while offset < log.high_watermark:
        region = log.read(offset, 1024 * 1024)
        assert region is not None
        scan = scan_batches(region.read_bytes())
        assert (scan.complete_bytes, scan.partial_tail_bytes) == (region.size_bytes, 0)
        for batch in scan.batches:
            batch.validate()
            assert batch.base_offset == offset
            if batch.next_offset > decode_from:
                records.extend(r for r in batch.records() if r.offset >= decode_from)
            offset = batch.next_offset
    assert offset == log.log_end_offset
    assert_records_match(records, decode_from, offset)


def test_sigkill_loses_no_flushed_batch(tmp_path: Path) -> None:
    """A subprocess appends and flushes in a loop and is SIGKILLed at a random moment, 20 times; after
    each restart every batch it reported flushed is present, valid and readable."""
    log_dir = tmp_path / "logs"
    rng = random.Random(2026)
    previous_end = 0
    flushes = 0
    for iteration in range(20):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.broker.log.crash_writer", str(log_dir), str(iteration)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        ready = child.stdout.readline().split()
        assert ready[0] == "ready", child.stderr.read() if child.stderr else ""
        assert int(ready[1]) == previous_end  # the child found everything the last check saw

        lines: list[str] = []
        reader = threading.Thread(target=lines.extend, args=(child.stdout,))
        reader.start()
        if iteration == 0:
            with pytest.raises(LogDirLockedError, match=f"locked by pid {child.pid}"):
                LogManager(crash_config(str(log_dir)))
        time.sleep(rng.uniform(0.1, 0.5))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        reader.join(10)
        assert child.stderr is not None
        child.stdout.close()
        child.stderr.close()
        flushed = [int(line.split()[1]) for line in lines if line.startswith("flushed ")]
        flushes += len(flushed)
        must_survive = max([previous_end, *flushed])
        with LogManager(crash_config(str(log_dir))) as manager:
            log = manager.get_log("crash", 0)
            assert log is not None
            assert not log.recovery_result.clean_shutdown
            assert log.log_end_offset >= must_survive
            verify_log(log, decode_from=previous_end)
            previous_end = log.log_end_offset
    assert flushes >= 20  # the kills did land between flushes
