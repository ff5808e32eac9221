"""``lumber etl run|schedule|status|package|completeness|wait``: the hourly Spark load, run, scheduled and
watched; its hours' completeness and a sensor for one (:mod:`lumber.cli.etl_completeness`).

``run`` first checks its arguments without starting anything: ``--until-hour`` is an hour, ``--master`` a
Spark master, each ``--conf`` a ``key=value``, and each of ``--topics`` a topic of the cluster that
``[load] topics_allow`` / ``topics_deny`` let through (one Metadata request); any of these wrong is exit 2
with the reason, before any JVM. Then it packs the project's code
(:func:`pipeline.spark_submit.build_code_zip`), writes the effective config next to it, runs ``spark-submit
jobs/load.py`` (the command and variables in :mod:`pipeline.spark_submit`; ``--print-command`` prints them)
and shows the job's progress lines as they come; Spark's own log goes to ``<[dev] state_dir>/etl/logs/``.
The run dies with this process, even a SIGKILLed one (:mod:`pipeline.parent_watch`). Its exit code is the
job's: 0 committed or nothing to load, 1 failed, 2 bad arguments, 3 another run holds the job's lock.

``schedule`` runs ``run --until-hour H`` for every hour once its grace period has passed, catching up on
missed hours in order and retrying failures with backoff (:mod:`pipeline.scheduler`; ``--once`` for cron).

``status`` shows, per partition the job has loaded, the committed offset, the log end and the lag, and the
last run with its outcome. It reads the job's metadata through :mod:`pipeline.fs` (pyarrow for ``file:``
and ``hdfs://``, or WebHDFS): no JVM starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import add_cluster_options, add_topics_option
from lumber.cli.etl_completeness import register_completeness
from lumber.etl_settings import submit_settings
from pipeline.durations import DURATION_HELP, DurationError, parse_duration_ms
from pipeline.errors import PipelineError
from pipeline.load_submit import prepare_submit, submit_load
from pipeline.schedule_config import HOUR_MS, ScheduleConfig
from pipeline.scheduler import (
    Scheduler,
    SchedulerError,
    ScheduleStateStore,
    SparkSubmitRunner,
    default_state_path,
)
from pipeline.spark_submit import build_code_zip

if TYPE_CHECKING:
    from lumber.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("etl", help="run the hourly Spark load job and show its status")
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    run = sub.add_parser("run", help="run the load once with spark-submit, showing progress")
    add_topics_option(
        run, "topics to load, comma-separated or repeated (default: [load] topics_allow / topics_deny)"
    )
    run.add_argument("--until-hour", help="load only records before this hour, YYYY-MM-DDTHH (UTC)")
    run.add_argument("--master", help="Spark master (default: [spark] master)")
    run.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting (repeatable)"
    )
    run.add_argument("--print-command", action="store_true", help="print the spark-submit command and exit")
    add_cluster_options(run)
    run.set_defaults(handler=_run)

    status = sub.add_parser("status", help="committed offsets, log ends, lag and the last run")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    add_cluster_options(status)
    status.set_defaults(handler=_status)

    schedule = sub.add_parser(
        "schedule",
        help="run the load for every hour once its grace period has passed (catches up, retries)",
        description="Run `etl run --until-hour H` for each hour H once H + DELAY has passed; after downtime, "
        "the missed hours in order; a failed run (or a held job lock) is retried with backoff. SIGTERM or "
        "Ctrl-C stops it after the running load (twice: aborts that load). Exit codes: 0 stopped or (with "
        "--once) caught up, 1 gave up after --max-attempts, 2 bad arguments or config.",
    )
    schedule.add_argument(
        "--every", help="interval, a duration of whole hours: 1h, 2h, 1d (default: [schedule] every_ms)"
    )
    schedule.add_argument(
        "--delay", help=f"grace period after each hour, {DURATION_HELP} (default: [schedule] delay_ms)"
    )
    schedule.add_argument(
        "--once", action="store_true", help="run what is due (catching up in order), then exit: for cron"
    )
    schedule.add_argument(
        "--start-hour", help="first hour to load when there is no state yet, YYYY-MM-DDTHH (UTC)"
    )
    schedule.add_argument(
        "--state-file",
        type=Path,
        help="where to record progress (default: <[dev] state_dir>/etl/schedule-<job>.json)",
    )
    schedule.add_argument(
        "--max-attempts", type=int, help="give up after this many failures of one hour (0: never)"
    )
    add_topics_option(
        schedule, "topics to load, comma-separated or repeated (default: [load] topics_allow / topics_deny)"
    )
    add_cluster_options(schedule)
    schedule.add_argument("--master", help="Spark master (default: [spark] master)")
    schedule.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting (repeatable)"
    )
    schedule.set_defaults(handler=_schedule)

    package = sub.add_parser("package", help="build the --py-files zip of Lumber's code for spark-submit")
    package.add_argument("--output", type=Path, required=True, help="where to write the zip")
    package.set_defaults(handler=_package)

    register_completeness(sub)


def _package(args: argparse.Namespace, _config: LumberConfig) -> int:
    path = build_code_zip(args.output)
    print(path)
    return 0


#: What spark-submit accepts as ``--master`` (SparkSubmitArguments, SparkContext.createTaskScheduler).
_MASTER = re.compile(
    r"local|local\[(\*|\d+)(,\d+)?\]|local-cluster\[\d+,\d+,\d+\]|yarn|(spark|k8s|mesos)://\S+"
)


class RunArgumentError(PipelineError):
    """An ``etl run`` argument is wrong; found before anything was started."""


def _check_run_arguments(args: argparse.Namespace, config: LumberConfig, topics: Sequence[str]) -> None:
    """Everything ``run`` can check without Spark (see the module docstring); raises RunArgumentError."""
    from pipeline.load_job import parse_until_hour
    from pipeline.load_plan import ClusterView, select_topics

    load = config.load
    if args.until_hour is not None:
        try:
            parse_until_hour(args.until_hour)
        except PipelineError as exc:
            raise RunArgumentError(str(exc)) from exc
    master = args.master or load.spark_master
    if not _MASTER.fullmatch(master):
        where = "--master" if args.master else "[spark] master"
        raise RunArgumentError(
            f"{where} {master!r} is not a Spark master: expected local, local[N], local[N,F], "
            "local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://URL or mesos://URL"
        )
    for entry in args.conf:
        if "=" not in entry or not entry.split("=", 1)[0].strip():
            raise RunArgumentError(f"--conf {entry!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g")
    if args.topics is not None and not topics:
        raise RunArgumentError(f"--topics {args.topics!r} names no topic")
    if topics:
        try:
            cluster = ClusterView(config.consumer, load.bootstrap_servers, config.zookeeper.connect)
            try:
                available = cluster.topics()
            finally:
                cluster.close()
        except Exception as exc:
            servers = ", ".join(load.bootstrap_servers) or config.zookeeper.connect
            raise RunArgumentError(
                f"--topics: cannot list the cluster's topics ({servers}) to check them: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        try:
            select_topics(available, load, topics)
        except PipelineError as exc:
            raise RunArgumentError(str(exc)) from exc


def _run(args: argparse.Namespace, config: LumberConfig) -> int:
    load = config.load
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics is not None else []
    try:
        _check_run_arguments(args, config, topics)
    except RunArgumentError as exc:
        print(f"lumber etl run: {exc}; nothing was started", file=sys.stderr)
        return 2
    prepared = prepare_submit(
        submit_settings(config),
        until_hour=args.until_hour,
        topics=topics,
        master=args.master,
        extra_conf=args.conf,
    )
    if args.print_command:
        print(prepared.command_line())
        return 0
    print(
        f"lumber etl run: job {load.job!r} on {args.master or load.spark_master}; "
        f"Spark's log: {prepared.log_path}",
        flush=True,
    )
    result = submit_load(
        prepared,
        on_progress=lambda elapsed, line: print(f"[{elapsed:7.1f}s] {line}", flush=True),
        on_wait=lambda line: print(f"lumber etl run: {line}", file=sys.stderr, flush=True),
    )
    if result.exit_code != 0:
        print(
            f"lumber etl run: spark-submit exited with {result.exit_code}; the end of {result.log_path}:",
            file=sys.stderr,
        )
        for line in result.error_lines:
            print(f"  {line}", file=sys.stderr)
        return result.exit_code
    if result.record is not None:
        print(f"lumber etl run: {result.summary()}")
    return 0


def _schedule_overrides(args: argparse.Namespace, settings: ScheduleConfig) -> ScheduleConfig:
    changes: dict[str, Any] = {}
    if args.every is not None:
        changes["every_ms"] = parse_duration_ms(args.every, "--every")
    if args.delay is not None:
        changes["delay_ms"] = parse_duration_ms(args.delay, "--delay")
    if args.start_hour is not None:
        changes["start_hour"] = args.start_hour
    if args.state_file is not None:
        changes["state_file"] = str(args.state_file)
    if args.max_attempts is not None:
        changes["max_attempts"] = args.max_attempts
    try:
        chosen = settings.replace(**changes)
    except ValueError as exc:
        raise SchedulerError(str(exc).replace("schedule.every_ms", "--every")) from exc
    if chosen.every_ms < HOUR_MS or chosen.max_attempts < 0:
        raise SchedulerError("--every must be at least 1h and --max-attempts at least 0")
    return chosen


def _say(line: str) -> None:
    print(f"{dt.datetime.now(tz=dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} {line}", flush=True)


def _schedule(args: argparse.Namespace, config: LumberConfig) -> int:
    try:
        settings = _schedule_overrides(args, config.schedule)
    except (SchedulerError, DurationError) as exc:
        print(f"lumber etl schedule: {exc}", file=sys.stderr)
        return 2
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else []
    submit = submit_settings(config)
    runner = SparkSubmitRunner(
        submit,
        topics=topics,
        master=args.master,
        extra_conf=args.conf,
        kill_timeout_s=settings.kill_timeout_ms / 1000,
        say=_say,
    )
    store = ScheduleStateStore(default_state_path(submit, settings), config.load.job)
    scheduler = Scheduler(runner, store, settings, say=_say)
    restore = scheduler.install_signal_handlers()
    try:
        finished = scheduler.run(once=args.once)
    finally:
        restore()
    if finished.code != 0:
        print(f"lumber etl schedule: {finished.reason}", file=sys.stderr)
    return finished.code


def _status(args: argparse.Namespace, config: LumberConfig) -> int:
    from pipeline.commit import CommitProtocol
    from pipeline.fs import open_filesystem
    from pipeline.load_plan import ClusterView

    load = config.load
    fs = open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
    protocol = CommitProtocol(fs, load.job)
    manifest = protocol.latest_manifest()
    last = protocol.last_run()
    warehouse = fs.root
    offsets = dict(manifest.offsets) if manifest is not None else {}
    ends: dict[Any, int] = {}
    cluster_error = None
    if offsets:
        try:
            cluster = ClusterView(config.consumer, load.bootstrap_servers, config.zookeeper.connect)
            try:
                topics = sorted({tp.topic for tp in offsets})
                ends = {p.topic_partition: p.high_watermark for p in cluster.partition_offsets(topics, None)}
            finally:
                cluster.close()
        except Exception as exc:  # noqa: BLE001 - status still shows what the warehouse says
            cluster_error = f"{type(exc).__name__}: {exc}"
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "committed_offset": offset,
            "log_end_offset": ends.get(tp),
            "lag": None if tp not in ends else ends[tp] - offset,
        }
        for tp, offset in sorted(offsets.items())
    ]
    status = {
        "job": load.job,
        "warehouse": warehouse,
        "manifest": None if manifest is None else manifest.sequence,
        "partitions": partitions,
        "cluster_error": cluster_error,
        "last_run": None if last is None else last.to_json(),
    }
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"job {load.job!r}, warehouse {warehouse}, latest manifest {status['manifest'] or 'none'}")
    if partitions:
        print(f"  {'topic':<24} {'partition':>9} {'committed':>12} {'log end':>12} {'lag':>10}")
        for p in partitions:
            end = "?" if p["log_end_offset"] is None else p["log_end_offset"]
            lag = "?" if p["lag"] is None else p["lag"]
            print(f"  {p['topic']:<24} {p['partition']:>9} {p['committed_offset']:>12} {end:>12} {lag:>10}")
    else:
        print("  no offsets committed yet")
    if cluster_error:
        print(f"  (log ends unknown: {cluster_error})")
    if last is None:
        print("last run: none")
    else:
        print(f"last run: {last.run_id} {last.outcome.upper()}, started {_when(last.started_at_ms)}", end="")
        if last.finished_at_ms is not None:
            print(f", took {(last.finished_at_ms - last.started_at_ms) / 1000:.1f} s", end="")
        print(f": {last.rows} rows, {last.quarantined} quarantined, {last.lost} lost")
        if last.error:
            print(f"  {last.error}")
    return 0


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
