"""bench/broker_cpu.py: utime + stime of /proc/<pid>/stat lines, a real process's reading, a gone one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.broker_cpu import BrokerCpu, BrokerGoneError, BrokersCpu, per_million, stat_cpu_seconds

# a real line's shape: pid (comm) state ppid ... utime=field 14, stime=field 15
LINE = "4242 (java) S 1 4242 4242 0 -1 4194560 9 0 0 0 1234 567 0 0 20 0 40 0 777 0 0\n"


def test_utime_plus_stime_in_seconds() -> None:
    assert stat_cpu_seconds(LINE, 100) == pytest.approx((1234 + 567) / 100)
    assert stat_cpu_seconds(LINE, 1000) == pytest.approx(1.801)


def test_a_command_name_with_spaces_and_parentheses() -> None:
    line = LINE.replace("(java)", "(a) b (c) d)")
    assert stat_cpu_seconds(line, 100) == pytest.approx(18.01)


def test_a_line_that_is_not_a_stat_line() -> None:
    with pytest.raises(ValueError, match="no '\\)'"):
        stat_cpu_seconds("4242 java S 1", 100)
    with pytest.raises(ValueError, match="5 fields, expected at least 15"):
        stat_cpu_seconds("4242 (java) S 1 2", 100)


def test_this_process_reads_as_os_times_says() -> None:
    ticks = 1 / os.sysconf("SC_CLK_TCK")
    before = os.times()
    reading = BrokerCpu(os.getpid()).seconds()
    after = os.times()
    assert before.user + before.system - 2 * ticks <= reading <= after.user + after.system + 2 * ticks


def test_a_phase_counts_the_child_process_cpu_it_spent() -> None:
    # the child spins until its own CPU clock passed 0.3 s, then waits for stdin: a CPU amount, not a time
    spin = (
        "import sys, time\n"
        "while time.process_time() < 0.3: pass\n"
        "print('done', flush=True); sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            cpu = BrokerCpu(child.pid)
            with cpu.phase() as spent:
                assert child.stdout is not None
                assert child.stdout.readline() == "done\n"
            # most of the spin comes after the first reading (the interpreter starts first): what the phase
            # counted is at most the process's total, and the process's total holds the whole spin
            total = cpu.seconds()
            assert total >= 0.3 - 0.02
            assert 0.15 <= spent.seconds <= total
        finally:
            child.kill()


def test_a_gone_process_is_an_error_not_zero() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(BrokerGoneError, match=f"process {child.pid} is gone"):
        BrokerCpu(child.pid).seconds()


def test_several_processes_sum_and_a_gone_one_is_an_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ours, theirs = BrokerCpu(os.getpid()), BrokerCpu(child.pid)
        low = ours.seconds() + theirs.seconds()
        both = BrokersCpu((os.getpid(), child.pid)).seconds()
        high = ours.seconds() + theirs.seconds()
        assert low <= both <= high
    finally:
        child.kill()
        child.wait()
    with pytest.raises(BrokerGoneError, match=f"process {child.pid} is gone"):
        BrokersCpu((os.getpid(), child.pid)).seconds()


def test_per_million() -> None:
    assert per_million(2.5, 500_000) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="0 records"):
        per_million(1.0, 0)
