"""The growth curves of the Kafka comparison (issue 39): throughput against partitions and against client
connections, Apache Kafka and Lumber on the same axes, as a PNG next to ``BENCHMARKS.md``.

Four panels: produce and consume records/s against the partition count (one producer, batch 50,
``acks=1``; one consumer of all of them) and against the connection count (``N`` producers, ``N``
consumers, one partition, the same records in all); each point the median of the rounds, its bar the min
and max; both axes logarithmic. A panel whose phases did not run says so. Pure drawing from a
:class:`~bench.paper_kafka.KafkaComparison`, matplotlib's Agg backend (no display); the figure is sized
and compressed to stay well under 200 KB.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.paper_kafka import KAFKA, LUMBER, KafkaComparison, partitions_case
from bench.paper_kafka_connections import connections_case

COLOURS = {KAFKA: "tab:gray", LUMBER: "tab:green"}
MARKERS = {KAFKA: "s", LUMBER: "o"}


def has_curves(comparison: KafkaComparison) -> bool:
    return bool(comparison.partitions or comparison.connections)


def _panel(
    axis: Any,
    comparison: KafkaComparison,
    counts: list[int],
    case: Callable[[str, int], str],
    phase: str,
    what: str,
) -> None:
    axis.set_title(f"{phase} against {what}", fontsize=10)
    axis.set_xlabel(what)
    axis.set_ylabel("records/s")
    plotted = False
    for name in (KAFKA, LUMBER):
        xs, ys, low, high = [], [], [], []
        for count in counts:
            result = comparison.cases.get(case(phase, count), {}).get(name)
            if result is None or not result.rate:
                continue
            xs.append(count)
            ys.append(result.rate.median)
            low.append(result.rate.median - result.rate.low)
            high.append(result.rate.high - result.rate.median)
        if xs:
            plotted = True
            axis.errorbar(
                xs,
                ys,
                yerr=[low, high],
                label=name,
                color=COLOURS[name],
                marker=MARKERS[name],
                capsize=3,
            )
    if not plotted:
        axis.text(0.5, 0.5, "not run", ha="center", va="center", transform=axis.transAxes)
        return
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.grid(visible=True, which="both", alpha=0.3)
    axis.legend(fontsize=8)


def draw_curves(comparison: KafkaComparison, path: Path, started: str) -> None:
    """Write the four panels to ``path`` (PNG)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for column, phase in enumerate(("produce", "consume")):
        _panel(axes[0][column], comparison, comparison.partitions, partitions_case, phase, "partitions")
        _panel(axes[1][column], comparison, comparison.connections, connections_case, phase, "connections")
    figure.suptitle(
        f"Apache Kafka and Lumber, one broker each, {comparison.rounds} rounds (median, bars min-max), "
        f"{started}\nrecords of 100 bytes: {comparison.produce_passes * comparison.records:,} a produce "
        f"phase against partitions, {comparison.records:,} against connections",
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
