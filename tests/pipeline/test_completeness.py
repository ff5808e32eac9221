"""Deciding an hour: each state of :func:`pipeline.completeness.decide_hour`, from reconciliation rows and
partition watermarks built by hand (the end-to-end story is ``test_completeness_publisher.py``)."""

from __future__ import annotations

from audit.audit_report import TierCounts, WindowAudit
from audit.audit_tolerance import Tolerance
from pipeline.completeness import PartitionWatermark, decide_hour, hosts_missing
from pipeline.completeness_config import CompletenessPolicy
from pipeline.completeness_marker import HOUR_MS, CompletenessMarker, HourMarkers

HOUR = 1_795_334_400_000
AFTER_GRACE = HOUR + HOUR_MS + 600_000
AUDIT = CompletenessPolicy("audit", 600_000, Tolerance())


def window(produced: int, loaded: int, malformed: int = 0, mirrored: int | None = None) -> WindowAudit:
    tiers = {"producer": TierCounts(count=produced), "load": TierCounts(count=loaded, malformed=malformed)}
    if mirrored is not None:
        tiers["mirror"] = TierCounts(count=mirrored)
    return WindowAudit(
        topic="views",
        window_start_ms=HOUR,
        window_ms=HOUR_MS,
        expected=produced,
        loaded=loaded,
        malformed=malformed,
        missing=max(0, produced - loaded - malformed),
        duplicate=max(0, loaded + malformed - produced),
        late=0,
        status="COMPLETE",
        tiers=tiers,
        last_load_sequence=4,
        last_load_run_id="run-4",
    )


def decide(w: WindowAudit | None, now_ms: int = AFTER_GRACE, **kwargs: object) -> tuple[str, int, int, str]:
    found = decide_hour("views", HOUR, policy=kwargs.pop("policy", AUDIT), now_ms=now_ms, window=w, **kwargs)  # type: ignore[arg-type]
    return found.state, found.missing, found.duplicate, found.reason


def marked() -> HourMarkers:
    return HourMarkers(
        success=CompletenessMarker(
            kind="lumber-completeness",
            job="hourly",
            topic="views",
            hour="2026-11-22T08",
            hour_start_ms=HOUR,
            state="COMPLETE",
            revision=1,
            require="audit",
            expected=8,
            loaded=8,
            quarantined=0,
            missing=0,
            duplicate=0,
            manifest_sequence=3,
            manifest_run_id="run-3",
            decided_at_ms=AFTER_GRACE,
        )
    )


def test_complete_needs_the_counts_and_the_grace() -> None:
    assert decide(window(8, 7, 1), markers=HourMarkers()) == (
        "COMPLETE",
        0,
        0,
        "loaded + quarantined = produced (8 of 8)",
    )
    state, _, _, reason = decide(window(8, 7, 1), now_ms=AFTER_GRACE - 1, markers=HourMarkers())
    assert state == "OPEN"
    assert reason.startswith("open until 2026-11-22T09:00 + grace 600 s")
    found = decide_hour(
        "views", HOUR, policy=AUDIT, now_ms=AFTER_GRACE, window=window(8, 8), markers=HourMarkers()
    )
    assert (found.manifest_sequence, found.manifest_run_id, found.expected, found.loaded) == (
        4,
        "run-4",
        8,
        8,
    )


def test_missing_or_extra_records_beyond_the_tolerance_are_incomplete_or_late() -> None:
    assert decide(window(8, 4), markers=HourMarkers()) == (
        "INCOMPLETE",
        4,
        0,
        "producers counted 8, loaded + quarantined 4: 4 missing",
    )
    assert decide(window(8, 10), markers=marked())[:3] == ("LATE", 0, 2)
    lenient = CompletenessPolicy("audit", 600_000, Tolerance(count=4))
    assert decide(window(8, 4), markers=HourMarkers(), policy=lenient)[0] == "COMPLETE"
    assert decide(None, markers=HourMarkers())[0] == "INCOMPLETE"
    assert decide(window(8, 8, mirrored=9), markers=HourMarkers())[3] == (
        "mirrors counted 9, loaded + quarantined 8: 1 missing"
    )


def test_watermarks_decide_topics_without_producer_audit() -> None:
    policy = CompletenessPolicy("watermark", 600_000, Tolerance())
    passed = (PartitionWatermark(0, 100, 150, 100), PartitionWatermark(1, 40, 40, None))  # 1 is idle
    behind = (PartitionWatermark(0, 99, 150, 100), PartitionWatermark(1, 40, 41, None))
    assert decide(None, markers=HourMarkers(), policy=policy, watermarks=passed)[0] == "COMPLETE"
    state, _, _, reason = decide(None, markers=HourMarkers(), policy=policy, watermarks=behind)
    assert state == "INCOMPLETE"
    assert reason == (
        "partitions not loaded past the hour's end + grace: 0 (committed 99, first offset after the grace "
        "100), 1 (committed 40, log end 41)"
    )


def test_overdue_and_the_hosts_short_of_records() -> None:
    found = decide_hour(
        "views",
        HOUR,
        policy=AUDIT,
        now_ms=HOUR + HOUR_MS + 7_200_000,
        window=window(8, 4),
        markers=HourMarkers(),
        alert_after_ms=7_200_000,
    )
    assert found.overdue
    assert hosts_missing({"web-1": 4, "web-2": 4}, {"web-1": 4}) == {"web-2": 4}
    assert hosts_missing({"web-1": 4}, {"web-1": 4, "(none)": 2}) == {}
