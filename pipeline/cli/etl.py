"""``lumber etl run|status|package``: the hourly Spark load, submitted and watched from the command line.

``run`` packs the project's code (:func:`pipeline.spark_submit.build_code_zip`), writes the effective config
next to it, runs ``spark-submit jobs/load.py`` (the command in :mod:`pipeline.spark_submit`) and shows the
job's progress lines as they come; Spark's own log goes to ``<[dev] state_dir>/etl/logs/``. Its exit code
is the job's: 0 committed or nothing to load, 1 failed, 2 bad arguments, 3 another run holds the job's lock.

``status`` shows, per partition the job has loaded, the committed offset, the log end and the lag, and the
last run with its outcome (the job's metadata is read through a Hadoop filesystem client, so it works for
``hdfs://`` warehouses too; starting that JVM takes a few seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jobs.load import PROGRESS_PREFIX, RESULT_PREFIX
from pipeline.commit import CommitProtocol, RunRecord
from pipeline.config import LumberConfig, dump_config
from pipeline.fs import launched_filesystem
from pipeline.load_errors import LoadError
from pipeline.load_plan import ClusterView
from pipeline.spark_submit import build_code_zip, spark_submit_command, submit_environment

_TAIL_LINES = 25


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("etl", help="run the hourly Spark load job and show its status")
    sub = parser.add_subparsers(metavar="ACTION", required=True)

    run = sub.add_parser("run", help="run the load once with spark-submit, showing progress")
    run.add_argument("--topics", help="comma-separated topics (default: [load] topics_allow / topics_deny)")
    run.add_argument("--until-hour", help="load only records before this hour, YYYY-MM-DDTHH (UTC)")
    run.add_argument("--master", help="Spark master (default: [load] spark_master)")
    run.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting (repeatable)"
    )
    run.add_argument("--print-command", action="store_true", help="print the spark-submit command and exit")
    run.set_defaults(handler=_run)

    status = sub.add_parser("status", help="committed offsets, log ends, lag and the last run")
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.set_defaults(handler=_status)

    package = sub.add_parser("package", help="build the --py-files zip of Lumber's code for spark-submit")
    package.add_argument("--output", type=Path, required=True, help="where to write the zip")
    package.set_defaults(handler=_package)


def _etl_dir(config: LumberConfig) -> Path:
    return Path(config.dev.state_dir) / "etl"


def _package(args: argparse.Namespace, _config: LumberConfig) -> int:
    path = build_code_zip(args.output)
    print(path)
    return 0


def _run(args: argparse.Namespace, config: LumberConfig) -> int:
    load = config.load
    state = _etl_dir(config)
    code_zip = build_code_zip(state / "lumber-code.zip")
    config_path = state / f"{load.job}.toml"
    config_path.write_text(
        f"# effective config of `lumber etl run` (from {config.source})\n" + dump_config(config)
    )
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else []
    argv = spark_submit_command(
        load,
        config_path=config_path.resolve(),
        code_zip=code_zip.resolve(),
        master=args.master,
        extra_conf=args.conf,
        topics=topics,
        until_hour=args.until_hour,
    )
    if args.print_command:
        print(" ".join(argv))
        return 0
    stamp = dt.datetime.now(tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    log_path = state / "logs" / f"{load.job}-{stamp}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"lumber etl run: job {load.job!r} on {args.master or load.spark_master}; Spark's log: {log_path}")
    started = time.monotonic()
    result: dict[str, Any] | None = None
    with log_path.open("w", encoding="utf-8") as log_file:
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=log_file, env=submit_environment(load), text=True, bufsize=1
        )
        if process.stdout is None:
            raise LoadError("spark-submit started without a stdout pipe")
        for line in process.stdout:
            if line.startswith(PROGRESS_PREFIX):
                print(
                    f"[{time.monotonic() - started:7.1f}s] {line[len(PROGRESS_PREFIX) :].rstrip()}",
                    flush=True,
                )
            elif line.startswith(RESULT_PREFIX):
                result = json.loads(line[len(RESULT_PREFIX) :])
            else:
                log_file.write(line)
        code = process.wait()
    if code != 0:
        print(f"lumber etl run: spark-submit exited with {code}; the end of {log_path}:", file=sys.stderr)
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line for line in lines if line.startswith("jobs/load.py:")]
        for line in (errors or lines[-_TAIL_LINES:])[-_TAIL_LINES:]:
            print(f"  {line}", file=sys.stderr)
        return code
    if result is not None:
        record = RunRecord.from_json(result)
        print(
            f"lumber etl run: {record.outcome} in {time.monotonic() - started:.1f} s: run {record.run_id}, "
            f"{record.rows} rows, {record.quarantined} quarantined, {record.lost} lost"
            + (f", manifest {record.sequence}" if record.sequence is not None else "")
        )
    return 0


def _status(args: argparse.Namespace, config: LumberConfig) -> int:
    load = config.load
    with launched_filesystem(load.warehouse_url) as fs:
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
