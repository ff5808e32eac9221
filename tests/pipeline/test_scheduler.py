"""The scheduler's loop with an injected clock: grace period, catch-up order, backoff, stopping, the lock.

The runners here stand in for the Spark load only (what a run does is the load's tests' business); the
ZooKeeper job lock is the real one, and the SIGTERM tests send real signals.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lumber.config import LumberConfig
from lumber.etl_settings import submit_settings
from pipeline.job_lock import JobLock
from pipeline.load_errors import JobLockedError
from pipeline.load_submit import PreparedSubmit, SubmitSettings
from pipeline.schedule_config import ScheduleConfig
from pipeline.scheduler import (
    EXIT_FATAL,
    EXIT_GAVE_UP,
    EXIT_OK,
    RunResult,
    RunStatus,
    Scheduler,
    SchedulerError,
    ScheduleStateStore,
    SparkSubmitRunner,
)
from tests.support.zookeeper import new_client

MINUTE_MS = 60_000
HOUR_MS = 3_600_000


def at(text: str) -> int:
    """``2026-11-22T10:05`` (UTC) as ms."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()) * 1000


class FakeClock:
    """Time moves only when the scheduler sleeps (by the time it asked for) or a runner says so."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms
        self.sleeps_s: list[float] = []
        self.on_sleep: Callable[[FakeClock], None] = lambda _clock: None

    def now_ms(self) -> int:
        return self.now

    def sleep(self, seconds: float, wake: threading.Event) -> None:
        self.sleeps_s.append(seconds)
        self.on_sleep(self)
        if not wake.is_set():
            self.now += round(seconds * 1000)


@dataclass
class ScriptedRunner:
    """Returns scripted statuses (then ``done``) and records (cutoff, time of the call); each run takes
    ``duration_ms`` of the fake clock."""

    clock: FakeClock
    script: list[RunStatus] = field(default_factory=list)
    duration_ms: int = 0
    calls: list[tuple[int, int]] = field(default_factory=list)
    during: Callable[[threading.Event], None] = lambda _abort: None

    def run(self, until_ms: int, abort: threading.Event) -> RunResult:
        self.calls.append((until_ms, self.clock.now))
        self.during(abort)
        self.clock.now += self.duration_ms
        status: RunStatus = self.script.pop(0) if self.script else "done"
        if abort.is_set():
            status = "aborted"
        outcome = {"done": "committed", "fatal": "bad_config"}.get(status, status)
        return RunResult(status, f"{outcome} (scripted)", outcome)


@pytest.fixture
def store(tmp_path: Path) -> ScheduleStateStore:
    return ScheduleStateStore(tmp_path / "schedule-hourly.json", "hourly")


def settings(**changes: Any) -> ScheduleConfig:
    return ScheduleConfig(**{"delay_ms": 10 * MINUTE_MS, "retry_backoff_ms": 60_000, **changes})


def stop_after_sleeps(scheduler: Scheduler, count: int) -> Callable[[FakeClock], None]:
    def on_sleep(clock: FakeClock) -> None:
        if len(clock.sleeps_s) >= count:
            scheduler.stop()

    return on_sleep


def saved(store: ScheduleStateStore) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(store.path.read_text())
    return data


def test_an_hour_runs_once_its_grace_period_has_passed(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T10:05"))
    runner = ScriptedRunner(clock, duration_ms=3 * MINUTE_MS)
    said: list[str] = []
    scheduler = Scheduler(runner, store, settings(start_hour="2026-11-22T09"), clock=clock, say=said.append)
    clock.on_sleep = stop_after_sleeps(scheduler, 2)
    finished = scheduler.run(max_steps=20)
    assert finished.code == EXIT_OK
    # hour 09 ends at 10:00; with 10 minutes of grace its run starts at 10:10, not before
    assert runner.calls == [(at("2026-11-22T10:00"), at("2026-11-22T10:10"))]
    # then it waits for hour 10: until 11:10, from 10:13 when the run ended
    assert clock.sleeps_s == [300.0, 57 * 60.0]
    assert any(
        "next: hour 2026-11-22T10 (--until-hour 2026-11-22T11) at 2026-11-22 11:10:00 UTC" in s for s in said
    )
    state = saved(store)
    assert state["loaded_until"] == "2026-11-22T10"
    assert [h["outcome"] for h in state["history"]] == ["committed"]


def test_missed_hours_run_in_order_after_downtime_and_a_restart_resumes(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T10:15"))
    runner = ScriptedRunner(clock, duration_ms=20 * MINUTE_MS)
    first = Scheduler(runner, store, settings(start_hour="2026-11-22T06"), clock=clock, say=lambda _: None)
    clock.on_sleep = stop_after_sleeps(first, 1)
    assert first.run(max_steps=20).code == EXIT_OK
    cutoffs = [until for until, _ in runner.calls]
    # hours 06..09 were due at 10:15; by the time they were done (11:35) hour 10 was due too
    assert cutoffs == [at(f"2026-11-22T{h:02d}:00") for h in (7, 8, 9, 10, 11)]
    assert saved(store)["loaded_until"] == "2026-11-22T11"

    # down from 11:40 to 15:20: the restart resumes after 11:00, in order, without start_hour
    clock.now = at("2026-11-22T15:20")
    runner.calls.clear()
    said: list[str] = []
    second = Scheduler(runner, store, settings(), clock=clock, say=said.append)
    clock.on_sleep = stop_after_sleeps(second, len(clock.sleeps_s) + 1)
    assert second.run(max_steps=20).code == EXIT_OK
    assert [until for until, _ in runner.calls] == [at(f"2026-11-22T{h}:00") for h in (12, 13, 14, 15, 16)]
    assert any("catching up: 4 runs are due, up to --until-hour 2026-11-22T15" in s for s in said)
    history = saved(store)["history"]
    assert [h["until"] for h in history] == [f"2026-11-22T{h:02d}" for h in range(7, 17)]


def test_without_state_or_start_hour_it_starts_with_the_latest_due_hour(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T10:09"))
    runner = ScriptedRunner(clock)
    scheduler = Scheduler(runner, store, settings(), clock=clock, say=lambda _: None)
    assert scheduler.run(once=True).code == EXIT_OK
    # at 10:09 the hour that ended at 10:00 is still in its grace period: the latest due cutoff is 09:00
    assert runner.calls == [(at("2026-11-22T09:00"), at("2026-11-22T10:09"))]
    assert clock.sleeps_s == []  # --once: exits instead of waiting


def test_every_two_hours_cuts_at_even_hours(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T15:00"))
    runner = ScriptedRunner(clock)
    scheduler = Scheduler(
        runner,
        store,
        settings(every_ms=2 * HOUR_MS, start_hour="2026-11-22T09"),
        clock=clock,
        say=lambda _: None,
    )
    scheduler.run(once=True)
    assert [until for until, _ in runner.calls] == [
        at("2026-11-22T10:00"),
        at("2026-11-22T12:00"),
        at("2026-11-22T14:00"),
    ]


def test_a_failed_run_is_retried_with_backoff_and_later_hours_wait(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T12:30"))
    runner = ScriptedRunner(clock, script=["failed", "locked", "failed", "failed"])
    said: list[str] = []
    scheduler = Scheduler(
        runner,
        store,
        settings(start_hour="2026-11-22T10", retry_backoff_max_ms=200_000),
        clock=clock,
        say=said.append,
    )
    assert scheduler.run(once=True).code == EXIT_OK
    cutoffs = [until for until, _ in runner.calls]
    assert cutoffs == [at("2026-11-22T11:00")] * 5 + [at("2026-11-22T12:00")]
    assert clock.sleeps_s == [60.0, 120.0, 200.0, 200.0]  # doubling, capped
    assert any("the job's lock is held by another run: locked (scripted); retrying in 2m" in s for s in said)
    history = saved(store)["history"]
    assert [(h["attempt"], h["status"]) for h in history] == [
        (1, "failed"),
        (2, "locked"),
        (3, "failed"),
        (4, "failed"),
        (5, "done"),
        (1, "done"),
    ]


def test_it_gives_up_after_max_attempts_and_a_bad_config_stops_it_at_once(store: ScheduleStateStore) -> None:
    clock = FakeClock(at("2026-11-22T12:30"))
    runner = ScriptedRunner(clock, script=["failed"] * 3)
    scheduler = Scheduler(
        runner, store, settings(start_hour="2026-11-22T10", max_attempts=3), clock=clock, say=lambda _: None
    )
    finished = scheduler.run()
    assert finished.code == EXIT_GAVE_UP
    assert "hour 2026-11-22T10" in finished.reason
    assert saved(store)["loaded_until"] is None
    assert len(runner.calls) == 3

    runner = ScriptedRunner(clock, script=["fatal"])
    scheduler = Scheduler(
        runner, store, settings(start_hour="2026-11-22T10"), clock=clock, say=lambda _: None
    )
    assert scheduler.run().code == EXIT_FATAL
    assert len(runner.calls) == 1


@pytest.fixture
def sigterm_restored() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    yield
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_sigterm_while_waiting_stops_at_once(store: ScheduleStateStore, sigterm_restored: None) -> None:
    clock = FakeClock(at("2026-11-22T10:05"))
    runner = ScriptedRunner(clock)
    said: list[str] = []
    scheduler = Scheduler(runner, store, settings(), clock=clock, say=said.append)
    clock.on_sleep = lambda _clock: os.kill(os.getpid(), signal.SIGTERM)
    restore = scheduler.install_signal_handlers()
    try:
        finished = scheduler.run(max_steps=20)
    finally:
        restore()
    assert finished.code == EXIT_OK
    assert finished.reason == "stopped (SIGTERM)"
    assert said[-1] == "stopped (SIGTERM)"
    # it ran the hour that was due (09), then got the signal while waiting for the next one
    assert [until for until, _ in runner.calls] == [at("2026-11-22T10:00") - HOUR_MS]
    assert len(clock.sleeps_s) == 1


def test_sigterm_during_a_run_lets_it_finish_and_a_second_one_aborts_it(
    store: ScheduleStateStore, sigterm_restored: None
) -> None:
    clock = FakeClock(at("2026-11-22T12:30"))
    runner = ScriptedRunner(clock, during=lambda _abort: os.kill(os.getpid(), signal.SIGTERM))
    scheduler = Scheduler(
        runner, store, settings(start_hour="2026-11-22T09"), clock=clock, say=lambda _: None
    )
    restore = scheduler.install_signal_handlers()
    try:
        assert scheduler.run(max_steps=20).code == EXIT_OK
    finally:
        restore()
    # the run that got the signal finished and was recorded; no other run started
    assert [until for until, _ in runner.calls] == [at("2026-11-22T10:00")]
    assert saved(store)["loaded_until"] == "2026-11-22T10"

    def twice(abort: threading.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert abort.is_set()

    runner = ScriptedRunner(clock, during=twice)
    scheduler = Scheduler(runner, store, settings(), clock=clock, say=lambda _: None)
    restore = scheduler.install_signal_handlers()
    try:
        finished = scheduler.run(max_steps=20)
    finally:
        restore()
    assert finished.reason == "stopped (SIGINT)"
    # the aborted hour is not recorded: the next start runs it again
    state = saved(store)
    assert state["loaded_until"] == "2026-11-22T10"
    assert state["history"][-1]["status"] == "aborted"
    assert [until for until, _ in runner.calls] == [at("2026-11-22T11:00")]


@dataclass
class LockingRunner:
    """Takes the job's real ZooKeeper lock for its run, as ``run_load`` does (a held lock is ``locked``)."""

    zk: Any
    job: str
    runs: list[int] = field(default_factory=list)

    def run(self, until_ms: int, _abort: threading.Event) -> RunResult:
        try:
            with JobLock(self.zk, self.job, f"scheduled run until {until_ms}"):
                self.runs.append(until_ms)
        except JobLockedError as exc:
            return RunResult("locked", str(exc), "locked")
        return RunResult("done", "committed", "committed")


def test_a_held_job_lock_is_retried_not_run_twice(
    store: ScheduleStateStore, zk: Any, zk_connect: str
) -> None:
    other = new_client(zk_connect)
    holder = JobLock(other, "hourly", "a manual `lumber etl run`")
    holder.acquire()
    try:
        clock = FakeClock(at("2026-11-22T11:30"))
        runner = LockingRunner(zk, "hourly")
        said: list[str] = []
        scheduler = Scheduler(
            runner, store, settings(start_hour="2026-11-22T09"), clock=clock, say=said.append
        )

        def release_after_second_backoff(clock: FakeClock) -> None:
            if len(clock.sleeps_s) == 2:
                holder.release()

        clock.on_sleep = release_after_second_backoff
        assert scheduler.run(once=True).code == EXIT_OK
    finally:
        holder.release()
        other.stop()
        other.close()
    assert runner.runs == [at("2026-11-22T10:00"), at("2026-11-22T11:00")]
    history = saved(store)["history"]
    assert [(h["until"], h["status"]) for h in history] == [
        ("2026-11-22T10", "locked"),
        ("2026-11-22T10", "locked"),
        ("2026-11-22T10", "done"),
        ("2026-11-22T11", "done"),
    ]
    assert "is held by a manual `lumber etl run`" in history[0]["detail"]
    assert clock.sleeps_s == [60.0, 120.0]


def test_state_files_of_another_job_or_garbage_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"format": 1, "job": "nightly", "loaded_until_ms": null}')
    with pytest.raises(SchedulerError, match="belongs to job 'nightly'"):
        ScheduleStateStore(path, "hourly").load()
    path.write_text("{not json")
    with pytest.raises(SchedulerError, match="unreadable scheduler state"):
        ScheduleStateStore(path, "hourly").load()


def test_the_command_rejects_bad_intervals_and_stops_on_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "lumber.toml"
    config.write_text(f'[dev]\nstate_dir = "{tmp_path / "state"}"\n[zookeeper]\nconnect = "127.0.0.1:1"\n')
    base = [sys.executable, "-m", "lumber", "--config", str(config), "etl", "schedule"]
    bad = subprocess.run([*base, "--every", "30m"], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2
    assert "whole number of hours" in bad.stderr
    # a start hour in the future: nothing is due, it waits (no spark-submit is started)
    process = subprocess.Popen(
        [*base, "--start-hour", "2099-01-01T00", "--delay", "5m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert "scheduling job 'hourly': every 1h, 5m after the hour" in lines[0]
        assert "next: hour 2099-01-01T00 (--until-hour 2099-01-01T01) at 2099-01-01 01:05:00 UTC" in lines[1]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped (SIGTERM)" in out
    assert "SIGTERM: stopping" in err


def test_the_scheduler_s_log_says_when_a_run_waits_for_the_job_lock_and_how_long(
    store: ScheduleStateStore, tmp_path: Path
) -> None:
    # A stand-in for spark-submit prints what jobs/load.py prints when its lock's holder died (the lock's
    # own waiting is tested in test_job_lock.py): the scheduler's log must show both lines, not only
    # Spark's log.
    record = {"run_id": "r1", "job": "hourly", "outcome": "committed", "started_at_ms": 1, "rows": 5}
    script = f"""
        print("lumber-lock: job 'hourly': the lock is held by web-1 pid 42, but that process is gone; its "
              "ZooKeeper session expires within 10 s: waiting up to 14 s for it", flush=True)
        print("lumber-lock: job 'hourly': lock /lumber/etl/hourly/lock taken after 9.6 s", flush=True)
        print("lumber-load: committed", flush=True)
        print("lumber-load-result: " + {json.dumps(json.dumps(record))}, flush=True)
    """
    asked: list[str] = []

    def prepare(_settings: SubmitSettings, *, until_hour: str, **_: Any) -> PreparedSubmit:
        asked.append(until_hour)
        argv = (sys.executable, "-c", textwrap.dedent(script))
        return PreparedSubmit(argv, tmp_path / "logs" / f"{until_hour}.log", dict(os.environ))

    said: list[str] = []
    runner = SparkSubmitRunner(submit_settings(LumberConfig()), say=said.append, prepare=prepare)
    clock = FakeClock(at("2026-11-22T10:30"))
    scheduler = Scheduler(runner, store, settings(start_hour="2026-11-22T09"), clock=clock, say=said.append)
    assert scheduler.run(once=True).code == EXIT_OK
    assert asked == ["2026-11-22T10"]
    waits = [line for line in said if line.startswith("  lock: ")]
    assert waits == [
        (
            "  lock: job 'hourly': the lock is held by web-1 pid 42, but that process is gone; its "
            "ZooKeeper session expires within 10 s: waiting up to 14 s for it"
        ),
        "  lock: job 'hourly': lock /lumber/etl/hourly/lock taken after 9.6 s",
    ]
    assert said.index(waits[1]) < next(i for i, line in enumerate(said) if line.endswith("] committed"))
    assert saved(store)["loaded_until"] == "2026-11-22T10"
