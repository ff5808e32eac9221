"""The chaos run's short variant (issue 24): ``bench/chaos.py`` with a fixed seed, about 3 minutes.

The run starts its own processes (two clusters, the registry, producers, a consumer group, the mirror, the
scheduler and its Spark loads), injects faults for 1.5 minutes over virtual hours of one minute, then
checks with the audit and DuckDB that nothing acknowledged was lost or duplicated; it exits 1 otherwise.
This test holds it to that and to the report's exact totals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED = 5


@pytest.mark.slow
def test_chaos_run_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    work = tmp_path / "chaos"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "chaos.py"),
            *("--minutes", "1.5", "--hour", "1m", "--seed", str(SEED), "--work-dir", str(work)),
        ],
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
        cwd=REPO,
    )
    output = result.stdout[-6000:] + result.stderr[-3000:]
    assert (work / "report.json").is_file(), output
    report = json.loads((work / "report.json").read_text())
    assert report["failures"] == [], output
    assert result.returncode == 0, output
    faults = report["faults"]
    assert len(faults) >= 3, output
    assert all(f["ok"] and f["recovery_s"] is not None for f in faults), output
    warehouse = report["warehouse"]
    assert warehouse["acknowledged"] > 0
    assert warehouse["acknowledged_not_loaded"] == 0
    assert warehouse["duplicate_event_ids"] == 0
    assert warehouse["loaded_not_logged_unexplained"] == 0
    assert warehouse["quarantined"] == 0
    assert warehouse["rows"] == warehouse["source_records"]
    assert warehouse["rows"] == warehouse["acknowledged"] + warehouse["loaded_not_logged_by_killed_producers"]
    live = report["audit_live"]
    assert live["windows"] >= 2
    assert live["missing"] == 0
    assert live["received"] == warehouse["rows"]
    # the producer tier (persistent outbox): every logged acknowledgement, plus those of the records in flight
    # at a kill -9 that the journal had counted; loaded - expected is exactly the rest of them
    in_flight = warehouse["loaded_not_logged_by_killed_producers"]
    assert live["expected"] == warehouse["acknowledged"] + live["in_flight_counted"]
    assert live["in_flight_counted"] + live["in_flight_not_counted"] == in_flight
    assert live["duplicate"] == live["in_flight_not_counted"]
    target = report["audit_target"]
    assert target["windows"] == live["windows"]
    assert target["expected"] == live["expected"]
    assert target["received"] == warehouse["rows"]  # the mirror tier: each source record once, kills or not
    # a full log dir (if the seed drew one): every produce to a partition the broker led was refused
    # (or its leadership had moved), and every record it held was read back from it
    refused = report["disk_full_produce_errors"]
    assert all(k == "KafkaStorageError" or k.startswith("moved to broker") for k in refused), output
    assert report["disk_full_reads"][0] == report["disk_full_reads"][1], output
