"""The hourly scheduler behind ``lumber etl schedule``: each hour's load once its grace period has passed.

Vocabulary: the run for hour ``H`` is ``lumber etl run --until-hour H+1`` (every record before ``H+1``, so
also anything older that is not loaded yet); its *cutoff* is ``H+1``. With ``every`` = k hours the
cutoffs are the multiples of k hours since the epoch (UTC). A cutoff is *due* once ``cutoff + delay`` has
passed (``delay``: the grace period for late producers).

The loop, one step at a time (each step runs one load or sleeps; nothing spins):

1. the next cutoff is the one after the last that succeeded (the state file), else the first after
   ``start_hour``, else the latest due one;
2. not due yet: sleep until it is (``--once``: exit 0 instead, which is what cron wants);
3. due: run it (:class:`LoadRunner`; in production :class:`SparkSubmitRunner`, one spark-submit).
   After downtime several cutoffs are due: they run one by one, oldest first, so each hour gets its own
   manifest and its audit counts become complete in order;
4. the run committed or had nothing to load: record the cutoff in the state file (written atomically
   before the next step), go to 1;
5. it failed, or the job's ZooKeeper lock was held by another run (``jobs/load.py`` exits 3; two loads of
   one job never run at once, whoever started them): sleep ``retry_backoff_ms`` * 2^(attempt-1), at most
   ``retry_backoff_max_ms``, and run the same cutoff again; later cutoffs wait. After ``max_attempts``
   failed attempts (0: never) the scheduler exits 1; the next start retries that cutoff. A run refused for
   bad arguments or config (exit 2) ends the scheduler at once with exit 2: retrying cannot help.

Stopping: :meth:`Scheduler.stop`, or SIGTERM / SIGINT once :meth:`Scheduler.install_signal_handlers` ran.
The first signal ends a sleep at once, or lets the running load finish (its outcome is recorded), then the
scheduler exits 0. A second signal aborts the running load (its process group gets SIGTERM, SIGKILL after
``kill_timeout_ms``); an aborted run commits nothing or everything, the cutoff is not recorded, and the
next start runs it again (the load repairs what a killed run left).

State file (JSON, replaced atomically; ``[schedule] state_file``)::

    {"format": 1, "job": "hourly", "loaded_until_ms": 1795345200000, "loaded_until": "2026-11-22T11",
     "updated_at_ms": 1795345800123,
     "history": [{"until": "2026-11-22T11", "until_ms": ..., "attempt": 1, "status": "done",
                  "outcome": "committed", "at_ms": ..., "detail": "committed in 31.2 s: run ..."}]}

``history`` keeps the last :data:`HISTORY_LENGTH` runs. The clock is injected (:class:`Clock`) so that
tests drive hours of schedule in milliseconds. Not thread-safe apart from :meth:`Scheduler.stop`, which any
thread (or a signal handler) may call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal, Protocol

from pipeline.errors import PipelineError
from pipeline.load_errors import LoadError
from pipeline.load_submit import PreparedSubmit, SubmitSettings, prepare_submit, submit_load
from pipeline.schedule_config import HOUR_MS, ScheduleConfig, parse_hour_ms

log = logging.getLogger(__name__)

STATE_FORMAT = 1
HISTORY_LENGTH = 48
#: Exit codes of :meth:`Scheduler.run`.
EXIT_OK = 0
EXIT_GAVE_UP = 1
EXIT_FATAL = 2

RunStatus = Literal["done", "locked", "failed", "fatal", "aborted"]
Say = Callable[[str], None]


class SchedulerError(PipelineError):
    """The scheduler cannot go on: an unreadable state file, bad settings."""


def hour_text(ms: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of ``ms``: the form of ``--until-hour``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H")


def duration_text(ms: int) -> str:
    """``1h 5m``, ``10m``, ``42s``: a pause for humans."""
    seconds = max(0, round(ms / 1000))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return " ".join(p for p in parts if p) or "0s"


# ---------------------------------------------------------------------------------------------- clock


class Clock(Protocol):
    """Where the scheduler gets the time and how it waits (injected: tests advance time themselves)."""

    def now_ms(self) -> int:
        """Wall-clock time, ms since the epoch (UTC)."""
        ...

    def sleep(self, seconds: float, wake: threading.Event) -> None:
        """Wait ``seconds``, or less if ``wake`` is set meanwhile."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float, wake: threading.Event) -> None:
        wake.wait(max(0.0, seconds))


# ---------------------------------------------------------------------------------------------- runners


@dataclass(frozen=True)
class RunResult:
    """What one attempt at a cutoff did."""

    #: done (committed or nothing to load), locked (another run holds the job's lock), failed (retry),
    #: fatal (bad arguments or config: stop), aborted (stopped by a second signal)
    status: RunStatus
    detail: str
    #: the load's own word for it: committed, nothing_to_load, locked, failed, bad_config, aborted
    outcome: str = ""


class LoadRunner(Protocol):
    """Runs the load once for a cutoff: every record before ``until_ms``."""

    def run(self, until_ms: int, abort: threading.Event) -> RunResult:
        """Run it; stop early (status ``aborted``) if ``abort`` is set meanwhile. Never raises for a failed
        run: that is a ``failed`` result."""
        ...


class SparkSubmitRunner:
    """The production runner: ``spark-submit jobs/load.py --until-hour H`` per run, exactly what
    ``lumber etl run --until-hour H`` does (:mod:`pipeline.load_submit`). Its progress lines, and the job
    lock's lines when the run waits for a dead holder's ZooKeeper session (how long at most, then how long
    it took), are passed to ``say`` as they come. ``prepare`` builds the command (``prepare_submit``)."""

    def __init__(
        self,
        settings: SubmitSettings,
        *,
        topics: Sequence[str] = (),
        master: str | None = None,
        extra_conf: Sequence[str] = (),
        kill_timeout_s: float = 30.0,
        say: Say = log.info,
        prepare: Callable[..., PreparedSubmit] = prepare_submit,
    ) -> None:
        self.settings = settings
        self.prepare = prepare
        self.topics = tuple(topics)
        self.master = master
        self.extra_conf = tuple(extra_conf)
        self.kill_timeout_s = kill_timeout_s
        self.say = say

    def run(self, until_ms: int, abort: threading.Event) -> RunResult:
        until = hour_text(until_ms)
        try:
            prepared = self.prepare(
                self.settings,
                until_hour=until,
                topics=self.topics,
                master=self.master,
                extra_conf=self.extra_conf,
            )
            self.say(f"  spark-submit ... --until-hour {until}; Spark's log: {prepared.log_path}")
            result = submit_load(
                prepared,
                on_progress=lambda elapsed, line: self.say(f"  [{elapsed:6.1f}s] {line}"),
                on_wait=lambda line: self.say(f"  lock: {line}"),
                abort=abort,
                kill_timeout_s=self.kill_timeout_s,
            )
        except (LoadError, OSError) as exc:
            return RunResult("failed", f"could not start spark-submit: {exc}", "failed")
        statuses: Mapping[str, RunStatus] = {
            "committed": "done",
            "nothing_to_load": "done",
            "locked": "locked",
            "bad_config": "fatal",
            "aborted": "aborted",
        }
        return RunResult(statuses.get(result.outcome, "failed"), result.summary(), result.outcome)


# ---------------------------------------------------------------------------------------------- state


@dataclass(frozen=True)
class ScheduleState:
    """What the scheduler has done (see the module docstring for the file)."""

    job: str
    #: every cutoff up to this one has been loaded by a successful run (None: nothing yet)
    loaded_until_ms: int | None = None
    updated_at_ms: int = 0
    history: tuple[Mapping[str, Any], ...] = ()

    def with_run(
        self, entry: Mapping[str, Any], at_ms: int, loaded_until_ms: int | None = None
    ) -> ScheduleState:
        return dataclasses.replace(
            self,
            loaded_until_ms=self.loaded_until_ms if loaded_until_ms is None else loaded_until_ms,
            updated_at_ms=at_ms,
            history=(*self.history, dict(entry))[-HISTORY_LENGTH:],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "job": self.job,
            "loaded_until_ms": self.loaded_until_ms,
            "loaded_until": None if self.loaded_until_ms is None else hour_text(self.loaded_until_ms),
            "updated_at_ms": self.updated_at_ms,
            "history": [dict(h) for h in self.history],
        }


class ScheduleStateStore:
    """The state file of one job's scheduler: read once at start, replaced atomically after every run."""

    def __init__(self, path: Path, job: str) -> None:
        self.path = path
        self.job = job

    def load(self) -> ScheduleState:
        """The recorded state (an empty one when there is no file yet)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return ScheduleState(self.job)
        except (OSError, ValueError) as exc:
            raise SchedulerError(f"{self.path}: unreadable scheduler state: {exc}") from exc
        try:
            if raw["format"] != STATE_FORMAT:
                raise SchedulerError(f"{self.path}: unknown state format {raw['format']!r}")
            if raw["job"] != self.job:
                raise SchedulerError(
                    f"{self.path}: this state belongs to job {raw['job']!r}, not {self.job!r}; give each job "
                    "its own [schedule] state_file"
                )
            until = raw.get("loaded_until_ms")
            return ScheduleState(
                self.job,
                None if until is None else int(until),
                int(raw.get("updated_at_ms", 0)),
                tuple(dict(h) for h in raw.get("history", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SchedulerError(
                f"{self.path}: malformed scheduler state: {type(exc).__name__}: {exc}"
            ) from exc

    def save(self, state: ScheduleState) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(self.path)


def default_state_path(settings: SubmitSettings, schedule: ScheduleConfig) -> Path:
    """``[schedule] state_file``, else ``<[dev] state_dir>/etl/schedule-<job>.json``."""
    if schedule.state_file:
        return Path(schedule.state_file)
    return settings.etl_dir / f"schedule-{settings.load.job}.json"


# ---------------------------------------------------------------------------------------------- scheduler


@dataclass(frozen=True)
class ScheduleExit:
    """Why :meth:`Scheduler.run` returned, and the exit code for it."""

    code: int
    reason: str


class Scheduler:
    """Runs one job's load per cutoff, in order (see the module docstring)."""

    def __init__(
        self,
        runner: LoadRunner,
        store: ScheduleStateStore,
        settings: ScheduleConfig,
        *,
        clock: Clock | None = None,
        say: Say = log.info,
    ) -> None:
        self.runner = runner
        self.store = store
        self.settings = settings
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.say = say
        self.every_ms = settings.every_ms
        self.delay_ms = settings.delay_ms
        self.start_ms = parse_hour_ms(settings.start_hour, "start hour") if settings.start_hour else None
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._signals = 0
        self._stop_reason = "stop requested"

    # -- time arithmetic ---------------------------------------------------------------------------------

    def due_until_ms(self, now_ms: int) -> int:
        """The latest cutoff whose grace period has passed at ``now_ms``."""
        return (now_ms - self.delay_ms) // self.every_ms * self.every_ms

    def _after(self, ms: int) -> int:
        """The first cutoff after ``ms``."""
        return (ms // self.every_ms + 1) * self.every_ms

    def next_until_ms(self, state: ScheduleState, now_ms: int) -> int:
        """The cutoff to run next (step 1 of the module docstring)."""
        if state.loaded_until_ms is not None:
            return self._after(state.loaded_until_ms)
        if self.start_ms is not None:
            return self._after(self.start_ms)
        return self.due_until_ms(now_ms)

    def backoff_ms(self, attempt: int) -> int:
        """The pause after failed attempt number ``attempt`` (1, 2, ...)."""
        doubled = self.settings.retry_backoff_ms * 2 ** min(max(attempt - 1, 0), 30)
        return int(min(doubled, self.settings.retry_backoff_max_ms))

    # -- stopping ----------------------------------------------------------------------------------------

    def stop(self, *, abort_run: bool = False) -> None:
        """Stop after the running load (``abort_run``: abort it too). Safe from any thread or a signal."""
        self._stop.set()
        if abort_run:
            self._abort.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        # only flags and one unbuffered write here: a print could re-enter the stream the loop is printing to
        self._signals += 1
        name = signal.Signals(signum).name
        self._stop_reason = name
        if self._signals == 1:
            message = f"{name}: stopping (a running load finishes first; send {name} again to abort it)"
            self.stop()
        else:
            message = f"{name} again: aborting the running load"
            self.stop(abort_run=True)
        with contextlib.suppress(OSError):
            os.write(2, f"lumber etl schedule: {message}\n".encode())

    def install_signal_handlers(self) -> Callable[[], None]:
        """Handle SIGTERM and SIGINT (see the module docstring); returns a function restoring the old ones.
        Only from the main thread."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    # -- the loop ----------------------------------------------------------------------------------------

    def _entry(self, until_ms: int, attempt: int, result: RunResult, at_ms: int) -> dict[str, Any]:
        return {
            "until": hour_text(until_ms),
            "until_ms": until_ms,
            "attempt": attempt,
            "status": result.status,
            "outcome": result.outcome,
            "at_ms": at_ms,
            "detail": result.detail,
        }

    def _hour(self, until_ms: int) -> str:
        first = until_ms - self.every_ms
        span = hour_text(first) if self.every_ms == HOUR_MS else f"{hour_text(first)}..{hour_text(until_ms)}"
        return f"hour {span} (--until-hour {hour_text(until_ms)})"

    def run(self, *, once: bool = False, max_steps: int | None = None) -> ScheduleExit:
        """Run until stopped (``once``: until nothing is due). ``max_steps`` bounds the loop's steps (runs
        plus sleeps): a safety net for tests and embedding; ``None`` for a daemon."""
        state = self.store.load()
        self.say(
            f"scheduling job {self.store.job!r}: every {duration_text(self.every_ms)}, "
            f"{duration_text(self.delay_ms)} after the hour; state {self.store.path}"
            + (
                f"; last loaded {self._hour(state.loaded_until_ms)}"
                if state.loaded_until_ms is not None
                else ""
            )
        )
        attempts = 0
        announced_wait: int | None = None
        catching_up_to: int | None = None
        steps = 0
        while not self._stop.is_set():
            if max_steps is not None and steps >= max_steps:
                return ScheduleExit(EXIT_OK, f"stopped after {max_steps} steps")
            steps += 1
            now = self.clock.now_ms()
            until = self.next_until_ms(state, now)
            due = self.due_until_ms(now)
            if until > due:
                catching_up_to = None
                if once:
                    reason = (
                        f"caught up; the next is {self._hour(until)} at {_clock_text(until + self.delay_ms)}"
                    )
                    self.say(reason)
                    return ScheduleExit(EXIT_OK, reason)
                wake_ms = until + self.delay_ms
                if announced_wait != until:
                    self.say(
                        f"next: {self._hour(until)} at {_clock_text(wake_ms)} "
                        f"(in {duration_text(wake_ms - now)})"
                    )
                    announced_wait = until
                self.clock.sleep((wake_ms - now) / 1000, self._stop)
                continue
            if due > until and (catching_up_to is None or due > catching_up_to):
                count = (due - until) // self.every_ms + 1
                self.say(
                    f"catching up: {count} runs are due, up to --until-hour {hour_text(due)}; "
                    "running them in order, oldest first"
                )
                catching_up_to = due
            attempts += 1
            self.say(f"{self._hour(until)}: starting" + (f" attempt {attempts}" if attempts > 1 else ""))
            result = self.runner.run(until, self._abort)
            at_ms = self.clock.now_ms()
            entry = self._entry(until, attempts, result, at_ms)
            if result.status == "done":
                state = state.with_run(entry, at_ms, loaded_until_ms=until)
                self.store.save(state)
                self.say(f"{self._hour(until)}: {result.detail}")
                attempts = 0
                continue
            state = state.with_run(entry, at_ms)
            self.store.save(state)
            if result.status == "aborted":
                self.say(f"{self._hour(until)}: {result.detail}; it runs again at the next start")
                break
            if result.status == "fatal":
                self.say(f"{self._hour(until)}: {result.detail}; retrying cannot help, stopping")
                return ScheduleExit(EXIT_FATAL, result.detail)
            what = "the job's lock is held by another run" if result.status == "locked" else "failed"
            if self.settings.max_attempts and attempts >= self.settings.max_attempts:
                self.say(f"{self._hour(until)}: {what}: {result.detail}; giving up after {attempts} attempts")
                return ScheduleExit(EXIT_GAVE_UP, f"{self._hour(until)} failed {attempts} times")
            pause = self.backoff_ms(attempts)
            self.say(f"{self._hour(until)}: {what}: {result.detail}; retrying in {duration_text(pause)}")
            self.clock.sleep(pause / 1000, self._stop)
        self.say(f"stopped ({self._stop_reason})")
        return ScheduleExit(EXIT_OK, f"stopped ({self._stop_reason})")


def _clock_text(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
