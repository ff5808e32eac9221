"""Throttling repeated failed logins by host (broker/network/failed_authentications.py), on a fake clock."""

from __future__ import annotations

import pytest

from broker.network.failed_authentications import FailedAuthentications


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_host_is_throttled_after_max_failures_within_the_window_and_freed_after() -> None:
    clock = Clock()
    failures = FailedAuthentications(3, 60.0, clock=clock)
    for _ in range(2):
        failures.record_failure("10.0.0.1")
        clock.now += 10
    assert failures.throttled_s("10.0.0.1") == 0.0
    failures.record_failure("10.0.0.1")  # the third, 20 s after the first
    assert failures.throttled_s("10.0.0.1") == pytest.approx(40.0)
    assert failures.throttled_s("10.0.0.2") == 0.0  # another host is not affected
    clock.now += 39.9
    assert failures.throttled_s("10.0.0.1") == pytest.approx(0.1)
    clock.now += 0.2
    assert failures.throttled_s("10.0.0.1") == 0.0  # the first failure left the window
    failures.record_failure("10.0.0.1")  # the last three (at 10, 20 and 60.1 s) are within 60 s again
    assert failures.throttled_s("10.0.0.1") == pytest.approx(9.9)


def test_memory_is_bounded_by_forgetting_the_longest_quiet_host() -> None:
    clock = Clock()
    failures = FailedAuthentications(1, 60.0, max_hosts=2, clock=clock)
    for host in ("a", "b", "c"):
        failures.record_failure(host)
    assert failures.throttled_s("a") == 0.0  # forgotten
    assert failures.throttled_s("b") > 0
    assert failures.throttled_s("c") > 0
    with pytest.raises(ValueError, match="must be positive"):
        FailedAuthentications(0, 60.0)
