"""The tables of the Kafka comparison (:mod:`bench.paper_kafka`), Markdown for ``BENCHMARKS.md``.

Two tables: the cases (records/s and broker CPU seconds per million records, each ``median [min - max]``
over the rounds, and the ratios Lumber / Kafka of the medians, with issue 39's goal beside the cases that
have one), then the partitions (each broker's throughput at 1, 4, 10, 100 (1,000) partitions and its fraction
of its own one-partition figure). A line per failure follows. Pure formatting, no state.
"""

from __future__ import annotations

from bench.paper_kafka import (
    CONSUME,
    KAFKA,
    KCAT_CONSUME,
    KCAT_PRODUCE,
    LUMBER,
    PRODUCE_CASES,
    KafkaComparison,
    partitions_case,
)
from bench.spread import Spread, ratio, ratio_text

#: issue 39's goals (Lumber / Kafka, in one run), by case: (throughput at least, CPU per record at most)
GOALS: dict[str, tuple[float | None, float | None]] = {
    "produce, batch 50, acks=1": (1.0, 1.5),
    "produce, batch 50, acks=all": (1.0, 1.5),
    CONSUME: (1.0, 1.5),
}
#: issue 39's partitions goals for Lumber, (partitions, of partitions, at least): 4 at least 1.0x of 1,
#: 1,000 at least 0.8x of 10 (as Kafka keeps it)
PARTITION_GOALS = ((4, 1, 1.0), (1000, 10, 0.8))


def _goal(value: float | None, goal: float | None, at_least: bool) -> str:
    if goal is None:
        return ""
    sign = ">=" if at_least else "<="
    if value is None:
        return f"{sign} {goal:g}x"
    met = value >= goal if at_least else value <= goal
    return f"{sign} {goal:g}x: {'met' if met else 'not met'}"


def case_names(comparison: KafkaComparison) -> list[str]:
    names = [case.name for case in PRODUCE_CASES] + [CONSUME, KCAT_PRODUCE, KCAT_CONSUME]
    return [name for name in names if name in comparison.cases]


def markdown(comparison: KafkaComparison) -> str:
    lines = [
        (
            f"{comparison.records:,} records of 100 bytes, {comparison.rounds} rounds, median [min - max]; "
            "broker CPU in seconds per million records"
        ),
        "",
        (
            "| case | Kafka rec/s | Lumber rec/s | Lumber / Kafka | goal | Kafka broker CPU "
            "| Lumber broker CPU | Lumber / Kafka | goal |"
        ),
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for case in case_names(comparison):
        by_broker = comparison.cases[case]
        kafka, lumber = by_broker.get(KAFKA), by_broker.get(LUMBER)
        k_rate = kafka.rate if kafka else Spread()
        l_rate = lumber.rate if lumber else Spread()
        k_cpu = kafka.cpu_per_million if kafka else Spread()
        l_cpu = lumber.cpu_per_million if lumber else Spread()
        rate_goal, cpu_goal = GOALS.get(case, (None, None))
        rate_ratio, cpu_ratio = ratio(l_rate, k_rate), ratio(l_cpu, k_cpu)
        lines.append(
            f"| {case} | {k_rate.text()} | {l_rate.text()} | {ratio_text(rate_ratio)} "
            f"| {_goal(rate_ratio, rate_goal, at_least=True)} | {k_cpu.text(2)} | {l_cpu.text(2)} "
            f"| {ratio_text(cpu_ratio)} | {_goal(cpu_ratio, cpu_goal, at_least=False)} |"
        )
    if comparison.partitions:
        lines += ["", *partition_lines(comparison)]
    lines += ["", *(f"- {note}" for note in comparison.notes)]
    lines += [f"- FAILED {failure}" for failure in comparison.failures]
    return "\n".join(lines).rstrip() + "\n"


def partition_lines(comparison: KafkaComparison) -> list[str]:
    """Throughput by partition count, and each broker's fraction of its own figure at the smallest count."""
    lines = [
        (
            "| one producer, batch 50, acks=1 | Kafka rec/s | of its fewest | Lumber rec/s | of its fewest "
            "| Lumber / Kafka |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phase in ("produce", "consume"):
        first = {KAFKA: Spread(), LUMBER: Spread()}
        for index, partitions in enumerate(comparison.partitions):
            by_broker = comparison.cases.get(partitions_case(phase, partitions), {})
            rates = {
                name: (by_broker[name].rate if name in by_broker else Spread()) for name in (KAFKA, LUMBER)
            }
            if index == 0:
                first = rates
            lines.append(
                f"| {partitions_case(phase, partitions)} | {rates[KAFKA].text()} "
                f"| {ratio_text(ratio(rates[KAFKA], first[KAFKA]))} | {rates[LUMBER].text()} "
                f"| {ratio_text(ratio(rates[LUMBER], first[LUMBER]))} "
                f"| {ratio_text(ratio(rates[LUMBER], rates[KAFKA]))} |"
            )
    goals = []
    for many, few, at_least in PARTITION_GOALS:
        if many in comparison.partitions and few in comparison.partitions:
            for name in (KAFKA, LUMBER):
                cases = comparison.cases
                ours = cases.get(partitions_case("produce", many), {}).get(name)
                base = cases.get(partitions_case("produce", few), {}).get(name)
                value = ratio(ours.rate, base.rate) if ours and base else None
                goals.append(
                    f"{name} produce, {many:,} / {few:,} partitions: {ratio_text(value)} "
                    f"(goal for Lumber {_goal(value, at_least, at_least=True)})"
                )
    return lines + ([""] + [f"- {goal}" for goal in goals] if goals else [])
