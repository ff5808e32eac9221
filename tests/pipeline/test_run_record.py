"""Run records and LAST_RUN: files written before the JSON rewrite (commit 96c3bd0) load unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.commit import CommitProtocol
from pipeline.fs import open_filesystem
from pipeline.load_errors import MalformedJsonError
from pipeline.run_record import LastRun, RunRecord

FORMATS = Path(__file__).parent / "formats"


def test_old_run_records_load_field_by_field() -> None:
    committed = RunRecord.loads((FORMATS / "run-record.json").read_text(), "run-record.json")
    assert committed == RunRecord(
        run_id="20261122T100500Z-3f2a9c",
        job="hourly",
        outcome="committed",
        started_at_ms=1795341890000,
        finished_at_ms=1795341900000,
        sequence=7,
        ranges=2,
        rows=229,
        quarantined=1,
        lost=50,
        error=None,
        host="etl-1",
        pid=4242,
        extra={"spark_app_id": "local-1795341890000"},
    )
    # an empty ``extra`` was left out by the old code
    crashed_json = json.loads((FORMATS / "run-record-crashed.json").read_text())
    assert "extra" not in crashed_json
    crashed = RunRecord.from_json(crashed_json, "run-record-crashed.json")
    assert (crashed.outcome, crashed.finished_at_ms, crashed.sequence, crashed.extra) == (
        "crashed",
        None,
        None,
        {},
    )
    assert crashed.error == "the run died before its commit point; its staging was discarded"
    assert RunRecord.loads(committed.dumps(), "again") == committed
    assert json.loads(committed.dumps()) == json.loads((FORMATS / "run-record.json").read_text())


def test_last_run_as_the_old_code_wrote_it(tmp_path: Path) -> None:
    fs = open_filesystem(str(tmp_path / "w"))
    protocol = CommitProtocol(fs, "hourly")
    meta = tmp_path / "w" / "_lumber" / "hourly"
    (meta / "runs").mkdir(parents=True)
    shutil.copy(FORMATS / "run-record.json", meta / "runs" / "20261122T100500Z-3f2a9c.json")
    (meta / "LAST_RUN").write_text('{"run_id": "20261122T100500Z-3f2a9c"}\n')
    last = protocol.last_run()
    assert last is not None
    assert (last.run_id, last.outcome, last.rows) == ("20261122T100500Z-3f2a9c", "committed", 229)
    protocol.start_run(RunRecord("r2", "hourly", "running", 5))
    assert json.loads((meta / "LAST_RUN").read_text()) == {"run_id": "r2"}
    assert LastRun.loads((meta / "LAST_RUN").read_text(), "LAST_RUN") == LastRun("r2")


def test_a_malformed_run_record_names_the_file_and_the_field(tmp_path: Path) -> None:
    fs = open_filesystem(str(tmp_path / "w"))
    protocol = CommitProtocol(fs, "hourly")
    meta = tmp_path / "w" / "_lumber" / "hourly"
    (meta / "runs").mkdir(parents=True)
    (meta / "runs" / "r1.json").write_text(
        '{"run_id": "r1", "job": "hourly", "outcome": "failed", "rows": "x"}'
    )
    (meta / "LAST_RUN").write_text('{"run": "r1"}')
    with pytest.raises(
        MalformedJsonError, match=r"LAST_RUN: not a valid LAST_RUN pointer: run_id: Field required"
    ):
        protocol.last_run()
    with pytest.raises(
        MalformedJsonError,
        match=r"runs/r1\.json: not a valid run record: started_at_ms: Field required; "
        r"rows: Input should be a valid integer.*\(found 'x'\)",
    ):
        protocol.read_run("r1")
