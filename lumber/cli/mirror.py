"""``lumber mirror``: copy topics of a source cluster into a target cluster (paper section 4), until stopped.

::

    lumber mirror --source-zookeeper 127.0.0.1:2181/live --target-zookeeper 127.0.0.1:2181/offline \\
        --topics-regex 'page_view|click' [--group lumber-mirror] [--streams 2] [--registry-url URL] \\
        [--topic-refresh 10s]

The mirror's settings are the ``[mirror]`` section of ``lumber.toml`` (``topics``, ``group``, ``streams``,
the windows of sends in flight, ``audit_interval_ms``, ``topic_refresh_ms``...; ``lumber config defaults``
lists them); the flags override its keys. ``topics`` is required, in the section or as ``--topics``.

Runs in the foreground until SIGINT or SIGTERM, then waits for the sends in flight, commits what the
target acknowledged, publishes the last audit counts and leaves the group (:class:`mirror.mirror.Mirror`).
Start several with the same ``--group`` to share the partitions. Consumer, group and producer settings
come from ``[consumer]``, ``[group]`` and ``[producer]`` (their cluster addresses are ignored: the
ZooKeepers name the clusters). The mirror tier's audit goes to ``_audit`` on the target every
``--audit-interval-ms`` through the registry at ``--registry-url`` (default ``[registry] url``);
``--audit-interval-ms 0`` turns it off. A new partition starts at its log start (``[consumer]
auto_offset_reset`` is ignored). Topics created on the source later are found every
``--topic-refresh-ms`` (0: only at the start). Exit code 1 if a stream failed.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import RenamedOption
from lumber.cli.verbosity import serves
from mirror.mirror import Mirror
from mirror.mirror_errors import MirrorConfigError
from pipeline.durations import DURATION_HELP, DurationAction

if TYPE_CHECKING:
    from lumber.config import LumberConfig

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("mirror", help="copy topics of one cluster into another (at least once)")
    parser.add_argument(
        "--source-zookeeper",
        required=True,
        metavar="CONNECT",
        help="the source cluster's ZooKeeper (with chroot)",
    )
    parser.add_argument(
        "--target-zookeeper",
        required=True,
        metavar="CONNECT",
        help="the target cluster's ZooKeeper (with chroot)",
    )
    parser.add_argument(
        "--topics-regex",
        "--topics",
        dest="topics",
        metavar="REGEX",
        action=RenamedOption,
        renamed_from="--topics",
        help="source topics whose whole name matches this regular expression (default: [mirror] topics; "
        "--topics, the old spelling, still works with a warning: elsewhere --topics lists topic names)",
    )
    parser.add_argument("--group", help="consumer group on the source (default: [mirror] group)")
    parser.add_argument(
        "--streams", type=int, metavar="N", help="streams (threads) per topic (default: [mirror] streams)"
    )
    parser.add_argument(
        "--registry-url", help="schema registry for the audit events (default: [registry] url)"
    )
    parser.add_argument(
        "--audit-interval",
        "--audit-interval-ms",
        dest="audit_interval_ms",
        action=DurationAction,
        metavar="DURATION",
        help=f"publish the mirror tier's counts this often, {DURATION_HELP} (--audit-interval-ms: an integer "
        "of ms; default: [mirror] audit_interval_ms; 0: no audit)",
    )
    parser.add_argument(
        "--topic-refresh",
        "--topic-refresh-ms",
        dest="topic_refresh_ms",
        action=DurationAction,
        metavar="DURATION",
        help=f"look for new matching source topics this often, {DURATION_HELP} (--topic-refresh-ms: an "
        "integer of ms; default: [mirror] topic_refresh_ms; 0: only at the start)",
    )
    parser.set_defaults(handler=_mirror)
    serves(parser)


def _mirror(args: argparse.Namespace, config: LumberConfig) -> int:
    flags = {
        "topics": args.topics,
        "group": args.group,
        "streams": args.streams,
        "audit_interval_ms": args.audit_interval_ms,
        "topic_refresh_ms": args.topic_refresh_ms,
    }
    try:
        settings = config.mirror.replace(
            **{key: value for key, value in flags.items() if value is not None},
            audit_window_ms=config.audit.window_ms,
            audit_topic=config.audit.topic,
            audit_registry_url=args.registry_url or config.registry.url,
        )
    except MirrorConfigError as exc:
        print(f"lumber mirror: {exc}", file=sys.stderr)
        return 2
    if not settings.topics:
        print(
            "lumber mirror: no topics to mirror: give --topics-regex REGEX or set [mirror] topics",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("mirror: %s received, stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    mirror = Mirror(
        settings,
        source_zookeeper=args.source_zookeeper,
        target_zookeeper=args.target_zookeeper,
        consumer_config=config.consumer.replace(auto_offset_reset="earliest"),
        group_config=config.group,
        producer_config=config.producer,
        registry=config.registry,
    )
    try:
        topics = mirror.start()
        print(
            f"lumber: mirroring {', '.join(sorted(topics))} from {args.source_zookeeper} to "
            f"{args.target_zookeeper} (group {settings.group})",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.2) and not mirror.wait(0):
            pass
    finally:
        mirror.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failure = mirror.failure
    print(f"lumber: mirror stopped after copying {mirror.copied} records", file=sys.stderr)
    if failure is not None:
        print(f"lumber: error: a mirror stream failed: {failure}", file=sys.stderr)
        return 1
    return 0
