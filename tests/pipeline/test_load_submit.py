"""How a submitted run is watched: progress and result lines, exit codes, and aborting its process group.

Stand-in commands play spark-submit's part here (a Python printing what ``jobs/load.py`` prints); the real
spark-submit runs in ``tests/jobs``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

from pipeline.load_submit import PreparedSubmit, submit_load


def prepared(tmp_path: Path, script: str) -> PreparedSubmit:
    argv = (sys.executable, "-c", textwrap.dedent(script))
    return PreparedSubmit(argv, tmp_path / "logs" / "run.log", dict(os.environ))


def test_progress_and_the_result_are_read_and_the_rest_goes_to_the_log(tmp_path: Path) -> None:
    record = {"run_id": "r1", "job": "hourly", "outcome": "committed", "started_at_ms": 1, "rows": 5}
    script = f"""
        import sys
        print("lumber-load: planned: 1 ranges", flush=True)
        print("some Spark chatter", flush=True)
        print("WARN on stderr", file=sys.stderr, flush=True)
        print("lumber-load-result: " + {json.dumps(json.dumps(record))}, flush=True)
    """
    seen: list[str] = []
    result = submit_load(prepared(tmp_path, script), on_progress=lambda _s, line: seen.append(line))
    assert result.exit_code == 0
    assert result.outcome == "committed"
    assert seen == ["planned: 1 ranges"]
    assert result.record is not None
    assert result.record.rows == 5
    assert result.summary().startswith("committed in ")
    log = result.log_path.read_text()
    assert "some Spark chatter" in log
    assert "WARN on stderr" in log


def test_a_held_lock_is_exit_3_with_the_job_s_message(tmp_path: Path) -> None:
    script = """
        import sys
        print("Spark noise", file=sys.stderr)
        print("jobs/load.py: load job 'hourly' is already running (held by host pid 1)", file=sys.stderr)
        sys.exit(3)
    """
    result = submit_load(prepared(tmp_path, script))
    assert (result.exit_code, result.outcome) == (3, "locked")
    assert result.error_lines == ("jobs/load.py: load job 'hourly' is already running (held by host pid 1)",)
    assert "locked (spark-submit exit 3)" in result.summary()
    assert submit_load(prepared(tmp_path, "import sys; sys.exit(2)")).outcome == "bad_config"
    assert submit_load(prepared(tmp_path, "import sys; sys.exit(1)")).outcome == "failed"


def test_abort_stops_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # the "driver" starts a child of its own (as spark-submit's JVM starts the Python driver) and waits
    script = f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("lumber-load: reading", flush=True)
        time.sleep(120)
    """
    abort = threading.Event()

    def on_progress(_elapsed: float, line: str) -> None:
        if line == "reading":
            abort.set()

    started = time.monotonic()
    result = submit_load(prepared(tmp_path, script), on_progress=on_progress, abort=abort, kill_timeout_s=5)
    assert result.aborted
    assert result.outcome == "aborted"
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the run's own child outlived the abort"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_the_lock_s_waiting_lines_are_shown_as_they_come_and_the_run_knows_its_caller(tmp_path: Path) -> None:
    script = """
        import os, sys
        print("lumber-lock: job 'hourly': the lock is held by a process that is gone; waiting", flush=True)
        print("lumber-load: parent " + os.environ["LUMBER_PARENT_PID"], flush=True)
    """
    waits: list[str] = []
    seen: list[str] = []
    result = submit_load(
        prepared(tmp_path, script), on_progress=lambda _s, line: seen.append(line), on_wait=waits.append
    )
    assert result.exit_code == 0
    assert waits == ["job 'hourly': the lock is held by a process that is gone; waiting"]
    assert seen == [f"parent {os.getpid()}@{socket.gethostname()}"]
    assert "lumber-lock: job 'hourly'" in result.log_path.read_text()
