"""``lumber broker start``: run one broker in the foreground until Ctrl-C or SIGTERM.

The broker is configured by ``[broker]`` (id, listener, threads, topic defaults), ``[log]`` (storage) and
``[zookeeper]`` of ``lumber.toml``; the options override single keys. It logs INFO to stderr (``--log-level``
changes that; see :mod:`lumber.cli.verbosity`); it is ready once
it logs "is up" (and ``/brokers/ids/<id>`` exists in ZooKeeper). Exit codes: 0 after a clean shutdown,
1 when it cannot start (the message names why: ZooKeeper unreachable, id taken, log dir locked, port taken,
damage found by ``--verify-logs``, which walks every partition's files first as ``lumber log verify`` does).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.verbosity import serves

if TYPE_CHECKING:
    from lumber.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("broker", help="run a broker")
    sub = parser.add_subparsers(metavar="ACTION", required=True)
    start = sub.add_parser("start", help="run a broker in the foreground (Ctrl-C or SIGTERM stops it)")
    start.add_argument("--id", type=int, dest="broker_id", help="broker id (default: [broker] broker_id)")
    start.add_argument("--host", help="address to listen on (default: [broker] host)")
    start.add_argument("--port", type=int, help="port to listen on (default: [broker] port; 0: any free)")
    start.add_argument(
        "--listeners",
        metavar="NAME://HOST:PORT[,...]",
        help="the listeners, comma-separated (default: [broker] listeners); several brokers started from "
        "one lumber.toml each get their own (lumber dev up --secure)",
    )
    start.add_argument(
        "--metrics-port",
        type=int,
        help="port of the broker's Prometheus metrics (default: [broker] metrics_port; 0: none)",
    )
    start.add_argument(
        "--log-dir", action="append", dest="log_dirs", help="a log dir (repeatable; default: [log] log_dirs)"
    )
    add_cluster_options(start, bootstrap=False)
    start.add_argument(
        "--verify-logs",
        action="store_true",
        help="walk every partition's files first (as `lumber log verify` does); refuse to start on damage",
    )
    start.set_defaults(handler=_start)
    serves(start)


def _start(args: argparse.Namespace, config: LumberConfig) -> int:
    from broker.server.broker_server import BrokerServer, ZooKeeperSettings

    overrides = {
        key: value
        for key, value in (
            ("broker_id", args.broker_id),
            ("host", args.host),
            ("port", args.port),
            ("metrics_port", args.metrics_port),
        )
        if value is not None
    }
    if args.listeners:
        overrides["listeners"] = [text.strip() for text in args.listeners.split(",") if text.strip()]
    broker_config = config.broker.replace(**overrides)
    log_config = config.log.replace(log_dirs=args.log_dirs) if args.log_dirs else config.log
    zookeeper = ZooKeeperSettings(
        connect=args.zookeeper_connect or config.zookeeper.connect,
        session_timeout_ms=config.zookeeper.session_timeout_ms,
        connect_timeout_ms=config.zookeeper.connect_timeout_ms,
        auth=config.zookeeper.auth(),
    )
    if args.verify_logs and not _verify_logs(broker_config.broker_id, [Path(d) for d in log_config.log_dirs]):
        return 1
    server = BrokerServer(broker_config, log_config, zookeeper)

    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        # Only a flag: the handler runs on the main thread between two bytecodes, possibly in the middle of
        # start() holding a lock that shutdown() needs (a SIGTERM just after registration deadlocked so)
        logging.getLogger(__name__).info("signal %d: shutting down", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.start()
        if not stopping.is_set():
            print(
                f"broker {broker_config.broker_id} is up on "
                f"{', '.join(str(e) for e in server.advertised_endpoints)} "
                f"(cluster {server.cluster_id}, zookeeper {zookeeper.connect})",
                file=sys.stderr,
                flush=True,
            )
        while not stopping.wait(0.5) and not server.wait(0):
            pass
    finally:
        server.shutdown()
    return 0


def _verify_logs(broker_id: int, log_dirs: list[Path]) -> bool:
    """``--verify-logs``: walk every partition in ``log_dirs``; False (and why, on stderr) on damage."""
    from lumber.cli.log import describe, verify_log_dirs

    reports = verify_log_dirs(log_dirs)
    damaged = [report for report in reports if not report.ok]
    for report in damaged:
        print("\n".join(describe(report)), file=sys.stderr)
    if damaged:
        print(
            f"lumber: broker {broker_id} refuses to start: --verify-logs found damage in "
            f"{len(damaged)} of {len(reports)} partition(s) (listed above). Restore those files, or move "
            "the damaged segments away and start without --verify-logs to let recovery truncate them.",
            file=sys.stderr,
        )
        return False
    records = sum(report.records for report in reports)
    print(
        f"broker {broker_id}: --verify-logs checked {len(reports)} partition(s), {records} record(s): "
        "no damage",
        file=sys.stderr,
        flush=True,
    )
    return True
