"""The idempotent producer's state in a partition's log: sequence checks, duplicates, epochs, the
five-batch window, expiry, and the snapshots that carry the state across restarts and crashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.append_info import AppendInfo
from broker.log.errors import CorruptSnapshotError, InvalidProducerEpochError, OutOfOrderSequenceError
from broker.log.file_names import snapshot_file_name
from broker.log.log import Log
from broker.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    last_sequence_of,
)
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.server.error_codes import error_code_of
from tests.broker.log.helpers import BASE_TS, config, make_batch, read_all

PID = 4000
DAY_MS = 86_400_000


def idempotent_batch(
    producer_id: int, epoch: int, sequence: int, count: int, *, timestamp_ms: int = BASE_TS
) -> bytes:
    builder = RecordBatchBuilder(
        CompressionType.NONE, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    for i in range(count):
        builder.append(timestamp_ms + i, None, b"p%d-e%d-s%d" % (producer_id, epoch, sequence + i))
    return builder.build()


class FakeClock:
    """An injected clock (ms): the log reads it, the test moves it."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def open_log(tmp_path: Path, clock: FakeClock | None = None, **settings: object) -> Log:
    directory = tmp_path / "idem-0"
    directory.mkdir(exist_ok=True)
    expiration = int(settings.pop("producer_id_expiration_ms", DAY_MS))  # type: ignore[call-overload]
    clean = bool(settings.pop("clean_shutdown", False))
    return Log(
        directory,
        config(tmp_path, **settings),
        clock=clock or FakeClock(BASE_TS),
        producer_id_expiration_ms=expiration,
        clean_shutdown=clean,
    )


def offsets(info: AppendInfo) -> tuple[int, int, bool]:
    return info.first_offset, info.last_offset, info.duplicate


def test_a_retried_batch_gets_its_original_offsets_and_is_not_appended(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(0, 3))  # no producer id: not tracked
    assert offsets(log.append(idempotent_batch(PID, 0, 0, 5))) == (3, 7, False)
    assert offsets(log.append(idempotent_batch(PID, 0, 5, 2))) == (8, 9, False)
    # both retried: the original offsets, error NONE (as Kafka answers since 1.0), nothing appended
    assert offsets(log.append(idempotent_batch(PID, 0, 0, 5))) == (3, 7, True)
    assert offsets(log.append(idempotent_batch(PID, 0, 5, 2))) == (8, 9, True)
    assert log.log_end_offset == 10
    assert [r.value for r in read_all(log)][3:] == [b"p4000-e0-s%d" % s for s in range(7)]
    entry = log.producer_state.entry(PID)
    assert entry is not None
    assert list(entry.batches) == [
        BatchMetadata(0, 4, 3, 7, BASE_TS + 4),
        BatchMetadata(5, 6, 8, 9, BASE_TS + 1),
    ]
    assert log.producer_state.entry(-1) is None
    log.close()


def test_a_gap_is_out_of_order_and_nothing_of_the_request_is_written(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(idempotent_batch(PID, 0, 0, 5))
    with pytest.raises(OutOfOrderSequenceError, match=r"out of order sequence number 6, expected 5") as gap:
        log.append(idempotent_batch(PID, 0, 6, 1))
    assert error_code_of(gap.value) == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    # a request whose second batch has a gap: the first is not written either
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(PID, 0, 5, 2) + idempotent_batch(PID, 0, 9, 1))
    assert log.log_end_offset == 5
    # consecutive batches of one producer in one request are checked in order
    assert offsets(log.append(idempotent_batch(PID, 0, 5, 2) + idempotent_batch(PID, 0, 7, 1))) == (
        5,
        7,
        False,
    )
    log.close()


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(idempotent_batch(PID, 1, 0, 3))
    with pytest.raises(
        InvalidProducerEpochError, match=r"epoch 0, smaller than the last seen epoch 1"
    ) as old:
        log.append(idempotent_batch(PID, 0, 3, 1))
    assert error_code_of(old.value) == 47  # INVALID_PRODUCER_EPOCH
    with pytest.raises(OutOfOrderSequenceError, match=r"a new epoch 2 .* must start at sequence 0"):
        log.append(idempotent_batch(PID, 2, 3, 1))
    assert offsets(log.append(idempotent_batch(PID, 2, 0, 1))) == (3, 3, False)
    # the new epoch forgot the old one's batches: a retry of epoch 1 is fenced, not a duplicate
    with pytest.raises(InvalidProducerEpochError):
        log.append(idempotent_batch(PID, 1, 0, 3))
    assert log.log_end_offset == 4
    log.close()


def test_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        log.append(idempotent_batch(PID, 0, 2 * i, 2))
    # batch 0 (sequences 0-1) left the window: its retry is out of order, as in Kafka
    with pytest.raises(OutOfOrderSequenceError, match=r"out of order sequence number 0, expected 12"):
        log.append(idempotent_batch(PID, 0, 0, 2))
    # batches 1 to 5 are in it
    for i in range(1, NUM_BATCHES_TO_RETAIN + 1):
        assert offsets(log.append(idempotent_batch(PID, 0, 2 * i, 2))) == (2 * i, 2 * i + 1, True)
    # a retry must match a batch exactly (a different split of the same sequences is out of order)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(PID, 0, 2, 1))
    assert log.log_end_offset == 12
    log.close()


def test_an_unknown_producer_is_accepted_at_any_sequence(tmp_path: Path) -> None:
    """Kafka since KIP-360: the broker may have forgotten a producer (expiry, retention), so it does not
    answer UNKNOWN_PRODUCER_ID; the first batch it sees sets the producer's sequence."""
    log = open_log(tmp_path)
    assert offsets(log.append(idempotent_batch(PID, 3, 17, 2))) == (0, 1, False)
    assert offsets(log.append(idempotent_batch(PID, 3, 19, 1))) == (2, 2, False)
    log.close()


def test_sequences_wrap_after_int32_max(tmp_path: Path) -> None:
    assert last_sequence_of(2**31 - 2, 3) == 1
    log = open_log(tmp_path)
    log.append(idempotent_batch(PID, 0, 2**31 - 2, 2))
    assert offsets(log.append(idempotent_batch(PID, 0, 0, 1))) == (2, 2, False)
    log.close()


def test_producers_expire_after_producer_id_expiration_ms(tmp_path: Path) -> None:
    """Timed by the broker's (injected) clock at append, not by the records' timestamps: these are a
    year old and do not matter."""
    clock = FakeClock(BASE_TS + 365 * DAY_MS)
    log = open_log(tmp_path, clock, producer_id_expiration_ms=60_000)
    log.append(idempotent_batch(PID, 0, 0, 1))
    clock.now_ms += 30_000
    log.append(idempotent_batch(PID + 1, 0, 0, 1))
    clock.now_ms += 29_999
    assert log.remove_expired_producers() == []
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(PID, 0, 5, 1))
    clock.now_ms += 1
    assert log.remove_expired_producers() == [PID]
    assert sorted(log.producer_state.producers) == [PID + 1]
    # forgotten: its next batch is accepted at any sequence, as an unknown producer's
    assert offsets(log.append(idempotent_batch(PID, 0, 5, 1))) == (2, 2, False)
    log.close()
    # a snapshot's producers expire by the same clock when they are loaded
    clock.now_ms += 30_000
    log = open_log(tmp_path, clock, producer_id_expiration_ms=60_000, clean_shutdown=True)
    assert sorted(log.producer_state.producers) == [PID]
    log.close()


# ---------------------------------------------------------------------------------------- snapshots


def snapshots(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "idem-0").glob("*.snapshot"))


def test_snapshots_are_written_at_rolls_and_clean_shutdown_and_loaded_at_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for i in range(4):
        log.append(idempotent_batch(PID, 0, 3 * i, 3))
        log.roll()
    log.append(idempotent_batch(PID, 0, 12, 3))
    log.close()
    assert snapshots(tmp_path) == [snapshot_file_name(o) for o in (3, 6, 9, 12, 15)]
    log = open_log(tmp_path, clean_shutdown=True)
    entry = log.producer_state.entry(PID)
    assert entry is not None
    assert [(b.first_sequence, b.first_offset) for b in entry.batches] == [
        (0, 0),
        (3, 3),
        (6, 6),
        (9, 9),
        (12, 12),
    ]
    # a retry of a batch appended before the restart gets its original offsets
    assert offsets(log.append(idempotent_batch(PID, 0, 3, 3))) == (3, 5, True)
    assert offsets(log.append(idempotent_batch(PID, 0, 15, 1))) == (15, 15, False)
    log.close()


def test_the_state_is_rebuilt_from_the_last_snapshot_and_the_log_after_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(idempotent_batch(PID, 0, 0, 3))
    log.roll()  # snapshot at 3
    for i in range(1, 4):
        log.append(idempotent_batch(PID, 0, 3 * i, 3))
    log.append(idempotent_batch(PID + 1, 7, 0, 2))
    log.flush()
    del log  # no close: no snapshot at the end, the next open recovers from the log
    assert snapshots(tmp_path) == [snapshot_file_name(3)]
    log = open_log(tmp_path)
    assert offsets(log.append(idempotent_batch(PID, 0, 9, 3))) == (9, 11, True)
    assert offsets(log.append(idempotent_batch(PID + 1, 7, 0, 2))) == (12, 13, True)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(PID, 0, 13, 1))
    log.close()


@pytest.mark.parametrize("damage", ["flip", "torn", "empty"])
def test_a_corrupt_or_torn_snapshot_is_reported_and_the_state_rebuilt_from_the_log(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path)
    for i in range(3):
        log.append(idempotent_batch(PID, 0, 2 * i, 2))
    log.close()
    path = tmp_path / "idem-0" / snapshot_file_name(6)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "torn":
        del data[len(data) // 2 :]
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    log = open_log(tmp_path, clean_shutdown=True)
    reason = {"flip": "CRC-32C", "torn": "CRC-32C", "empty": "0 bytes"}[damage]
    assert len(log.producer_state.corrupt_snapshots) == 1
    assert log.producer_state.corrupt_snapshots[0].startswith(
        f"{path}: {path}: corrupt producer-state snapshot"
    )
    assert reason in log.producer_state.corrupt_snapshots[0]
    assert f"ignoring producer snapshot {path}" in caplog.text
    assert not path.exists()
    # rebuilt from the whole log: every batch is known again
    assert offsets(log.append(idempotent_batch(PID, 0, 2, 2))) == (2, 3, True)
    assert offsets(log.append(idempotent_batch(PID, 0, 6, 1))) == (6, 6, False)
    log.close()


def test_snapshot_format_round_trips_and_checks_every_byte() -> None:
    entry = ProducerStateEntry(PID, 3)
    for i in range(NUM_BATCHES_TO_RETAIN):
        entry.add_batch(3, BatchMetadata(i * 10, i * 10 + 9, 100 + i * 10, 109 + i * 10, BASE_TS + i), 77 + i)
    data = encode_snapshot([entry])
    (decoded,) = decode_snapshot(data, where="t")
    assert (decoded.producer_id, decoded.producer_epoch, decoded.last_timestamp_ms) == (PID, 3, 81)
    assert list(decoded.batches) == list(entry.batches)
    assert len(data) == 2 + 4 + 4 + (8 + 2 + 8 + 1) + NUM_BATCHES_TO_RETAIN * 32
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0x01
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bytes(damaged), where="t")


def test_retention_and_truncation_delete_stale_snapshots(tmp_path: Path) -> None:
    clock = FakeClock(BASE_TS + 10 * DAY_MS)
    log = open_log(tmp_path, clock, retention_ms=DAY_MS)
    for i in range(3):
        log.append(idempotent_batch(PID + i, 0, 0, 2, timestamp_ms=BASE_TS))
        log.roll()
    log.append(idempotent_batch(PID + 5, 0, 0, 2, timestamp_ms=clock.now_ms))
    assert snapshots(tmp_path) == [snapshot_file_name(o) for o in (2, 4, 6)]
    assert log.apply_retention() == (0, 2, 4)
    assert snapshots(tmp_path) == [snapshot_file_name(6)]
    # the producers whose batches retention deleted are forgotten (Kafka's truncateHead)
    assert sorted(log.producer_state.producers) == [PID + 5]
    log.close()
    # a snapshot past the log end (the log was truncated by recovery) is deleted at load
    stray = tmp_path / "idem-0" / snapshot_file_name(100)
    stray.write_bytes((tmp_path / "idem-0" / snapshot_file_name(8)).read_bytes())
    log = open_log(tmp_path, clean_shutdown=True)
    assert not stray.exists()
    assert sorted(log.producer_state.producers) == [PID + 5]
    log.close()
