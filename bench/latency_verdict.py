"""The verdict on one end-to-end latency run at a fixed rate: sustained, or not and why; and whether a system
is run at a rate at all.

A run is **sustained** only if all of these hold (checked in this order; the first that fails is the verdict):

1. the paced producer never fell ``MAX_BEHIND_S`` (1 s) behind its schedule;
2. every message sent in the measured window was received;
3. the producer reached ``SUSTAINED_FRACTION`` (95 %) of the rate;
4. latency did not grow with the backlog: the median latency of the window's last fifth (by send time) is
   at most ``MAX_LATENCY_GROWTH_MS`` (50 ms) above that of its first fifth. A consumer or broker falling
   behind builds a backlog that every later message waits behind, so its latency climbs through the window;
5. the p50 is at most ``MAX_P50_MS`` (100 ms). A standing backlog (latency high but flat: the issue's
   p50 1.36 s at 100,000 msg/s) is not sustained either, nor is a latency set by a flush interval.

A system is not run at a rate its measured produce throughput is below (:func:`skip_reason`): such a run
could only fall behind, and its verdict would say nothing new. Pure functions, no state.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BEHIND_S = 1.0
SUSTAINED_FRACTION = 0.95
MAX_LATENCY_GROWTH_MS = 50.0
MAX_P50_MS = 100.0


@dataclass(frozen=True)
class LatencyVerdict:
    sustained: bool
    text: str


def judge(
    *,
    rate: int,
    measured: int,
    received: int,
    achieved_rate: float,
    behind_after: int | None,
    p50_ms: float | None,
    growth_ms: float | None,
    grace_s: float,
) -> LatencyVerdict:
    """The verdict on a run at ``rate`` msg/s whose window held ``measured`` messages, ``received`` of them
    within ``grace_s`` of the end; ``behind_after`` is the count sent when the producer fell behind (None if
    it never did); ``growth_ms`` the last fifth's median latency minus the first fifth's."""
    if behind_after is not None:
        return LatencyVerdict(
            False,
            f"not sustained: the producer fell {MAX_BEHIND_S:.0f} s behind schedule after "
            f"{behind_after:,} messages",
        )
    if received < measured:
        return LatencyVerdict(
            False, f"not sustained: {received:,} of {measured:,} received within {grace_s:.0f} s"
        )
    if achieved_rate < SUSTAINED_FRACTION * rate:
        return LatencyVerdict(
            False, f"not sustained: the producer reached {achieved_rate / rate:.0%} of the rate"
        )
    if growth_ms is None or p50_ms is None:
        return LatencyVerdict(False, "not sustained: no latencies measured")
    if growth_ms > MAX_LATENCY_GROWTH_MS:
        return LatencyVerdict(
            False,
            f"not sustained: latency grew by {growth_ms:,.0f} ms over the window (more than "
            f"{MAX_LATENCY_GROWTH_MS:.0f} ms: a growing backlog)",
        )
    if p50_ms > MAX_P50_MS:
        return LatencyVerdict(
            False, f"not sustained: p50 {p50_ms:,.0f} ms is above {MAX_P50_MS:.0f} ms (a standing backlog)"
        )
    return LatencyVerdict(True, f"sustained ({measured:,} messages measured)")


def skip_reason(rate: int, produce_rate: float | None) -> str | None:
    """Why a system whose produce throughput was ``produce_rate`` msg/s is not run at ``rate`` (None: run it;
    also when its throughput was not measured, so that the run itself decides)."""
    if produce_rate is None or produce_rate >= rate:
        return None
    return f"skipped: its produce throughput ({produce_rate:,.0f} msg/s) is below the rate"
