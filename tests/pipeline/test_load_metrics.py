"""The load job's figures (pipeline/load_metrics.py through pipeline/load_job.py) in node_exporter's textfile
format, after runs in the session's Spark against a real broker: a capped run that leaves lag behind, the
run that catches up, a run that fails in its commit and the run after it; parsed with prometheus_client's
parser, each figure exact, and the same figures in each run's record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.load_errors import InjectedFault
from pipeline.load_job import run_load
from tests.support.load_job import BASE_MS, LoadStack, load_stack
from tests.support.registry import RegistryProcess


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def scraped(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(path.read_text())
        for sample in family.samples
    }


def figures_of(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], job: str) -> dict[str, Any]:
    """The textfile's figures in the run record's shape (``extra.figures``), and the outcome."""
    one = lambda name: found[(f"lumber_load_last_run_{name}", (("load_job", job),))]  # noqa: E731
    outcomes = {
        dict(labels)["outcome"]: value
        for (name, labels), value in found.items()
        if name == "lumber_load_last_run_outcome"
    }
    phases = {
        dict(labels)["phase"]: value
        for (name, labels), value in found.items()
        if name == "lumber_load_last_run_phase_seconds"
    }
    return {
        "outcome": [o for o, value in outcomes.items() if value == 1],
        "outcomes": sorted(outcomes),
        "records": one("records"),
        "rows": one("rows"),
        "quarantined": one("quarantined_records"),
        "lost": one("lost_records"),
        "bytes": one("bytes"),
        "lag": one("lag_records"),
        "phases": phases,
    }


def record_figures(stack: LoadStack) -> dict[str, Any]:
    meta = stack.warehouse / "_lumber" / stack.job
    last = json.loads((meta / "LAST_RUN").read_text())["run_id"]
    return dict(json.loads((meta / "runs" / f"{last}.json").read_text())["extra"]["figures"])


def parquet_bytes(warehouse: Path) -> int:
    return sum(f.stat().st_size for f in warehouse.rglob("*.parquet") if "_lumber" not in f.parts)


def test_each_run_writes_its_figures(stack: LoadStack, spark: Any) -> None:
    textfile = stack.tmp / "textfile" / "lumber_load.prom"
    textfile.parent.mkdir()
    config = stack.config(metrics_textfile=str(textfile), max_records_per_partition=10)
    views = stack.views
    views.views(0, 12, BASE_MS + 1000, 60_000, v2=False)
    views.views(1, 3, BASE_MS + 2000, 60_000, v2=True)
    views.malformed(1, BASE_MS + 3000)  # 4 records that are not decodable

    # 1. capped at 10 a partition: 10 of partition 0 (2 left behind), all 7 of partition 1 (4 quarantined)
    run_load(spark, config, progress=lambda _: None)
    first = figures_of(scraped(textfile), stack.job)
    first_bytes = parquet_bytes(stack.warehouse)
    assert first_bytes > 0
    assert {k: v for k, v in first.items() if k != "phases"} == {
        "outcome": ["committed"],
        "outcomes": ["committed", "failed", "nothing_to_load"],
        "records": 17,
        "rows": 13,
        "quarantined": 4,
        "lost": 0,
        "bytes": first_bytes,
        "lag": 2,
    }
    assert sorted(first["phases"]) == ["commit", "plan", "recover", "stage"]
    # the producer is not audited: hour 08 can never be proved complete, and it ended days ago
    overdue = ("lumber_load_completeness_overdue_hours", (("load_job", stack.job),))
    assert scraped(textfile)[overdue] == 1
    assert all(seconds > 0 for seconds in first["phases"].values())
    kept = record_figures(stack)
    assert {k: v for k, v in kept.items() if k != "seconds"} == {
        "records": 17,
        "rows": 13,
        "quarantined": 4,
        "lost": 0,
        "bytes": first_bytes,
        "lag": 2,
    }
    assert kept["seconds"] == {phase: round(s, 3) for phase, s in first["phases"].items()}
    assert sorted(p.name for p in textfile.parent.iterdir()) == ["lumber_load.prom"]  # no temporary left

    # 2. the 2 records left behind
    run_load(spark, config, progress=lambda _: None)
    second = figures_of(scraped(textfile), stack.job)
    assert (second["outcome"], second["records"], second["rows"], second["quarantined"], second["lag"]) == (
        ["committed"],
        2,
        2,
        0,
        0,
    )
    assert second["bytes"] == parquet_bytes(stack.warehouse) - first_bytes

    # 3. a run that fails in its commit (after the manifest is published): outcome failed, no commit time
    views.views(1, 1, BASE_MS + 4000, 60_000, v2=True)
    with pytest.raises(InjectedFault, match="manifest"):
        run_load(spark, stack.config(metrics_textfile=str(textfile), fault_injection=["commit:manifest"]))
    failed = figures_of(scraped(textfile), stack.job)
    assert (failed["outcome"], failed["records"], failed["rows"], failed["bytes"]) == (["failed"], 0, 0, 0)
    assert sorted(failed["phases"]) == ["plan", "recover", "stage"]
    assert sorted(record_figures(stack)["seconds"]) == ["plan", "recover", "stage"]

    # 4. the next run finds the published manifest: nothing to load, nothing left behind
    run_load(spark, config, progress=lambda _: None)
    after = figures_of(scraped(textfile), stack.job)
    assert (after["outcome"], after["records"], after["rows"], after["lag"]) == (["nothing_to_load"], 0, 0, 0)
    assert sorted(after["phases"]) == ["plan", "recover"]
