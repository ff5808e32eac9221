"""bench/machine_idle.py: the machine's idle share over a phase from /proc/stat's cpu line, exact on written
readings, and a real phase that keeps one core busy shows at most the other core idle."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.machine_idle import MachineIdle, idle_share, idle_ticks

STAT = (
    "cpu  1000 20 300 5000 100 7 8 9 40 50\n"
    "cpu0 500 10 150 2500 50 3 4 4 20 25\n"
    "cpu1 500 10 150 2500 50 4 4 5 20 25\n"
    "intr 12345\n"
)


def test_idle_and_iowait_of_all_eight_states() -> None:
    # idle 5000 + iowait 100; user..steal sum to 6444 (guest and guest_nice are inside user and nice)
    assert idle_ticks(STAT) == (5100, 6444)


def test_share_between_two_readings() -> None:
    assert idle_share((5100, 6444), (5150, 6644)) == 0.25
    assert idle_share((5100, 6444), (5100, 6444)) == 1.0  # no tick passed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("intr 1 2 3\n", "expected its first line to start with 'cpu', got 'intr 1 2 3'"),
        ("cpu  1 2 3 4\n", "expected at least 8 counters on the 'cpu' line, got 4"),
    ],
)
def test_not_a_stat_file(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        idle_ticks(text)


def test_readings_out_of_order() -> None:
    with pytest.raises(ValueError, match=r"readings out of order: \(5150, 6644\) then \(5100, 6444\)"):
        idle_share((5150, 6644), (5100, 6444))


def test_phase_reads_the_file_before_and_after(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    with MachineIdle(stat).phase() as seen:
        stat.write_text("cpu  1100 20 320 5080 100 7 8 9 40 50\n")
    # 200 more ticks, 80 of them idle
    assert seen.share == 0.4


def test_a_busy_core_is_not_idle() -> None:
    # this thread spins for 0.6 s: one core is busy throughout (or something else runs in its place), so at
    # most the other cores' share of all ticks can be idle (half on two cores; a tick's rounding aside)
    cores = os.cpu_count() or 1
    stop = time.monotonic() + 0.6
    with MachineIdle().phase() as seen:
        while time.monotonic() < stop:
            pass
    assert 0.0 <= seen.share <= 1 - 1 / cores + 0.05
