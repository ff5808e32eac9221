"""``lumber audit verify``: reconcile the producers' counts with the loads', per topic and window.

Reads every event of the audit topic (``[audit] topic``) up to its current end, deduplicates by event id and
reconciles them (:mod:`audit.audit_report` explains every column and status)::

    lumber audit verify --topic page_view --since 2026-11-22T00 --until 2026-11-23T00 [--grace 1h]
        [--tolerance 0 | --tolerance 0.1%] [--job hourly | --all-jobs] [--json] [--html report.html]

Times are UTC: ``YYYY-MM-DD``, ``YYYY-MM-DDTHH``, ``YYYY-MM-DDTHH:MM[:SS]`` (a trailing ``Z`` or ``+00:00``
is allowed), ms since the epoch, ``now``, or relative to now: ``-6h``, ``-2d``, ``-30m``. Windows that start
in ``[since, until)`` are reported; the defaults are the last 24 whole hours up to now. The windows are
``--window`` wide, else ``[audit] report_window_ms``, else the loads' interval (``[schedule] every_ms``, an
hour by default) when the events' windows divide it, else the widest event window; the header says which.
Durations: ``90s``, ``30m``, ``1h``, ``2h30m``, ``1d``, ``0``. ``--now`` evaluates the grace period as of
another moment (a reproducible report). The cluster is ``--bootstrap-server``, else ``[consumer]
bootstrap_servers``, else ``[load] bootstrap_servers``, else ZooKeeper; the registry is ``[load]
registry_url``, else ``[registry] url``.

Output: the table (default), ``--json`` instead, and ``--html FILE`` in addition (a page with a chart per
topic). Exit codes (:mod:`lumber.cli`'s table): 0 when no window is INCOMPLETE, 1 when one is (missing or
duplicate beyond the tolerance after the grace period) or the audit topic cannot be read, 2 for bad
arguments, among them a ``--topic`` that is neither in the cluster nor named by any audit event.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.audit_codec import AuditEventCodec
from audit.audit_reader import read_audit_events
from audit.audit_report import reconcile
from audit.audit_text import render_text
from audit.audit_tolerance import Tolerance
from audit.errors import AuditError
from lumber.cli.cluster_options import CommaList, add_cluster_options
from pipeline.durations import DURATION_HELP, DurationError, parse_duration_ms

if TYPE_CHECKING:
    from lumber.config import LumberConfig

FAILED_EXIT_CODE = 1
UNKNOWN_TOPIC_EXIT_CODE = 2
HOUR_MS = 3_600_000
_RELATIVE = re.compile(r"-((?:[0-9]+(?:ms|s|m|h|d))+)")
_LAYOUTS = ("%Y-%m-%d", "%Y-%m-%dT%H", "%Y-%m-%d %H", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M")


def parse_time_ms(text: str, now_ms: int, what: str = "time") -> int:
    """A UTC moment (see the module docstring for the forms) as ms since the epoch."""
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    relative = _RELATIVE.fullmatch(value.lower())
    if relative:
        return now_ms - parse_duration_ms(relative.group(1), what)
    if value.isdigit() and len(value) >= 10:
        return int(value)
    bare = value.removesuffix("Z").removesuffix("z").removesuffix("+00:00")
    for layout in _LAYOUTS:
        try:
            return int(dt.datetime.strptime(bare, layout).replace(tzinfo=dt.UTC).timestamp()) * 1000
        except ValueError:
            continue
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is not None:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)
    raise AuditError(
        f"{what} {text!r}: expected a UTC time (2026-11-22, 2026-11-22T10, 2026-11-22T10:30), ms since the "
        "epoch, 'now' or a time relative to now (-6h)"
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("audit", help="reconcile producer counts with load counts (the audit)")
    sub = parser.add_subparsers(metavar="ACTION", required=True)
    verify = sub.add_parser(
        "verify",
        help="per topic and window: expected, loaded, missing, duplicate, late, malformed, status",
        description="Reconcile the producers' audit counts with the load's, per topic and window: "
        "expected, loaded, missing, duplicate, late, malformed and a status (COMPLETE, INCOMPLETE, OPEN). "
        "Exit code 1 when a window is INCOMPLETE.",
    )
    verify.add_argument(
        "--topics",
        "--topic",
        dest="topic",
        action=CommaList,
        default=[],
        metavar="TOPIC[,TOPIC...]",
        help="topics to audit, comma-separated or repeated (default: every topic seen)",
    )
    verify.add_argument("--since", help="first window start, UTC (default: 24 whole hours before --until)")
    verify.add_argument("--until", help="end of the range, UTC, exclusive (default: now)")
    verify.add_argument(
        "--grace",
        help=f"how long after its end a window stays OPEN, {DURATION_HELP} (default: [audit] grace_ms)",
    )
    verify.add_argument(
        "--tolerance", help="messages a window may miss or duplicate: N or P%% (default: [audit] tolerance)"
    )
    jobs = verify.add_mutually_exclusive_group()
    jobs.add_argument("--job", help="count the load tier of this job only (default: [load] job)")
    jobs.add_argument("--all-jobs", action="store_true", help="count the load tier of every job")
    verify.add_argument(
        "--window",
        help=f"report window width, {DURATION_HELP} (default: [audit] report_window_ms, else the loads' "
        "interval, [schedule] every_ms)",
    )
    verify.add_argument("--now", help="evaluate the grace period as of this time (default: now)")
    verify.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    verify.add_argument("--html", type=Path, metavar="FILE", help="also write the report as an HTML page")
    add_cluster_options(verify)
    verify.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace, config: LumberConfig) -> int:
    try:
        settings = _settings(args, config)
    except (AuditError, DurationError) as exc:
        print(f"lumber: error: {exc}", file=sys.stderr)
        return 2
    return _run_verify(args, config, settings)


@dataclass(frozen=True)
class _Settings:
    now_ms: int
    since_ms: int
    until_ms: int
    grace_ms: int
    tolerance: Tolerance
    window_ms: int
    job: str | None


def _settings(args: argparse.Namespace, config: LumberConfig) -> _Settings:
    audit = config.audit
    wall_ms = time.time_ns() // 1_000_000
    now_ms = parse_time_ms(args.now, wall_ms, "--now") if args.now else wall_ms
    until_ms = parse_time_ms(args.until, now_ms, "--until") if args.until else now_ms
    if args.since:
        since_ms = parse_time_ms(args.since, now_ms, "--since")
    else:
        since_ms = until_ms - 24 * HOUR_MS
        since_ms -= since_ms % HOUR_MS
    grace_ms = parse_duration_ms(args.grace, "--grace") if args.grace else audit.grace_ms
    try:
        tolerance = Tolerance.parse(
            args.tolerance if args.tolerance is not None else audit.tolerance, "--tolerance"
        )
    except ValueError as exc:
        raise AuditError(str(exc)) from exc
    window_ms = parse_duration_ms(args.window, "--window") if args.window else audit.report_window_ms
    if until_ms <= since_ms:
        raise AuditError(f"--until must be after --since (the range {since_ms}..{until_ms} ms is empty)")
    job = None if args.all_jobs else (args.job or config.load.job)
    return _Settings(now_ms, since_ms, until_ms, grace_ms, tolerance, window_ms, job)


def _run_verify(args: argparse.Namespace, config: LumberConfig, settings: _Settings) -> int:
    audit = config.audit
    consumer = config.consumer
    servers = args.bootstrap_server or consumer.bootstrap_servers or config.load.bootstrap_servers
    consumer = consumer.replace(bootstrap_servers=list(servers))
    codec = AuditEventCodec.from_config(config.registry, audit.topic, url=config.load.registry_url or None)
    try:
        read = read_audit_events(
            consumer, codec, topic=audit.topic, zookeeper_connect=config.zookeeper.connect
        )
    finally:
        codec.close()
    unknown = _unknown_topics(args, config, args.topic or [], {event.topic for event in read.events})
    if unknown:
        print(f"lumber: error: {unknown}", file=sys.stderr)
        return UNKNOWN_TOPIC_EXIT_CODE
    report = reconcile(
        read.events,
        since_ms=settings.since_ms,
        until_ms=settings.until_ms,
        now_ms=settings.now_ms,
        grace_ms=settings.grace_ms,
        tolerance=settings.tolerance,
        topics=args.topic,
        job=settings.job,
        window_ms=settings.window_ms,
        preferred_window_ms=config.schedule.every_ms,
        unreadable=read.unreadable,
    )
    source = _window_source(args, config, report.window_ms)
    if args.json:
        print(json.dumps({**report.to_json(), "window_source": source}, indent=2))
    else:
        print(render_text(report, source), end="")
    if args.html is not None:
        from audit.audit_html import render_html

        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(render_html(report), encoding="utf-8")
        if not args.json:
            print(f"wrote {args.html}")
    return 0 if report.ok else FAILED_EXIT_CODE


def _unknown_topics(
    args: argparse.Namespace, config: LumberConfig, named: list[str], audited: set[str]
) -> str:
    """Why ``--topic`` names a topic there is nothing to verify of (none in the audit, none in the cluster),
    or "" when every named topic is audited or exists."""
    missing = [topic for topic in named if topic not in audited]
    if not missing:
        return ""
    from broker.cluster.topic_admin import TopicAdmin
    from lumber.cli.zookeeper_session import zookeeper_session

    with zookeeper_session(args, config) as zk:
        existing = set(TopicAdmin(zk).list_topics())
    unknown = [topic for topic in missing if topic not in existing]
    if not unknown:
        return ""
    seen = ", ".join(sorted(audited)) or "none"
    return (
        f"--topic {','.join(unknown)}: no such topic in the cluster ({config.zookeeper.connect}) and no "
        f"audit events name it (topics with audit events: {seen})"
    )


def _window_source(args: argparse.Namespace, config: LumberConfig, window_ms: int) -> str:
    """Where the report's window width came from, for its header."""
    if args.window:
        return "--window"
    if config.audit.report_window_ms:
        return "[audit] report_window_ms"
    if window_ms == config.schedule.every_ms:
        return "the loads' interval, [schedule] every_ms; --window to change"
    return "the widest window the events count in; --window to change"
