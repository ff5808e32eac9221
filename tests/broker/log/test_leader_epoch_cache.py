"""broker/log/leader_epoch_cache.py: Kafka's LeaderEpochFileCache semantics and its checkpoint file."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import pytest

from broker.log.leader_epoch_cache import LeaderEpochCache

FILE = "leader-epoch-checkpoint"


def no_batches() -> Iterable[tuple[int, int]]:
    raise AssertionError("the checkpoint is valid: the batches must not be read")


def load(directory: Path) -> LeaderEpochCache:
    return LeaderEpochCache.load(directory, where="t-0", batch_epochs=no_batches)


def cache_with(directory: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = load(directory)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_assign_writes_kafkas_format_and_reloads(tmp_path: Path) -> None:
    cache = load(tmp_path)
    assert (cache.latest_epoch, cache.entries()) == (-1, [])
    assert not (tmp_path / FILE).exists()
    cache.assign(0, 0)
    cache.assign(0, 7)  # same epoch, later offset: nothing changes
    cache.assign(3, 1200)
    assert cache.entries() == [(0, 0), (3, 1200)]
    assert cache.latest_epoch == 3
    assert (tmp_path / FILE).read_text() == "0\n2\n0 0\n3 1200\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE]
    assert load(tmp_path).entries() == [(0, 0), (3, 1200)]


def test_assign_removes_non_monotonic_entries(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 5), (2, 10), (4, 20))
    cache.assign(3, 15)  # epoch 4 >= 3 goes
    assert cache.entries() == [(1, 5), (2, 10), (3, 15)]
    cache.assign(5, 10)  # start offsets 10 and 15 >= 10 go
    assert cache.entries() == [(1, 5), (5, 10)]
    cache.assign(5, 8)  # the latest epoch at an earlier offset: moved back
    assert cache.entries() == [(1, 5), (5, 8)]
    assert (tmp_path / FILE).read_text() == "0\n2\n1 5\n5 8\n"
    with pytest.raises(ValueError, match="epoch -1 at offset 3"):
        cache.assign(-1, 3)
    with pytest.raises(ValueError, match="epoch 2 at offset -3"):
        cache.assign(2, -3)


@pytest.mark.parametrize(
    ("entries", "requested", "log_end_offset", "expected"),
    [
        # UNDEFINED_EPOCH requested (a bootstrapping follower)
        ([(0, 0), (2, 10)], -1, 30, (-1, -1)),
        # empty cache
        ([], 0, 30, (-1, -1)),
        ([], 5, 30, (-1, -1)),
        # the latest epoch: the log end offset
        ([(0, 0), (2, 10)], 2, 30, (2, 30)),
        ([(4, 0)], 4, 0, (4, 0)),
        # an epoch that exists, not the latest: the start of the next one
        ([(0, 0), (2, 10), (4, 20)], 2, 30, (2, 20)),
        ([(0, 0), (2, 10), (4, 20)], 0, 30, (0, 10)),
        # an epoch between two known ones: the floor epoch and the start of the next
        ([(0, 5), (2, 10)], 1, 30, (0, 10)),
        ([(0, 0), (2, 10), (4, 20)], 3, 30, (2, 20)),
        # an epoch below every known one: the requested epoch and the first start offset
        ([(5, 10), (6, 20)], 4, 30, (4, 10)),
        # an epoch above every known one: undefined
        ([(2, 6)], 3, 30, (-1, -1)),
    ],
)
def test_end_offset_for_every_kafka_case(
    tmp_path: Path,
    entries: list[tuple[int, int]],
    requested: int,
    log_end_offset: int,
    expected: tuple[int, int],
) -> None:
    cache = cache_with(tmp_path, *entries)
    assert cache.end_offset_for(requested, log_end_offset) == expected


def test_truncate_from_end_removes_entries_at_or_after_the_end(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_end(100) == []
    assert cache.truncate_from_end(11) == [(4, 11)]
    assert cache.entries() == [(2, 6), (3, 8)]
    assert cache.truncate_from_end(7) == [(3, 8)]
    assert (tmp_path / FILE).read_text() == "0\n1\n2 6\n"
    assert cache.truncate_from_end(6) == [(2, 6)]
    assert (cache.entries(), cache.latest_epoch) == ([], -1)
    assert (tmp_path / FILE).read_text() == "0\n0\n"


def test_truncate_from_start_keeps_the_epoch_holding_the_new_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    assert cache.truncate_from_start(5) == []
    assert cache.truncate_from_start(6) == []  # exclusive: an entry at the start offset stays
    assert cache.entries() == [(2, 6), (3, 8), (4, 11)]
    assert cache.truncate_from_start(9) == [(2, 6), (3, 8)]
    assert cache.entries() == [(3, 9), (4, 11)]
    assert (tmp_path / FILE).read_text() == "0\n2\n3 9\n4 11\n"
    assert cache.truncate_from_start(30) == [(3, 9), (4, 11)]
    assert cache.entries() == [(4, 30)]


def test_clear_writes_an_empty_file(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0))
    cache.clear()
    assert cache.entries() == []
    assert (tmp_path / FILE).read_text() == "0\n0\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("0\n3\n0 0\n2 10\n", "line 2 announces 3 entries, the file has 2"),  # torn: an entry is missing
        ("0\n2\n0 0\n2 1 9\n", "line 4: expected '<epoch> <start_offset>' got '2 1 9'"),
        ("0\n2\n0 0\n2\n", "line 4: expected '<epoch> <start_offset>' got '2'"),
        ("0\n2\n0 0\nx 10\n", "line 4"),
        ("0\n2\n3 0\n2 10\n", "line 4: entry (2, 10) does not follow (3, 0)"),
        ("0\n2\n0 10\n2 10\n", "line 4: entry (2, 10) does not follow (0, 10)"),
        ("0\n1\n-2 10\n", "line 3: negative"),
        ("1\n0\n", "line 1: expected version 0"),
        ("", "needs a version and a count line"),
    ],
)
def test_a_torn_or_corrupt_checkpoint_is_reported_and_rebuilt_from_the_batches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, line: str
) -> None:
    path = tmp_path / FILE
    path.write_text(text)
    batches = [(-1, 0), (0, 3), (0, 5), (2, 10), (2, 12), (1, 14), (5, 20)]
    with caplog.at_level(logging.WARNING, logger="broker.log.leader_epoch_cache"):
        cache = LeaderEpochCache.load(tmp_path, where="t-0", batch_epochs=lambda: iter(batches))
    assert cache.entries() == [(0, 3), (2, 10), (5, 20)]
    assert path.read_text() == "0\n3\n0 3\n2 10\n5 20\n"
    messages = [r.getMessage() for r in caplog.records]
    assert any(str(path) in m and line in m and "rebuilding" in m for m in messages), messages
