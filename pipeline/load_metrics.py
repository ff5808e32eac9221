"""A load run's figures in the Prometheus text format, for node_exporter's textfile collector
(``[load] metrics_textfile``), and in the run's record.

A batch job has no process for Prometheus to scrape, so, as node_exporter's convention for batch jobs says,
each run writes its figures to a ``*.prom`` file in the collector's directory (``--collector.textfile
.directory``), replacing it in one rename so that a scrape never reads half a file
(``prometheus_client.write_to_textfile``: a temporary file in the same directory, then ``os.replace``).
The same figures go into the run's record (``runs/<run_id>.json``, ``extra.figures``), beside its counts;
Lumber keeps them there rather than in the manifest (the issue's wording) because a manifest exists only
for a committed run and is written before the commit phase it would have to time.

======================================================= =====================================================
``lumber_load_last_run_timestamp_seconds{load_job}``    when the run ended
``lumber_load_last_run_outcome{load_job,outcome}``      1 for the outcome: committed, nothing_to_load, failed
``lumber_load_last_run_records{load_job}``              records planned (the offset ranges read)
``lumber_load_last_run_rows{load_job}``                 rows written to Parquet
``lumber_load_last_run_quarantined_records{load_job}``  records quarantined (not decodable)
``lumber_load_last_run_lost_records{load_job}``         lost to retention before they were loaded
``lumber_load_last_run_bytes{load_job}``                bytes of the Parquet files committed
``lumber_load_last_run_lag_records{load_job}``          records left in the logs (held by the cap, cutoff)
``lumber_load_last_run_phase_seconds{load_job,phase}``  seconds per phase: recover, plan, stage, commit
``lumber_load_completeness_overdue_hours{load_job}``    hours not complete ``[completeness] alert_after_ms``
                                                        after their end (:mod:`pipeline.completeness`)
======================================================= =====================================================

The job's label is ``load_job``, not ``job``: Prometheus gives every series its scrape job's ``job`` label
(node_exporter's) and would rename a ``job`` of the file's to ``exported_job``. Pure values and one file
write; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

#: the phases of a run, in order (:mod:`pipeline.load_job`'s steps 2, 3, 4 and 5)
PHASES = ("recover", "plan", "stage", "commit")
OUTCOMES = ("committed", "nothing_to_load", "failed")


@dataclass(frozen=True)
class LoadFigures:
    """What one run did (see the module docstring)."""

    job: str
    outcome: str
    finished_at_ms: int
    records: int = 0
    rows: int = 0
    quarantined: int = 0
    lost: int = 0
    bytes: int = 0
    lag: int = 0
    seconds: Mapping[str, float] = field(default_factory=dict)
    #: found by the completeness pass after the run's record is written: in the textfile only
    overdue_hours: int = 0

    def to_json(self) -> dict[str, Any]:
        """The figures in the run record (``extra.figures``)."""
        return {
            "records": self.records,
            "rows": self.rows,
            "quarantined": self.quarantined,
            "lost": self.lost,
            "bytes": self.bytes,
            "lag": self.lag,
            "seconds": {phase: round(s, 3) for phase, s in self.seconds.items()},
        }


def write_textfile(path: str, figures: LoadFigures) -> None:
    """Replace ``path`` with ``figures`` in the Prometheus text format (one rename: see the module
    docstring)."""
    registry = CollectorRegistry(auto_describe=True)
    job = ("load_job",)

    def gauge(name: str, text: str, value: float) -> None:
        Gauge(name, text, job, registry=registry).labels(figures.job).set(value)

    gauge(
        "lumber_load_last_run_timestamp_seconds",
        "When the load's last run ended",
        figures.finished_at_ms / 1000,
    )
    outcome = Gauge(
        "lumber_load_last_run_outcome",
        "1 for the outcome of the load's last run",
        (*job, "outcome"),
        registry=registry,
    )
    for name in OUTCOMES:
        outcome.labels(figures.job, name).set(1 if name == figures.outcome else 0)
    gauge("lumber_load_last_run_records", "Records the last run planned to read", figures.records)
    gauge("lumber_load_last_run_rows", "Rows the last run wrote to Parquet", figures.rows)
    gauge("lumber_load_last_run_quarantined_records", "Records the last run quarantined", figures.quarantined)
    gauge("lumber_load_last_run_lost_records", "Records lost to retention before loading", figures.lost)
    gauge("lumber_load_last_run_bytes", "Bytes of the Parquet files the last run committed", figures.bytes)
    gauge("lumber_load_last_run_lag_records", "Records the last run left in the logs", figures.lag)
    gauge(
        "lumber_load_completeness_overdue_hours",
        "Hours not complete [completeness] alert_after_ms after their end",
        figures.overdue_hours,
    )
    seconds = Gauge(
        "lumber_load_last_run_phase_seconds",
        "Seconds of each phase of the last run",
        (*job, "phase"),
        registry=registry,
    )
    for phase in PHASES:
        if phase in figures.seconds:
            seconds.labels(figures.job, phase).set(figures.seconds[phase])
    write_to_textfile(path, registry)
