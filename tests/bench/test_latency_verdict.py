"""bench/latency_verdict.py: a run is sustained only if it kept the rate, delivered everything, its latency
did not grow with a backlog and its p50 is at most 100 ms; a system slower than the rate is skipped."""

from __future__ import annotations

from typing import Any

from bench.latency_verdict import judge, skip_reason

GOOD: dict[str, Any] = {
    "rate": 10_000,
    "measured": 50_000,
    "received": 50_000,
    "achieved_rate": 10_000.0,
    "behind_after": None,
    "p50_ms": 4.0,
    "growth_ms": 1.0,
    "grace_s": 10.0,
}


def verdict(**changes: Any) -> tuple[bool, str]:
    result = judge(**{**GOOD, **changes})
    return result.sustained, result.text


def test_a_steady_fast_run_is_sustained() -> None:
    assert verdict() == (True, "sustained (50,000 messages measured)")


def test_the_issue_100k_run_a_standing_backlog_of_a_second_is_not_sustained() -> None:
    # issue 39: p50 1.36 s, p99 1.59 s at 100,000 msg/s, flat over the window, was called "sustained"
    run = {"rate": 100_000, "measured": 500_000, "received": 500_000, "achieved_rate": 100_000.0}
    assert verdict(**run, p50_ms=1360.0) == (
        False,
        "not sustained: p50 1,360 ms is above 100 ms (a standing backlog)",
    )


def test_p50_at_the_limit_passes_above_it_fails() -> None:
    assert verdict(p50_ms=100.0)[0] is True
    assert verdict(p50_ms=100.1)[0] is False


def test_latency_growing_with_the_backlog_is_not_sustained() -> None:
    assert verdict(growth_ms=50.0)[0] is True
    assert verdict(growth_ms=80.0, p50_ms=40.0) == (
        False,
        "not sustained: latency grew by 80 ms over the window (more than 50 ms: a growing backlog)",
    )


def test_the_first_failure_in_order_is_the_verdict() -> None:
    assert verdict(behind_after=12_345, received=10, achieved_rate=1.0, p50_ms=900.0) == (
        False,
        "not sustained: the producer fell 1 s behind schedule after 12,345 messages",
    )
    assert verdict(received=49_999, p50_ms=900.0) == (
        False,
        "not sustained: 49,999 of 50,000 received within 10 s",
    )
    assert verdict(achieved_rate=9_400.0) == (False, "not sustained: the producer reached 94% of the rate")
    assert verdict(achieved_rate=9_500.0)[0] is True
    assert verdict(p50_ms=None, growth_ms=None) == (False, "not sustained: no latencies measured")


def test_a_system_slower_than_the_rate_is_skipped_saying_so() -> None:
    assert skip_reason(100_000, 24_000.0) == (
        "skipped: its produce throughput (24,000 msg/s) is below the rate"
    )
    assert skip_reason(100_000, 100_000.0) is None
    assert skip_reason(10_000, 24_000.0) is None
    assert skip_reason(10_000, None) is None
