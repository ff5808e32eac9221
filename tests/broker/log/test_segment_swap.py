"""The swap of a cleaned segment that holds no batch (broker/log/segment_swap.py), killed with SIGKILL in
a real process at its commit point and after the old segments were unlinked: a restart rolls it forward
(the swap's own end is its base offset: the old segment there is replaced, later old ones stay as an
uncleaned stretch), reads step over the gap, and the next pass cleans to the same log as an uninterrupted
one. The interrupted swaps of a segment with batches: test_log_cleaner.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker.log.log_verifier import verify_partition
from tests.broker.log.helpers import read_all
from tests.broker.log.swap_killer import KEYS, ROUNDS, TOPIC_DIR, superseded_log, value
from tests.broker.log.test_cleaner import clean_once, first_batch_at, layout


def kill_in_swap(root: Path, stage: str) -> None:
    """Run the swap killer to ``stage``, then SIGKILL it."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.broker.log.swap_killer", str(root), stage],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == f"paused {stage}"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert child.stdout is not None
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    ("stage", "files_at_kill", "after_restart"),
    [
        # step 2 done: the empty swap committed, both old segments of its group still there (and the
        # next group's .cleaned files, created before the swap on the pass's swap thread)
        (
            "committed",
            {"0.log", "0.log.swap", "20.log", "40.log", "40.log.cleaned", "60.log"},
            [(0, 0), (20, 40), (40, 60)],
        ),
        # step 3 done: the old segments unlinked, the swap not yet renamed
        ("old-deleted", {"0.log.swap", "40.log", "40.log.cleaned", "60.log"}, [(0, 0), (40, 60)]),
    ],
)
def test_a_kill_during_the_swap_of_an_empty_cleaned_segment_is_rolled_forward(
    tmp_path: Path, stage: str, files_at_kill: set[str], after_restart: list[tuple[int, int]]
) -> None:
    kill_in_swap(tmp_path, stage)
    directory = tmp_path / TOPIC_DIR
    logs = [p.name.split(".", 1) for p in directory.iterdir() if ".log" in p.name]
    assert {f"{int(base)}.{rest}" for base, rest in logs} == files_at_kill
    assert (directory / f"{0:020d}.log.swap").stat().st_size == 0

    log = superseded_log(tmp_path)
    assert [p.name for p in directory.iterdir() if p.name.endswith((".swap", ".cleaned"))] == []
    assert [(base, end) for base, end, _ in layout(log)] == [*after_restart, (60, 61)]
    assert layout(log)[0][2] == 0
    assert (log.log_start_offset, log.log_end_offset) == (0, 61)
    # a read in the gap gets the next batch: the old round-1 segment where it stayed, else round 2's
    assert first_batch_at(log, 0) == (after_restart[1][0], after_restart[1][0] + 10)
    assert verify_partition(directory).damage == ()

    # the next pass (no checkpoint was written: the whole log is dirty again) merges what is below the
    # active segment into one group: the empty segment, the stale round-1 one where it stayed, round 2's
    assert clean_once(tmp_path, log) == 60
    assert [(base, end) for base, end, _ in layout(log)] == [(0, 60), (60, 61)]
    assert [first_batch_at(log, offset) for offset in (0, 39, 40, 50, 60)] == [
        (40, 50),
        (40, 50),
        (40, 50),
        (50, 60),
        (60, 61),
    ]
    assert [(r.key, r.value) for r in read_all(log, max_offset=60)] == [
        (f"k{key:02d}".encode(), value(ROUNDS - 1, key)) for key in range(KEYS)
    ]
    assert verify_partition(directory).damage == ()
    log.close()
