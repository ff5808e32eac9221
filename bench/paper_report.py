"""The report of the paper's Section 5 experiment (:mod:`bench.paper`): the :class:`Report` the run fills,
the tables (terminal and Markdown for ``BENCHMARKS.md``), ``paper.json`` and the chart ``paper.png`` in the
style of the paper's Figures 4 and 5."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.paper_common import (
    ACTIVEMQ,
    LUMBER_B1,
    LUMBER_B50,
    MB,
    PAPER_MSGS,
    RABBITMQ,
    TARGET_OVERHEAD_BYTES,
    TARGETS,
    VALUE_BYTES,
    LatencyResult,
    Limits,
    PhaseRun,
    SystemResult,
    median,
)
from bench.paper_kafka import KafkaComparison
from bench.paper_kafka_report import markdown as kafka_markdown


@dataclass
class Report:
    command: str
    started: str
    messages: int
    rounds: int
    load_before: str
    load_after: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    systems: dict[str, SystemResult] = field(default_factory=dict)
    latency: list[LatencyResult] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    lumber_records_per_batch: dict[str, dict[int, int]] = field(default_factory=dict)
    #: produce at batch 50 with record validation against without, one line per codec (same run)
    validation: list[str] = field(default_factory=list)
    #: Apache Kafka against Lumber (bench/paper_kafka.py), when run
    kafka: KafkaComparison | None = None


# ------------------------------------------------------------------------------------------- output


def spread(runs: list[PhaseRun]) -> str:
    if not runs:
        return "-"
    rates = [r.rate for r in runs]
    return f"{median(rates):,.0f} [{min(rates):,.0f} - {max(rates):,.0f}]"


def cpu_per_message(runs: list[PhaseRun]) -> str:
    if not runs:
        return "-"
    client = median([r.client_cpu_s / r.messages * 1e6 for r in runs])
    server = median([r.server_cpu_s / r.messages * 1e6 for r in runs])
    return f"{client:.1f} + {server:.1f}"


def ratio_rows(report: Report) -> list[tuple[str, float | None, float | None, float, float]]:
    """(case, x RabbitMQ, x ActiveMQ, paper's msg/s, target x RabbitMQ)."""
    systems = report.systems

    def rate(name: str, phase: str) -> float | None:
        if name not in systems:
            return None
        runs = systems[name].produce if phase == "produce" else systems[name].consume
        return median([r.rate for r in runs]) if runs else None

    rows: list[tuple[str, float | None, float | None, float, float]] = []
    for case, ours, phase in (
        ("produce, batch 1", rate(LUMBER_B1, "produce"), "produce"),
        ("produce, batch 50", rate(LUMBER_B50, "produce"), "produce"),
        ("consume", rate(LUMBER_B50, "consume"), "consume"),
    ):
        peers = [rate(RABBITMQ, phase), rate(ACTIVEMQ, phase)]
        ratios = [ours / peer if ours and peer else None for peer in peers]
        rows.append((case, ratios[0], ratios[1], PAPER_MSGS[case], TARGETS[case]))
    return rows


def markdown(report: Report) -> str:
    lines = [
        (
            "| system | produce msg/s, median [min - max] | consume msg/s, median [min - max] "
            "| bytes on disk / msg (overhead) | CPU us/msg produce, client + server | consume |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in report.systems.values():
        disk = (
            f"{result.disk_bytes_per_message:,.1f} ({result.disk_bytes_per_message - VALUE_BYTES:+,.1f})"
            if result.disk_bytes_per_message is not None
            else "-"
        )
        lines.append(
            f"| {result.name} | {spread(result.produce)} | {spread(result.consume)} | {disk} "
            f"| {cpu_per_message(result.produce)} | {cpu_per_message(result.consume)} |"
        )
    lines += [
        "",
        (
            "| Lumber / peer | x RabbitMQ | x ActiveMQ | paper (Kafka msg/s; >= x both) "
            "| issue 9 target (x RabbitMQ) |"
        ),
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    paper_ratio = {"produce, batch 1": "2", "produce, batch 50": "2", "consume": "4"}
    for case, vs_rabbit, vs_active, paper, target in ratio_rows(report):
        lines.append(
            f"| {case} | {_x(vs_rabbit)} | {_x(vs_active)} | {paper:,} ({paper_ratio[case]}x) | {target:g}x |"
        )
    lines += [
        "",
        "| end-to-end latency | rate msg/s | achieved msg/s | p50 ms | p99 ms | max ms | verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for lat in report.latency:
        lines.append(
            f"| {lat.system} | {lat.rate:,} | {lat.achieved_rate:,.0f} | {ms_text(lat.p50_ms)} "
            f"| {ms_text(lat.p99_ms)} | {ms_text(lat.max_ms)} | {lat.verdict} |"
        )
    lines += ["", *(f"- validation cost: {line}" for line in report.validation)]
    lines += ["", *limit_lines(report), ""]
    for result in report.systems.values():
        if result.disk_by_kind:
            kinds = ", ".join(f"`{kind}` {size:,.1f}" for kind, size in result.disk_by_kind.items())
            lines.append(f"- {result.name}, bytes on disk per message by file kind: {kinds}")
        lines.extend(f"- {result.name}: {note}" for note in result.notes)
        lines.extend(f"- {result.name} FAILED {failure}" for failure in result.failures)
    return "\n".join(lines)


def limit_lines(report: Report) -> list[str]:
    lines = [
        (
            "| limit (same run) | raw MB/s, median [min - max] | Lumber MB/s (on-disk bytes) "
            "| Lumber's fraction |"
        ),
        "| --- | ---: | ---: | ---: |",
    ]
    b50 = report.systems.get(LUMBER_B50)
    if b50 is None or b50.disk_bytes_per_message is None:
        return lines
    per_message = b50.disk_bytes_per_message
    for label, raw, runs in (
        ("file append (`os.write`, 1 MiB) vs producing at batch 50", report.limits.append_mbps, b50.produce),
        ("loopback `sendfile` (1 MiB) vs consuming", report.limits.sendfile_mbps, b50.consume),
    ):
        if not raw or not runs:
            continue
        ours = median([r.rate for r in runs]) * per_message / MB
        lines.append(
            f"| {label} | {median(raw):,.0f} [{min(raw):,.0f} - {max(raw):,.0f}] | {ours:,.1f} "
            f"| {ours / median(raw):.3f} |"
        )
    return lines


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def ms_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_tables(report: Report, console: Console) -> None:
    if report.kafka is not None:
        print("\nLumber against Apache Kafka\n")
        print(kafka_markdown(report.kafka), flush=True)
    if not report.systems:
        return
    table = Table(title=f"{report.messages:,} messages of {VALUE_BYTES} bytes, {report.rounds} rounds")
    for column in (
        "system",
        "produce msg/s, median \\[min - max]",  # \\[: not rich markup
        "consume msg/s",
        "disk B/msg",
        "CPU us/msg produce (client + server)",
        "consume",
    ):
        table.add_column(column, justify="left" if column == "system" else "right")
    for result in report.systems.values():
        disk = f"{result.disk_bytes_per_message:,.1f}" if result.disk_bytes_per_message is not None else "-"
        table.add_row(
            result.name,
            spread(result.produce),
            spread(result.consume),
            disk,
            cpu_per_message(result.produce),
            cpu_per_message(result.consume),
        )
    console.print(table)
    ratios = Table(title="Lumber / peer")
    for column in ("case", "x RabbitMQ", "x ActiveMQ", "target x RabbitMQ", "met?"):
        ratios.add_column(column)
    for case, vs_rabbit, vs_active, _paper, target in ratio_rows(report):
        met = "-" if vs_rabbit is None else ("yes" if vs_rabbit >= target else "no")
        ratios.add_row(case, _x(vs_rabbit), _x(vs_active), f"{target:g}x", met)
    b50 = report.systems.get(LUMBER_B50)
    if b50 is not None and b50.disk_bytes_per_message is not None:
        overhead = b50.disk_bytes_per_message - VALUE_BYTES
        ratios.add_row(
            "overhead bytes/msg, batch 50",
            f"{overhead:.1f}",
            "",
            f"<= {TARGET_OVERHEAD_BYTES:g}",
            "yes" if overhead <= TARGET_OVERHEAD_BYTES else "no",
        )
    console.print(ratios)
    print()
    print(markdown(report), flush=True)


def median_run(runs: list[PhaseRun]) -> PhaseRun:
    return sorted(runs, key=lambda r: r.rate)[len(runs) // 2]


def write_json(report: Report, path: Path) -> None:
    """Every figure of the run; progress samples only for the median runs (the chart's), one line each."""
    data = asdict(report)
    inline: dict[str, str] = {}
    for name, result in report.systems.items():
        for phase in ("produce", "consume"):
            runs: list[PhaseRun] = getattr(result, phase)
            for index, run in enumerate(runs):
                entry = data["systems"][name][phase][index]
                entry["rate"] = round(run.rate, 1)
                if run is median_run(runs):
                    key = f"@samples-{len(inline)}@"
                    inline[key] = json.dumps(
                        [[round(t, 4), n] for t, n in run.samples], separators=(",", ":")
                    )
                    entry["samples"] = key
                else:
                    del entry["samples"]
    text = json.dumps(data, indent=1, default=str)
    for key, samples in inline.items():
        text = text.replace(f'"{key}"', samples)
    path.write_text(text + "\n")


def draw_chart(report: Report, path: Path) -> None:
    """Throughput against data sent, producer and consumer (the paper's Figures 4 and 5), median runs."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for axis, phase, title in (
        (axes[0], "produce", "Producer performance (cf. paper Figure 4)"),
        (axes[1], "consume", "Consumer performance (cf. paper Figure 5)"),
    ):
        for result in report.systems.values():
            runs = result.produce if phase == "produce" else result.consume
            if not runs:
                continue
            run = median_run(runs)
            xs, ys = windowed_rates(run.samples)
            if xs:
                axis.plot(xs, ys, marker=".", markersize=3, label=f"{result.name} ({run.rate:,.0f} msg/s)")
        axis.set_yscale("log")
        axis.set_xlabel(
            f"MB {'received by the broker' if phase == 'produce' else 'consumed'} "
            f"({VALUE_BYTES}-byte messages)"
        )
        axis.set_ylabel("throughput (messages/s)")
        axis.set_title(title)
        axis.grid(visible=True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(
        f"Lumber vs RabbitMQ vs ActiveMQ, {report.messages:,} messages, {report.started}", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def windowed_rates(samples: list[tuple[float, int]], windows: int = 25) -> tuple[list[float], list[float]]:
    """(MB done, msg/s over the window ending there) for about ``windows`` equal windows of messages."""
    if len(samples) < 2:
        return [], []
    total = samples[-1][1]
    step = max(1, total // windows)
    xs: list[float] = []
    ys: list[float] = []
    last_t, last_n = samples[0]
    for t, n in samples[1:]:
        if n - last_n >= step or n == total:
            if t > last_t and n > last_n:
                xs.append(n * VALUE_BYTES / MB)
                ys.append((n - last_n) / (t - last_t))
            last_t, last_n = t, n
    return xs, ys
