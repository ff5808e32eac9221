"""``lumber etl completeness`` and ``lumber etl wait``: which hours are done, and a sensor for one hour.

``completeness [--topic T] [--since H] [--json]`` decides, without writing anything, every hour of the
job's topics since ``H`` (default: the last ``[completeness] lookback_ms``), exactly as the load's pass does
(:meth:`pipeline.completeness_publisher.CompletenessPublisher.decide`: the audit topic read and reconciled,
the markers read): each hour's state (complete, open, late, incomplete), its counts, its marker, and for a
short hour which host is missing how many records. A marker on disk that is not the job's is listed as an
error. Exit codes: 0, 2 for a bad argument (an hour in the future, a topic the job does not load) or a
cluster that cannot be read.

``wait --topic T --hour H [--timeout 10m] [--interval 5s] [--json]`` is the sensor any scheduler can call: it
exits 0 as soon as the hour's ``_SUCCESS`` of this job is there (it reads only the marker, every interval),
1 when the timeout passes first, 2 for a bad argument: an hour that has not begun, a topic the cluster
does not have, a ``_SUCCESS`` that is not Lumber's, a warehouse that cannot be read (a NameNode that does
not answer: the error names the marker's URL). With ``--json`` it prints the marker's JSON on success (what
the Airflow example DAG attaches to the hour's asset event). Both commands open the warehouse as the load
does: ``[load] warehouse_url`` through ``[load] hdfs_client`` (hdfs-native, WebHDFS) for ``hdfs://``.

Heavy imports (the pipeline, the clients) are inside the handlers: ``lumber --help`` does not pay for them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from lumber.config import LumberConfig

_DURATION_HELP = "a duration: 250ms, 90s, 10m, 1h, 2h30m, 1d"


def register_completeness(sub: Any) -> None:
    """Add ``completeness`` and ``wait`` to the ``etl`` subcommands ``sub``."""
    completeness = sub.add_parser(
        "completeness",
        help="each hour's completeness (complete, open, late, incomplete) with counts and missing hosts",
    )
    completeness.add_argument(
        "--topic",
        action="append",
        default=[],
        help="only this topic (repeatable; default: all the job loads)",
    )
    completeness.add_argument(
        "--since", help="first hour, YYYY-MM-DDTHH (UTC; default: [completeness] lookback_ms ago)"
    )
    completeness.add_argument("--json", action="store_true", help="print the hours as JSON")
    completeness.set_defaults(handler=_completeness)

    wait = sub.add_parser(
        "wait",
        help="wait until an hour of a topic is complete (its _SUCCESS marker): exit 0, or 1 on timeout",
    )
    wait.add_argument("--topic", required=True, help="the topic")
    wait.add_argument("--hour", required=True, help="the hour, YYYY-MM-DDTHH (UTC)")
    wait.add_argument("--timeout", default="10m", help=f"give up after this long, {_DURATION_HELP}")
    wait.add_argument("--interval", default="5s", help=f"look this often, {_DURATION_HELP}")
    wait.add_argument(
        "--json", action="store_true", help="print the hour's marker (JSON) when it is complete"
    )
    wait.set_defaults(handler=_wait)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _completeness(args: argparse.Namespace, config: LumberConfig) -> int:
    from pipeline.commit import CommitProtocol
    from pipeline.completeness_marker import parse_hour
    from pipeline.completeness_publisher import CompletenessPublisher
    from pipeline.errors import PipelineError
    from pipeline.fs import open_filesystem

    load = config.load
    try:
        since = parse_hour(args.since) if args.since else None
    except ValueError as exc:
        print(f"lumber etl completeness: --since {exc}", file=sys.stderr)
        return 2
    now = _now_ms()
    try:
        fs = open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
        publisher = CompletenessPublisher(CommitProtocol(fs, load.job), config)
        decisions = publisher.decide(now_ms=now, topics=args.topic, since_ms=since)
    except PipelineError as exc:
        print(f"lumber etl completeness: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    "job": load.job,
                    "now_ms": now,
                    "hours": [h.to_json() for h in decisions.hours],
                    "errors": list(decisions.errors),
                    "notes": list(decisions.notes),
                },
                indent=2,
            )
        )
        return 0
    print(f"job {load.job!r}: completeness of {len(decisions.hours)} hours")
    if decisions.hours:
        print(
            f"  {'topic':<24} {'hour':<14} {'state':<10} {'expected':>8} {'loaded':>8} {'quarant.':>8} "
            f"{'missing':>8} {'marker':<10} notes"
        )
    for h in decisions.hours:
        expected = "-" if h.expected is None else str(h.expected)
        marker = f"rev {h.marked_revision}" if h.marked_revision else "none"
        notes = []
        if h.hosts_missing:
            notes.append("missing from " + ", ".join(f"{host}: {n}" for host, n in h.hosts_missing.items()))
        if h.state != "COMPLETE":
            notes.append(h.reason)
        if h.overdue:
            notes.append("OVERDUE")
        print(
            f"  {h.topic:<24} {h.hour:<14} {h.state.lower():<10} {expected:>8} {h.loaded:>8} "
            f"{h.quarantined:>8} {h.missing:>8} {marker:<10} {'; '.join(notes)}"
        )
    for error in decisions.errors:
        print(f"  error: {error}")
    for note in decisions.notes:
        print(f"  note: {note}")
    return 0


def _wait(args: argparse.Namespace, config: LumberConfig) -> int:
    from pipeline.completeness_marker import (
        HOUR_MS,
        MarkerStore,
        hour_text,
        parse_hour,
    )
    from pipeline.durations import DurationError, parse_duration_ms
    from pipeline.errors import PipelineError
    from pipeline.fs import open_filesystem
    from pipeline.load_plan import ClusterView

    load = config.load
    try:
        hour = parse_hour(args.hour)
        timeout_ms = parse_duration_ms(args.timeout, "--timeout")
        interval_ms = max(parse_duration_ms(args.interval, "--interval"), 100)
    except (ValueError, DurationError) as exc:
        print(f"lumber etl wait: {exc}", file=sys.stderr)
        return 2
    now = _now_ms()
    if hour > now:
        print(
            f"lumber etl wait: hour {hour_text(hour)} has not begun yet (now "
            f"{hour_text(now - now % HOUR_MS)}:MM UTC); wait for an hour that has",
            file=sys.stderr,
        )
        return 2
    try:
        cluster = ClusterView(config.consumer, load.bootstrap_servers, config.zookeeper.connect)
        try:
            known = args.topic in cluster.topics()
        finally:
            cluster.close()
        if not known:
            print(f"lumber etl wait: topic {args.topic!r} does not exist in the cluster", file=sys.stderr)
            return 2
        fs = open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
        store = MarkerStore(fs, fs.root, load.job)
    except PipelineError as exc:
        print(f"lumber etl wait: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a cluster that cannot be asked: a clear line, exit 2
        print(
            f"lumber etl wait: cannot check topic {args.topic!r}: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 2
    deadline = time.monotonic() + timeout_ms / 1000
    url = store.url(args.topic, hour, "_SUCCESS")
    while True:
        try:
            found = store.read(args.topic, hour).success
        except PipelineError as exc:  # a foreign _SUCCESS, a warehouse that cannot be read
            print(f"lumber etl wait: {exc}", file=sys.stderr)
            return 2
        if found is not None and args.json:
            print(found.dumps(indent=None))
            return 0
        if found is not None:
            print(
                f"{found.key} complete (revision {found.revision}, manifest {found.manifest_sequence}): "
                f"{found.loaded} rows, {found.quarantined} quarantined; {url}"
            )
            return 0
        left = deadline - time.monotonic()
        if left <= 0:
            print(
                f"lumber etl wait: {args.topic}/{hour_text(hour)} not complete after {args.timeout} "
                f"({url} is not there)",
                file=sys.stderr,
            )
            return 1
        time.sleep(min(interval_ms / 1000, left))
