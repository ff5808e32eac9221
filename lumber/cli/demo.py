"""``lumber demo``: the whole system end to end on this machine (what ``make demo`` runs).

See :mod:`lumber.demo` for the steps. Exit code 0 when every step worked and the loaded counts match
what was produced, 1 otherwise; the stack keeps running either way (``lumber dev down --state-dir DIR``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumber.cli.invocation import INVOKED_AS_ENV, invoked_as

if TYPE_CHECKING:
    from lumber.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="start a local stack and run the hourly pipeline end to end (make demo)",
        description="Start ZooKeeper, brokers and the registry, produce hours of tracking traffic, load "
        "each hour with spark-submit, audit, and query the Parquet output. Ports come from [dev] of the "
        "config (e.g. LUMBER_DEV__ZOOKEEPER_PORT=2182).",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(".lumber-demo"),
        help="the demo's folder (default: .lumber-demo)",
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers to start (default: 3)")
    parser.add_argument("--hours", type=int, default=3, help="hours of traffic before now (default: 3)")
    parser.add_argument("--master", default="local[2]", help="Spark master of the loads (default: local[2])")
    parser.add_argument(
        "--warehouse",
        default="hdfs",
        help="'hdfs' (default): the stack's own HDFS, started with it; or a URL such as file:.lumber-demo/w "
        "(local disk, no HDFS: the light run)",
    )
    parser.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace, config: LumberConfig) -> int:
    if not 1 <= args.brokers <= 16 or not 1 <= args.hours <= 24:
        print("lumber demo: --brokers must be 1-16 and --hours 1-24", file=sys.stderr)
        return 2
    # imported here: the demo imports HDFS's client (pyarrow), which no parser may load
    from lumber.demo import DemoOptions, run_demo

    options = DemoOptions(
        state_dir=args.state_dir,
        brokers=args.brokers,
        hours=args.hours,
        spark_master=args.master,
        warehouse=args.warehouse,
        lumber=invoked_as(),
        child_env={INVOKED_AS_ENV: invoked_as()},
    )
    return run_demo(options, config)
