"""The oracle of the chaos run (:mod:`bench.chaos`, whose docstring numbers its checks): once the faults are
over and the last load ran, the producers' logs of what was acknowledged against the warehouse (DuckDB), and
``lumber audit verify`` of the live cluster (the load tier) and of the mirror's target (the mirror tier)
against both, per topic and virtual hour.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from bench.chaos_common import HOUR_MS, PRODUCERS, PY, TOPICS, hour_text
from bench.chaos_stack import ChaosStack


@dataclasses.dataclass
class Windows:
    """Per (topic, hour): warehouse rows, rows the producers logged as acknowledged, and rows no producer
    logged (in flight at a producer's kill -9)."""

    rows: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)
    logged: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)
    in_flight: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)


class ChaosOracle:
    """The end checks of one run; a failed check is appended to ``failures``. :meth:`check` leaves the
    report's figures in :attr:`warehouse_summary`, :attr:`audit_live` and :attr:`audit_target`. Used by
    the run's thread alone, after the faults."""

    def __init__(self, stack: ChaosStack, failures: list[str]) -> None:
        self.stack = stack
        self.failures = failures

    # -- the oracle --------------------------------------------------------------------------------------

    def _verify(self, config: Path) -> dict[str, Any]:
        since = self.stack.v0_ms
        until = self.end_virtual_ms - self.end_virtual_ms % HOUR_MS + HOUR_MS
        name = "live" if config == self.stack.config_path else "target"
        out = subprocess.run(
            [
                PY,
                "-m",
                "lumber",
                "--config",
                str(config),
                "audit",
                "verify",
                "--json",
                "--window",
                "1h",
                "--since",
                hour_text(since),
                "--until",
                hour_text(until),
                "--grace",
                "0s",
                "--topics",
                ",".join(TOPICS),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        (self.stack.work / f"audit-{name}.json").write_text(out.stdout)
        try:
            return dict(json.loads(out.stdout))
        except ValueError:
            self.failures.append(
                f"audit verify ({config}) exit {out.returncode}: {out.stderr.strip()[-500:]}"
            )
            return {}

    def check(
        self, ends: dict[tuple[str, int], int], end_virtual_ms: int, killed_instances: set[str]
    ) -> None:
        """Run the checks over the source log ends ``ends`` (the docstring's 1 to 3) and the audit's hours
        up to ``end_virtual_ms``; rows no producer logged are allowed from ``killed_instances``."""
        self.end_virtual_ms = end_virtual_ms
        self.killed_instances = killed_instances
        import duckdb  # noqa: PLC0415

        acked: dict[str, tuple[str, int]] = {}
        failed = 0
        for n in range(1, PRODUCERS + 1):
            for line in self.stack.ack_log(f"app-{n}").read_text().splitlines():
                parts = line.split()
                if parts[0] == "A":
                    acked[parts[1]] = (parts[2], int(parts[3]))
                elif parts[0] == "F":
                    failed += 1
        self.acked = acked
        warehouse = self.stack.work / "warehouse"
        con = duckdb.connect()
        rows: dict[str, list[tuple[str, int]]] = {}
        for topic in TOPICS:
            files = list((warehouse / topic).rglob("*.parquet"))
            rows[topic] = (
                con.execute(
                    "SELECT event_id, timestamp_ms FROM read_parquet(?, hive_partitioning=true)",
                    [str(warehouse / topic / "*" / "*" / "*.parquet")],
                ).fetchall()
                if files
                else []
            )
        errors = list((warehouse / "_errors").rglob("*.parquet")) if (warehouse / "_errors").exists() else []
        quarantined = (
            con.execute("SELECT count(*) FROM read_parquet(?)", [[str(f) for f in errors]]).fetchone()[0]  # type: ignore[index]
            if errors
            else 0
        )
        ids = Counter(eid for topic in TOPICS for eid, _ in rows[topic])
        twice = {eid: n for eid, n in ids.items() if n > 1}
        missing = sorted(set(acked) - set(ids))
        extra = sorted(set(ids) - set(acked))
        unexplained = [e for e in extra if e.rsplit("-", 1)[0] not in self.killed_instances]
        self.warehouse_summary = {
            "rows": sum(ids.values()),
            "acknowledged": len(acked),
            "failed_sends": failed,
            "duplicate_event_ids": len(twice),
            "acknowledged_not_loaded": len(missing),
            "loaded_not_logged_by_killed_producers": len(extra) - len(unexplained),
            "loaded_not_logged_unexplained": len(unexplained),
            "quarantined": int(quarantined),
            "source_records": sum(ends.values()),
        }
        if twice:
            self.failures.append(f"DuckDB: {len(twice)} event ids loaded twice, e.g. {list(twice)[:3]}")
        if missing:
            self.failures.append(
                f"DuckDB: {len(missing)} acknowledged records not in the warehouse, e.g. {missing[:3]}"
            )
        if unexplained:
            self.failures.append(
                f"DuckDB: {len(unexplained)} rows no producer logged, e.g. {unexplained[:3]}"
            )
        if quarantined:
            self.failures.append(f"{quarantined} records quarantined")
        if sum(ids.values()) != sum(ends.values()):
            self.failures.append(
                f"warehouse rows {sum(ids.values())} != records in the source topics {sum(ends.values())}"
            )
        # per topic and hour: rows, rows the producers logged as acknowledged, rows in flight at a kill
        windows = Windows()
        extra_ids = set(extra)
        for topic in TOPICS:
            for eid, ts in rows[topic]:
                key = (topic, ts - ts % HOUR_MS)
                windows.rows[key] += 1
                if eid in extra_ids:
                    windows.in_flight[key] += 1
        for topic, ts in acked.values():
            windows.logged[(topic, ts - ts % HOUR_MS)] += 1
        self.audit_live = self._audit_check(self._verify(self.stack.config_path), windows, "load")
        self.audit_target = self._audit_check(self._verify(self.stack.target_config_path), windows, "mirror")

    def _audit_check(self, report: dict[str, Any], windows: Windows, tier: str) -> dict[str, Any]:
        """Check one tier against the producer tier and the warehouse, per (topic, hour) (the docstring's
        oracle, 1 and 2)."""
        totals = {
            "windows": 0,
            "expected": 0,
            "received": 0,
            "missing": 0,
            "duplicate": 0,
            "in_flight_counted": 0,
            "in_flight_not_counted": 0,
        }
        for window in report.get("windows", []):
            topic, start = window["topic"], int(window["window_start_ms"])
            key = (topic, start)
            expected = int(window["expected"])
            tiers = window.get("tiers", {})
            received = int(tiers.get(tier, {}).get("count", 0)) + int(tiers.get(tier, {}).get("malformed", 0))
            missing, duplicate = max(0, expected - received), max(0, received - expected)
            totals["windows"] += 1
            totals["expected"] += expected
            totals["received"] += received
            totals["missing"] += missing
            totals["duplicate"] += duplicate
            where = f"{tier} tier, {topic} {hour_text(start)}"
            logged, in_flight, rows = windows.logged[key], windows.in_flight[key], windows.rows[key]
            if not logged <= expected <= logged + in_flight:
                self.failures.append(
                    f"audit {where}: the producer tier counted {expected}, the producers logged {logged} "
                    f"acknowledgements (+ {in_flight} rows in flight at a kill)"
                )
            if tier == "load":
                totals["in_flight_counted"] += max(0, expected - logged)
                totals["in_flight_not_counted"] += max(0, logged + in_flight - expected)
            if received != rows:
                self.failures.append(
                    f"audit {where}: received {received}, the warehouse holds {rows} rows "
                    f"(expected {expected})"
                )
        if not totals["windows"]:
            self.failures.append(f"audit ({tier} tier): no windows reported")
        return totals
