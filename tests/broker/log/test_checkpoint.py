from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.checkpoint import (
    read_checkpoint,
    read_checkpoint_lines,
    write_checkpoint,
    write_checkpoint_lines,
)
from broker.log.errors import LogStorageError
from broker.record.topic_partition import TopicPartition


def test_round_trip_and_exact_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {TopicPartition("b", 1): 977, TopicPartition("a", 0): 1200}
    write_checkpoint(path, offsets)
    assert path.read_text() == "0\n2\na 0 1200\nb 1 977\n"
    assert read_checkpoint(path) == offsets
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "none") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "needs a version and a count line"),
        ("1\n0\n", "line 1: expected version 0 got '1'"),
        ("0\nx\n", "line 2: expected an entry count got 'x'"),
        ("0\n2\na 0 1\n", "announces 2 entries, the file has 1"),
        ("0\n1\na 0\n", "line 3: expected '<topic> <partition> <offset>' got 'a 0'"),
        ("0\n1\na zero 1\n", "line 3"),
        ("0\n1\na 0 -5\n", "line 3"),
    ],
)
def test_malformed_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(LogStorageError, match=message):
        read_checkpoint(path)


def test_the_generic_lines_carry_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_checkpoint_lines(path, ["0 0", "3 1200"])
    assert path.read_text() == "0\n2\n0 0\n3 1200\n"
    assert read_checkpoint_lines(path) == [(3, "0 0"), (4, "3 1200")]
    assert read_checkpoint_lines(tmp_path / "none") is None
    write_checkpoint_lines(path, [])
    assert path.read_text() == "0\n0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
