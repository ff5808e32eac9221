"""Several producer requests appended in one pass (broker/log/log_append.py, ``Log.append_many``): two logs
given the same requests, one all at once and one request at a time with ``Log.append``, end with the same
segment files, byte for byte (rolls in the middle of the requests included), the same producer state and
the same outcome per request (offsets, or the error ``append`` raised)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.append_info import AppendInfo
from broker.log.errors import LogError, OutOfOrderSequenceError, RecordTooLargeError
from broker.log.log import Log
from broker.record.compression import CompressionType
from broker.record.errors import CorruptRecordError, RecordError
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.helpers import BASE_TS, config, make_batch, read_all

EPOCH = 4


def _open(tmp_path: Path, name: str, **overrides: object) -> Log:
    directory = tmp_path / name / "clicks-0"
    directory.mkdir(parents=True)
    return Log(directory, config(tmp_path / name, **overrides), clock=lambda: BASE_TS)


def _idempotent(sequence: int, count: int, producer_id: int = 7) -> bytes:
    builder = RecordBatchBuilder(
        CompressionType.NONE, producer_id=producer_id, producer_epoch=0, base_sequence=sequence
    )
    for i in range(count):
        builder.append(BASE_TS + i, b"k%d" % i, b"v" * 40)
    return builder.build()


def _one_by_one(log: Log, requests: list[bytes]) -> list[AppendInfo | LogError | RecordError]:
    outcomes: list[AppendInfo | LogError | RecordError] = []
    for request in requests:
        try:
            outcomes.append(log.append(request, leader_epoch=EPOCH))
        except (LogError, RecordError) as exc:
            outcomes.append(exc)
    return outcomes


def _files(log: Log) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(log.dir.glob("*.log"))}


def _same(one: AppendInfo | LogError | RecordError, other: AppendInfo | LogError | RecordError) -> bool:
    if isinstance(one, AppendInfo):
        return one == other
    return type(one) is type(other) and str(one) == str(other)


def test_requests_appended_together_end_as_appended_one_by_one(tmp_path: Path) -> None:
    """Requests with a corrupt one, one too large, an idempotent producer's gap and a retry of a batch
    appended earlier in the same pass, over segments of 900 bytes (the pass rolls several times): the same
    outcomes, segment files, producer state and records as appending them one at a time."""
    corrupt = bytearray(make_batch(0, 3))
    corrupt[-1] ^= 0xFF
    requests = [
        make_batch(0, 5),
        bytes(corrupt),
        make_batch(5, 4),
        _idempotent(0, 3),
        make_batch(9, 60, value_size=200),  # larger than max_message_bytes
        _idempotent(7, 1),  # a gap: 3 expected
        _idempotent(3, 2),
        _idempotent(0, 3),  # a retry of the batch appended above: its offsets, nothing written
        make_batch(14, 6),
        _idempotent(0, 2, producer_id=8),
        make_batch(20, 3),
    ]
    settings = {"segment_bytes": 900, "max_message_bytes": 8000}
    together, alone = _open(tmp_path, "together", **settings), _open(tmp_path, "alone", **settings)
    try:
        outcomes = together.append_many(requests, leader_epoch=EPOCH)
        expected = _one_by_one(alone, requests)
        assert len(outcomes) == len(expected) == len(requests)
        for i, (got, want) in enumerate(zip(outcomes, expected, strict=True)):
            assert _same(got, want), (i, got, want)
        kinds = [type(o).__name__ if not isinstance(o, AppendInfo) else o.first_offset for o in outcomes]
        assert kinds == [
            0,
            CorruptRecordError.__name__,
            5,
            9,
            RecordTooLargeError.__name__,
            OutOfOrderSequenceError.__name__,
            12,
            9,
            14,
            20,
            22,
        ]
        duplicate = outcomes[7]
        assert isinstance(duplicate, AppendInfo)
        assert duplicate.duplicate
        assert together.log_end_offset == alone.log_end_offset == 25
        assert len(together.segments) == len(alone.segments) >= 3
        assert _files(together) == _files(alone)
        assert [r.offset for r in read_all(together)] == list(range(25))
        for producer_id in (7, 8):
            mine, theirs = together.producer_state.entry(producer_id), alone.producer_state.entry(producer_id)
            assert mine is not None
            assert theirs is not None
            assert list(mine.batches) == list(theirs.batches)
    finally:
        together.close()
        alone.close()


def test_requests_all_refused_write_nothing_and_publish_nothing(tmp_path: Path) -> None:
    """Only refused requests and retries: their outcomes, no byte written, the log end unchanged."""
    log = _open(tmp_path, "refused")
    try:
        log.append(_idempotent(0, 2), leader_epoch=EPOCH)
        size, end = log.size_bytes, log.log_end_offset
        outcomes = log.append_many([b"\x00" * 10, _idempotent(0, 2), _idempotent(9, 1)], leader_epoch=EPOCH)
        assert isinstance(outcomes[0], CorruptRecordError)
        assert isinstance(outcomes[1], AppendInfo)
        assert outcomes[1].duplicate
        assert (outcomes[1].first_offset, outcomes[1].last_offset) == (0, 1)
        assert isinstance(outcomes[2], OutOfOrderSequenceError)
        assert (log.size_bytes, log.log_end_offset) == (size, end)
    finally:
        log.close()


def test_a_closed_log_refuses_the_whole_pass(tmp_path: Path) -> None:
    log = _open(tmp_path, "closed")
    log.close()
    with pytest.raises(LogError, match="closed"):
        log.append_many([make_batch(0, 1), make_batch(1, 1)], leader_epoch=EPOCH)
