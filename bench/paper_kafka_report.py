"""The tables of the Kafka comparison (:mod:`bench.paper_kafka`), Markdown for ``BENCHMARKS.md``.

The cases (records/s and broker CPU seconds per million records, each ``median [min - max]`` over the
rounds, and the ratios Lumber / Kafka of the medians, with issue 39's goal beside the cases that have one);
the partitions and the connections (each broker's throughput at 1, 4, 10, 100 (1,000) partitions, at 1, 10,
100 connections, and its fraction of its own figure at the smallest count); replication (three brokers each:
RF 1 ``acks=1`` and RF 3 ``acks=all``, each system's ratio of the two against issue 39's goal, Lumber's at
least Kafka's); memory (each broker's RSS before and after 1,000 partitions); the machine (every case's
broker cores, CPU seconds over wall seconds, and the machine's idle share in percent of both cores, each
``median [min - max]``: a phase with a core idle was bound by its broker or client, one with none by the
machine); the warm-up (each shape's passes before round 1 and the first and last pass's rate). Each table
only when its phases ran. A line per note and per failure follows. Pure formatting, no state.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.paper_kafka import (
    CONSUME,
    KAFKA,
    KCAT_CONSUME,
    KCAT_PRODUCE,
    LUMBER,
    PRODUCE_CASES,
    CaseResult,
    KafkaComparison,
    partitions_case,
)
from bench.paper_kafka_connections import connections_case
from bench.paper_kafka_memory import memory_case
from bench.paper_kafka_replication import BASELINE, REPLICATED, replication_case
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
    ]
    if comparison.consume_passes > 1:
        lines[0] += (
            f"; each confluent-kafka consume phase: {comparison.consume_passes} consumers read its topic "
            f"in turn ({comparison.consume_passes * comparison.records:,} records)"
        )
    if comparison.produce_passes > 1:
        lines[0] += (
            f"; each produce phase of the partitions' cases sends the records {comparison.produce_passes} "
            f"times ({comparison.produce_passes * comparison.records:,} records), its consume phase "
            "reading at least as many records as the consume phase"
        )
    if case_names(comparison):
        lines += [
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
    if comparison.connections:
        lines += [
            "",
            *growth_lines(
                comparison, "one topic, batch 50, acks=1", comparison.connections, connections_case
            ),
        ]
    if comparison.replication:
        lines += ["", *replication_lines(comparison)]
    if comparison.memory:
        lines += ["", *memory_lines(comparison)]
    if any(result.idle for by_broker in comparison.cases.values() for result in by_broker.values()):
        lines += ["", *machine_lines(comparison)]
    if comparison.warm_up:
        lines += ["", *warm_up_lines(comparison)]
    lines += ["", *(f"- {note}" for note in comparison.notes)]
    lines += [f"- FAILED {failure}" for failure in comparison.failures]
    return "\n".join(lines).rstrip() + "\n"


def partition_lines(comparison: KafkaComparison) -> list[str]:
    """Throughput by partition count, each broker's fraction of its own figure at the smallest count, and
    issue 39's partition goals."""
    lines = growth_lines(comparison, "one producer, batch 50, acks=1", comparison.partitions, partitions_case)
    goals = []
    for many, few, at_least in PARTITION_GOALS:
        if many in comparison.partitions and few in comparison.partitions:
            for name in (KAFKA, LUMBER):
                cases = comparison.cases
                ours = cases.get(partitions_case("produce", many), {}).get(name)
                base = cases.get(partitions_case("produce", few), {}).get(name)
                value = ratio(ours.rate, base.rate) if ours and base else None
                goal = (
                    f"{name} produce, {many:,} / {few:,} partitions: {ratio_text(value)} "
                    f"(goal for Lumber {_goal(value, at_least, at_least=True)})"
                )
                if ours and base:
                    goal += _shares(few, many, base, ours, at_least if name == LUMBER else None)
                goals.append(goal)
    return lines + ([""] + [f"- {goal}" for goal in goals] if goals else [])


def _shares(few: int, many: int, base: CaseResult, ours: CaseResult, goal: float | None) -> str:
    """What the client's and the broker's CPU per record say of a partitions ratio: on two cores they share,
    with none idle, each phase runs at two cores over the two costs' sum, so the ratio is (client + broker at
    ``few``) / (client + broker at ``many``): the client's own ratio alone if the broker cost nothing, and,
    for a ``goal``, the most the broker may spend per record at ``many`` to reach it with these client
    costs."""
    spreads = (
        base.client_cpu_per_million,
        ours.client_cpu_per_million,
        base.cpu_per_million,
        ours.cpu_per_million,
    )
    if not all(spread.values for spread in spreads) or not ours.client_cpu_per_million.median:
        return ""
    client_few, client_many, broker_few, broker_many = (spread.median for spread in spreads)
    text = (
        f"; CPU s per million records at {few:,} / {many:,}: client {client_few:.2f} / {client_many:.2f} "
        f"(alone {client_few / client_many:.2f}x: a broker costing nothing), broker {broker_few:.2f} / "
        f"{broker_many:.2f}"
    )
    if goal is not None:
        most = (client_few + broker_few) / goal - client_many
        text += f"; {goal:g}x with this client needs the broker at {many:,} at most {most:.2f}"
    return text


def _rates(by_broker: dict[str, CaseResult], attribute: str = "rate") -> dict[str, Spread]:
    return {
        name: (getattr(by_broker[name], attribute) if name in by_broker else Spread())
        for name in (KAFKA, LUMBER)
    }


def growth_lines(
    comparison: KafkaComparison, title: str, counts: list[int], case: Callable[[str, int], str]
) -> list[str]:
    """A row per phase and count: each broker's rate, its fraction of its own rate at the first count,
    Lumber / Kafka, and each broker's and its client's CPU seconds per million records."""
    lines = [
        (
            f"| {title} | Kafka rec/s | of its fewest | Lumber rec/s | of its fewest | Lumber / Kafka "
            "| Kafka broker CPU | Lumber broker CPU | client CPU, Kafka | client CPU, Lumber |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phase in ("produce", "consume"):
        first = {KAFKA: Spread(), LUMBER: Spread()}
        for index, count in enumerate(counts):
            by_broker = comparison.cases.get(case(phase, count), {})
            rates, cpu = _rates(by_broker), _rates(by_broker, "cpu_per_million")
            client = _rates(by_broker, "client_cpu_per_million")
            if index == 0:
                first = rates
            lines.append(
                f"| {case(phase, count)} | {rates[KAFKA].text()} "
                f"| {ratio_text(ratio(rates[KAFKA], first[KAFKA]))} | {rates[LUMBER].text()} "
                f"| {ratio_text(ratio(rates[LUMBER], first[LUMBER]))} "
                f"| {ratio_text(ratio(rates[LUMBER], rates[KAFKA]))} | {cpu[KAFKA].text(2)} "
                f"| {cpu[LUMBER].text(2)} | {client[KAFKA].text(2)} | {client[LUMBER].text(2)} |"
            )
    return lines


def replication_lines(comparison: KafkaComparison) -> list[str]:
    """Three brokers each: the four cases with CPU, then each system's RF 3 acks=all / RF 1 acks=1 and the
    goal (Lumber's at least Kafka's)."""
    lines = [
        (
            "| three brokers, batch 50 | Kafka rec/s | Lumber rec/s | Lumber / Kafka | Kafka brokers' CPU "
            "| Lumber brokers' CPU | Lumber / Kafka |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    (base_rf, base_acks), (repl_rf, repl_acks) = BASELINE, REPLICATED
    names = [
        replication_case("produce", base_rf, base_acks),
        replication_case("produce", repl_rf, repl_acks),
        replication_case("consume", base_rf),
        replication_case("consume", repl_rf),
    ]
    for name in names:
        by_broker = comparison.cases.get(name, {})
        rates, cpu = _rates(by_broker), _rates(by_broker, "cpu_per_million")
        lines.append(
            f"| {name} | {rates[KAFKA].text()} | {rates[LUMBER].text()} "
            f"| {ratio_text(ratio(rates[LUMBER], rates[KAFKA]))} | {cpu[KAFKA].text(2)} "
            f"| {cpu[LUMBER].text(2)} | {ratio_text(ratio(cpu[LUMBER], cpu[KAFKA]))} |"
        )
    base = _rates(comparison.cases.get(names[0], {}))
    replicated = _rates(comparison.cases.get(names[1], {}))
    kafka_ratio = ratio(replicated[KAFKA], base[KAFKA])
    lumber_ratio = ratio(replicated[LUMBER], base[LUMBER])
    verdict = (
        "-"
        if kafka_ratio is None or lumber_ratio is None
        else ("met" if lumber_ratio >= kafka_ratio else "not met")
    )
    return [
        *lines,
        "",
        f"- {KAFKA} RF {repl_rf} acks={repl_acks} / RF {base_rf} acks={base_acks}: {ratio_text(kafka_ratio)}",
        (
            f"- {LUMBER} RF {repl_rf} acks={repl_acks} / RF {base_rf} acks={base_acks}: "
            f"{ratio_text(lumber_ratio)} "
            f"(goal for Lumber: at least Kafka's {ratio_text(kafka_ratio)}: {verdict})"
        ),
    ]


def memory_lines(comparison: KafkaComparison) -> list[str]:
    """Each broker's RSS before and after its memory phase, and that phase's rates (one reading each)."""
    lines = [
        (
            "| broker | partitions | RSS before, MiB | RSS after, MiB | growth, MiB | KiB per partition "
            "| produce rec/s | consume rec/s |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, reading in comparison.memory.items():
        partitions = int(reading["partitions"])
        growth = reading["after_mib"] - reading["before_mib"]
        produced = comparison.cases.get(memory_case("produce", partitions), {}).get(name)
        consumed = comparison.cases.get(memory_case("consume", partitions), {}).get(name)
        lines.append(
            f"| {name} | {partitions:,} | {reading['before_mib']:,.0f} | {reading['after_mib']:,.0f} "
            f"| {growth:,.0f} | {growth * 1024 / partitions:,.1f} "
            f"| {produced.rate.text() if produced else '-'} | {consumed.rate.text() if consumed else '-'} |"
        )
    return lines


def _percent(spread: Spread) -> str:
    return Spread([value * 100 for value in spread.values]).text()


def machine_lines(comparison: KafkaComparison) -> list[str]:
    """Every case in the order run: each broker's cores over the phase and the machine's idle share."""
    lines = [
        (
            "| case | Kafka broker cores | machine idle % | Lumber broker cores | machine idle % "
            "| Lumber / Kafka rec/s |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case, by_broker in comparison.cases.items():
        cores, idle, rates = (
            _rates(by_broker, "broker_cores"),
            _rates(by_broker, "idle"),
            _rates(by_broker),
        )
        lines.append(
            f"| {case} | {cores[KAFKA].text(2)} | {_percent(idle[KAFKA])} | {cores[LUMBER].text(2)} "
            f"| {_percent(idle[LUMBER])} | {ratio_text(ratio(rates[LUMBER], rates[KAFKA]))} |"
        )
    return lines


def _passes(rates: list[float] | None) -> tuple[str, str]:
    if not rates:
        return "-", "-"
    return str(len(rates)), f"{rates[0]:,.0f} / {rates[-1]:,.0f}"


def warm_up_lines(comparison: KafkaComparison) -> list[str]:
    """Each warmed shape: each broker's passes before round 1, and its first and last pass's rate."""
    lines = [
        (
            "| warm-up before round 1 | Kafka passes | Kafka rec/s, first / last pass | Lumber passes "
            "| Lumber rec/s, first / last pass |"
        ),
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for case, by_broker in comparison.warm_up.items():
        kafka, lumber = _passes(by_broker.get(KAFKA)), _passes(by_broker.get(LUMBER))
        lines.append(f"| {case} | {kafka[0]} | {kafka[1]} | {lumber[0]} | {lumber[1]} |")
    return lines
