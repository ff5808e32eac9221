"""bench/broker_rss.py: VmRSS of /proc/<pid>/status texts, a real process's reading, a gone one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.broker_cpu import BrokerGoneError
from bench.broker_rss import BrokerRss, status_rss_bytes

STATUS = "Name:\tjava\nVmPeak:\t 4000000 kB\nVmSize:\t 3900000 kB\nVmRSS:\t  123456 kB\nThreads:\t55\n"


def test_vmrss_in_bytes() -> None:
    assert status_rss_bytes(STATUS) == 123456 * 1024


def test_a_status_text_without_or_with_a_strange_vmrss() -> None:
    with pytest.raises(ValueError, match="no VmRSS line"):
        status_rss_bytes("Name:\tkthreadd\nState:\tS (sleeping)\n")
    with pytest.raises(ValueError, match="not of the form 'VmRSS: <n> kB'"):
        status_rss_bytes("VmRSS:\t 12 MB\n")


def test_this_process_and_two_together() -> None:
    ours = int(
        next(line for line in Path("/proc/self/status").read_text().splitlines() if "VmRSS" in line).split()[
            1
        ]
    )
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        one = BrokerRss((os.getpid(),)).bytes()
        assert abs(one - ours * 1024) < 64 * 1024 * 1024
        both = BrokerRss((os.getpid(), child.pid)).bytes()
        assert both > one
        assert BrokerRss((os.getpid(),)).mib() == pytest.approx(
            BrokerRss((os.getpid(),)).bytes() / 2**20, rel=0.1
        )
    finally:
        child.kill()
        child.wait()
    with pytest.raises(BrokerGoneError, match=f"process {child.pid} is gone"):
        BrokerRss((child.pid,)).bytes()
