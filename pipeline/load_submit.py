"""One load run through ``spark-submit``, watched from outside: what ``lumber etl run`` and the scheduler do.

:func:`prepare_submit` packs the project's code (:func:`~pipeline.spark_submit.build_code_zip`), writes the
effective config to ``<[dev] state_dir>/etl/<job>.toml`` (mode 0600: it may hold secrets, and only its path
is on the command line) and returns the command
(:func:`~pipeline.spark_submit.spark_submit_command`). :func:`submit_load` runs it:

* spark-submit runs in a process group of its own, so that the driver JVM and the Python driver it starts
  can be stopped together, and only they (``abort``, or an exception such as Ctrl-C in the caller);
* the run dies with the caller, even when the caller is SIGKILLed (:mod:`pipeline.parent_watch`: the JVM
  gets a parent-death signal, the driver watches the caller's pid, passed as ``LUMBER_PARENT_PID``); so
  :func:`submit_load` waits for the run in the thread that started it, and the caller must not hand the
  run over to another thread;
* the lines the driver's job lock writes when it waits for a dead holder's ZooKeeper session
  (:data:`~pipeline.job_lock.WAIT_PREFIX`, on the driver's stderr, which Spark's ``PythonRunner`` merges
  into its stdout) go to ``on_wait`` as they come, and to the log;
* the job's progress lines (``lumber-load: ...``) go to ``on_progress`` as they come, its result line
  (``lumber-load-result: {...}``) becomes :attr:`SubmitResult.record`, everything else (Spark's log) goes
  to ``<[dev] state_dir>/etl/logs/<job>-<UTC time>.log``;
* the exit code is the job's (``jobs/load.py``): 0 committed or nothing to load, 1 failed, 2 bad arguments
  or config, 3 another run holds the job's lock.

A run stopped half-way commits nothing (or, past its commit point, everything): the next run repairs it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.driver_output import BAD_CONFIG_EXIT_CODE, LOCKED_EXIT_CODE, PROGRESS_PREFIX, RESULT_PREFIX
from pipeline.job_lock import WAIT_PREFIX
from pipeline.load_config import LoadConfig
from pipeline.load_errors import LoadError
from pipeline.parent_watch import PARENT_PID_ENV, die_with_parent, parent_value
from pipeline.run_record import RunRecord
from pipeline.spark_submit import build_code_zip, spark_submit_command, submit_environment, submit_variables

_TAIL_LINES = 25
#: Called with (seconds since the start, progress line without its prefix).
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class SubmitSettings:
    """What a submitted run needs from the config: the ``[load]`` section, the folder for the code zip,
    the effective configs and the runs' Spark logs (``<[dev] state_dir>/etl``), and the effective config
    itself as the TOML text the driver reads (``jobs/load.py --config``). The app builds it from its
    composite config (:func:`lumber.etl_settings.submit_settings`); this library never imports the app."""

    load: LoadConfig
    etl_dir: Path
    #: the whole effective ``lumber.toml``: the driver reads every section the load reads
    config_text: str


@dataclass(frozen=True)
class PreparedSubmit:
    """The command of one run and where its Spark log goes."""

    argv: tuple[str, ...]
    log_path: Path
    env: dict[str, str]
    #: the variables of ``env`` that Lumber sets (:func:`~pipeline.spark_submit.submit_variables`)
    variables: dict[str, str] = field(default_factory=dict)

    def command_line(self) -> str:
        """The command as a shell runs it: ``VAR=value ... spark-submit ...``, quoted where needed."""
        return shlex.join([*(f"{k}={v}" for k, v in sorted(self.variables.items())), *self.argv])


@dataclass(frozen=True)
class SubmitResult:
    """How one spark-submit ended."""

    exit_code: int
    record: RunRecord | None
    log_path: Path
    elapsed_s: float
    #: the job's own error lines (``jobs/load.py: ...``), else the end of the Spark log; empty on success
    error_lines: tuple[str, ...] = ()
    aborted: bool = False

    @property
    def outcome(self) -> str:
        """``committed`` / ``nothing_to_load`` (exit 0), ``locked`` (3), ``bad_config`` (2), ``aborted``
        (stopped by the caller) or ``failed`` (anything else)."""
        if self.aborted:
            return "aborted"
        if self.exit_code == 0:
            return self.record.outcome if self.record is not None else "committed"
        if self.exit_code == LOCKED_EXIT_CODE:
            return "locked"
        if self.exit_code == BAD_CONFIG_EXIT_CODE:
            return "bad_config"
        return "failed"

    def summary(self) -> str:
        """One line: the outcome and what the run did or why it failed."""
        if self.exit_code == 0 and self.record is not None:
            record = self.record
            return (
                f"{record.outcome} in {self.elapsed_s:.1f} s: run {record.run_id}, {record.rows} rows, "
                f"{record.quarantined} quarantined, {record.lost} lost"
                + (f", manifest {record.sequence}" if record.sequence is not None else "")
            )
        if self.aborted:
            return f"aborted after {self.elapsed_s:.1f} s; Spark's log: {self.log_path}"
        reason = self.error_lines[-1] if self.error_lines else "(no message)"
        return (
            f"{self.outcome} (spark-submit exit {self.exit_code}) after {self.elapsed_s:.1f} s: {reason}; "
            f"Spark's log: {self.log_path}"
        )


def prepare_submit(
    settings: SubmitSettings,
    *,
    until_hour: str | None = None,
    topics: Sequence[str] = (),
    master: str | None = None,
    extra_conf: Sequence[str] = (),
) -> PreparedSubmit:
    """Pack the code, write the effective config and build the command (see the module docstring)."""
    load = settings.load
    state = settings.etl_dir
    code_zip = build_code_zip(state / "lumber-code.zip")
    config_path = state / f"{load.job}.toml"
    tmp = config_path.with_name(f"{config_path.name}.{os.getpid()}.tmp")
    # the effective config may hold secrets ([load] sasl_password...): readable by its owner only, from
    # the start; the driver gets its path, never its contents, on the command line
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(settings.config_text)
    tmp.replace(config_path)
    argv = spark_submit_command(
        load,
        config_path=config_path.resolve(),
        code_zip=code_zip.resolve(),
        master=master,
        extra_conf=extra_conf,
        topics=topics,
        until_hour=until_hour,
    )
    stamp = dt.datetime.now(tz=dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    log_path = state / "logs" / f"{load.job}-{stamp}.log"
    return PreparedSubmit(
        tuple(argv),
        log_path,
        submit_environment(load, master=master),
        submit_variables(load, master=master),
    )


def _signal_group(process: subprocess.Popen[str], sig: signal.Signals) -> None:
    """Signal the process group of ``process`` (which we started as its leader), if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _stop_group(process: subprocess.Popen[str], kill_timeout_s: float) -> None:
    """SIGTERM the run's process group, SIGKILL it after ``kill_timeout_s``; reap the leader."""
    _signal_group(process, signal.SIGTERM)
    try:
        process.wait(timeout=kill_timeout_s)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait(timeout=30)
    # the Python driver may outlive the JVM for a moment: the group gets the last word
    _signal_group(process, signal.SIGKILL)


def submit_load(
    prepared: PreparedSubmit,
    *,
    on_progress: Progress = lambda _s, _line: None,
    on_wait: Callable[[str], None] = lambda _line: None,
    abort: threading.Event | None = None,
    kill_timeout_s: float = 30.0,
) -> SubmitResult:
    """Run ``prepared`` and wait for it (see the module docstring). ``abort`` set: stop the run's process
    group (SIGTERM, then SIGKILL after ``kill_timeout_s``) and return an ``aborted`` result."""
    prepared.log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result: dict[str, Any] | None = None
    aborted = threading.Event()
    finished = threading.Event()
    with prepared.log_path.open("w", encoding="utf-8") as log_file:
        process = subprocess.Popen(
            die_with_parent(prepared.argv, os.getpid()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            env={**prepared.env, PARENT_PID_ENV: parent_value()},
            text=True,
            bufsize=1,
            start_new_session=True,
        )

        def watch_abort() -> None:
            if abort is None:
                return
            while not finished.is_set():
                if abort.wait(0.2):
                    aborted.set()
                    _stop_group(process, kill_timeout_s)
                    return

        if process.stdout is None:
            _stop_group(process, kill_timeout_s)
            raise LoadError("spark-submit started without a stdout pipe")
        watcher = threading.Thread(target=watch_abort, name="lumber-load-abort", daemon=True)
        watcher.start()
        try:
            for line in process.stdout:
                if line.startswith(PROGRESS_PREFIX):
                    on_progress(time.monotonic() - started, line[len(PROGRESS_PREFIX) :].rstrip())
                elif line.startswith(RESULT_PREFIX):
                    result = json.loads(line[len(RESULT_PREFIX) :])
                else:
                    if line.startswith(WAIT_PREFIX):
                        on_wait(line[len(WAIT_PREFIX) :].rstrip())
                    log_file.write(line)
            code = process.wait()
        except BaseException:
            _stop_group(process, kill_timeout_s)
            raise
        finally:
            finished.set()
            watcher.join(timeout=kill_timeout_s + 35)
            process.stdout.close()
    elapsed = time.monotonic() - started
    record = RunRecord.from_json(result) if result is not None else None
    errors: tuple[str, ...] = ()
    if code != 0:
        lines = prepared.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        own = [line for line in lines if line.startswith("jobs/load.py:")]
        errors = tuple((own or lines[-_TAIL_LINES:])[-_TAIL_LINES:])
    return SubmitResult(code, record, prepared.log_path, elapsed, errors, aborted.is_set())
