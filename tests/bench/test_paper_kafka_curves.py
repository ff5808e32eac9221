"""bench/paper_kafka_curves.py: the PNG of throughput against partitions and connections, small enough to
commit; panels whose phases did not run are drawn empty, not left out."""

from __future__ import annotations

from pathlib import Path

from bench.paper_kafka import KAFKA, LUMBER, KafkaComparison, partitions_case
from bench.paper_kafka_connections import connections_case
from bench.paper_kafka_curves import draw_curves, has_curves


def test_a_png_of_both_brokers_under_200_kb(tmp_path: Path) -> None:
    comparison = KafkaComparison(records=20_000, rounds=2, partitions=[1, 4, 10], connections=[1, 10])
    for broker, scale in ((KAFKA, 1.0), (LUMBER, 0.7)):
        for count in (1, 4, 10):
            for phase in ("produce", "consume"):
                spread = comparison.result(partitions_case(phase, count), broker).rate
                spread.add(scale * 100_000 / count)
                spread.add(scale * 120_000 / count)
        for count in (1, 10):
            comparison.result(connections_case("produce", count), broker).rate.add(scale * 90_000)
    assert has_curves(comparison)
    path = tmp_path / "results" / "kafka_growth.png"
    draw_curves(comparison, path, "2026-11-29 02:00")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 10_000 < len(data) < 200_000


def test_nothing_to_draw_without_partitions_or_connections() -> None:
    assert not has_curves(KafkaComparison(records=1, rounds=1, partitions=[]))
    assert has_curves(KafkaComparison(records=1, rounds=1, partitions=[], connections=[1]))
