"""A SIGKILLed ``lumber etl run`` takes its load with it; the next run waits out its lock and commits.

A real stack: broker processes, ZooKeeper, the registry, ``.venv/bin/spark-submit`` (the JVM and the Python
driver it starts). The run's process tree is read from ``/proc`` right before the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from pipeline.job_lock import pid_alive
from pipeline.parent_watch import PARENT_PID_ENV, parent_value
from tests.support.load_job import BASE_MS, HOUR_MS, LoadStack, load_stack
from tests.support.registry import RegistryProcess


@pytest.fixture
def stack(broker_cluster: Any, load_registry: RegistryProcess, tmp_path: Path) -> Iterator[LoadStack]:
    with load_stack(broker_cluster, load_registry, tmp_path) as found:
        yield found


def process_tree(root: int) -> dict[int, str]:
    """``root`` and its descendants, read from /proc: pid -> command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree: dict[int, str] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tree[pid] = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()).strip()
        except OSError:
            continue
        todo += children.get(pid, [])
    return tree


def manifests(stack: LoadStack) -> list[str]:
    return sorted(p.name for p in (stack.warehouse / "_lumber" / stack.job / "manifests").glob("[0-9]*.json"))


def etl_run(config_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lumber", "--config", str(config_path), "etl", "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the test's own safety net: its group can be killed if the test fails
    )


def read_into(stream: IO[str], lines: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_sigkill_of_etl_run_mid_load_stops_everything_and_the_next_run_commits_exactly(
    stack: LoadStack,
) -> None:
    stack.views.views(0, 40, BASE_MS, 60_000, v2=False)
    stack.views.views(1, 25, BASE_MS + HOUR_MS, 120_000, v2=True)
    # [load] lock_timeout_ms 0; a ZooKeeper session that outlives the next run's start-up (a JVM, slow on
    # a busy machine): 60 s, the test ZooKeeper's maxSessionTimeout
    config_path = stack.config_file(stack.config())
    text = config_path.read_text()
    assert "session_timeout_ms = 6000" in text
    config_path.write_text(text.replace("session_timeout_ms = 6000", "session_timeout_ms = 60000"))
    first = etl_run(config_path)
    tree: dict[int, str] = {}
    try:
        assert first.stdout is not None
        out: list[str] = []
        for line in first.stdout:  # the run is mid-load once it has planned under its lock
            out.append(line)
            if "planned:" in line:
                break
        assert any("planned:" in line for line in out), "".join(out)
        tree = process_tree(first.pid)
        programs = {pid: Path(command.split(" ", 1)[0]).name for pid, command in tree.items()}
        drivers = [p for p, c in tree.items() if programs[p].startswith("python") and "jobs/load.py" in c]
        jvms = [p for p in tree if programs[p] == "java"]
        assert len(drivers) == 1, tree
        assert len(jvms) == 1, tree
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        deadline = time.monotonic() + 5.0
        while any(pid_alive(pid) for pid in tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = {pid: command for pid, command in tree.items() if pid_alive(pid)}
        assert survivors == {}, f"still running 5 s after the SIGKILL of lumber etl run: {survivors}"
    finally:
        for pid in tree:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if first.poll() is None:
            first.kill()
            first.wait()
        for stream in (first.stdout, first.stderr):
            if stream is not None:
                stream.close()
    assert manifests(stack) == [], "the killed run committed"

    # right away: the dead run's lock node lives until its session expires, and this run waits for that
    second = etl_run(config_path)
    assert second.stdout is not None
    assert second.stderr is not None
    out2: list[str] = []
    err2: list[str] = []
    readers = [read_into(second.stdout, out2), read_into(second.stderr, err2)]
    try:
        code = second.wait(timeout=240)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
        for reader in readers:
            reader.join(timeout=10)
        second.stdout.close()
        second.stderr.close()
    assert code == 0, "".join(out2 + err2)
    driver = drivers[0]
    waits = [line for line in err2 if line.startswith("lumber etl run: job ")]
    assert len(waits) == 2, "".join(out2 + err2)
    assert f"but that process is gone (pid {driver} is not running on this host)" in waits[0]
    assert " taken after " in waits[1]
    assert any("committed manifest 1: 65 rows, 0 quarantined" in line for line in out2), "".join(out2)
    stack.assert_rows_and_offsets()
    assert manifests(stack) == ["00000000000000000001.json"]


PARENT = """
import subprocess, sys, time
from pipeline.parent_watch import die_with_parent
import os
child = subprocess.Popen(
    die_with_parent([sys.executable, "-c", "import time; time.sleep(600)"], os.getpid()),
    start_new_session=True,
)
print(child.pid, flush=True)
time.sleep(600)
"""


def wait_dead(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_child_started_with_die_with_parent_dies_with_a_sigkilled_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert pid_alive(child)
        parent.kill()
        parent.wait(timeout=10)
        assert wait_dead(child, 5.0), f"child {child} outlived its SIGKILLed parent"
    finally:
        parent.stdout.close()
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_watch_parent_kills_the_driver_when_the_named_process_exits() -> None:
    # the "CLI": a sleeper; the "driver": a process that watches it through LUMBER_PARENT_PID
    cli = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    driver_code = (
        "import sys, time\nfrom pipeline.parent_watch import watch_parent\nwatch_parent()\n"
        "print('watching', flush=True)\ntime.sleep(600)\n"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", driver_code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, PARENT_PID_ENV: parent_value(cli.pid)},
    )
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline() == "watching\n"
        cli.kill()
        cli.wait(timeout=10)
        assert driver.wait(timeout=5) == -signal.SIGKILL
        assert driver.stderr is not None
        assert driver.stderr.read() == (
            f"lumber: the lumber process that started this run (pid {cli.pid}) exited; "
            "stopping this run (SIGKILL)\n"
        )
    finally:
        for process in (cli, driver):
            if process.poll() is None:
                process.kill()
                process.wait()
        for stream in (driver.stdout, driver.stderr):
            if stream is not None:
                stream.close()
    # a parent already gone when the watch starts: the driver stops at once
    gone = cli.pid
    early = subprocess.run(
        [sys.executable, "-c", driver_code],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, PARENT_PID_ENV: parent_value(gone)},
        check=False,
    )
    assert (early.returncode, early.stdout) == (-signal.SIGKILL, "")
    assert f"(pid {gone}) is gone" in early.stderr
    # a pid of another host is not watched: the driver runs on
    elsewhere = subprocess.run(
        [sys.executable, "-c", driver_code.replace("time.sleep(600)", "")],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, PARENT_PID_ENV: f"{gone}@some-other-host"},
        check=False,
    )
    assert (elsewhere.returncode, elsewhere.stdout, elsewhere.stderr) == (0, "watching\n", "")
