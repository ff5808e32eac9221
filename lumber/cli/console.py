"""``lumber console``: the web console (:mod:`lumber.console`) on ``[console] host:port``.

    lumber console                              http://127.0.0.1:8090/
    lumber console --port 9000 --host 0.0.0.0   (it has no login: bind beyond 127.0.0.1 knowingly)

It reads ZooKeeper (``[zookeeper] connect``), the brokers registered there (or ``[consumer]
bootstrap_servers``), the registry (``[registry] url``) and the load job's
warehouse (``[load] warehouse_url``, ``[load] job``) on every request; it keeps nothing. Stops on Ctrl-C /
SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.verbosity import serves

if TYPE_CHECKING:
    from lumber.config import LumberConfig


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "console", help="the web console: cluster, topics, groups, schemas, loads, audit"
    )
    parser.add_argument("--host", help="address to listen on (default: [console] host, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default: [console] port, 8090)")
    add_cluster_options(parser)
    parser.set_defaults(handler=_serve)
    serves(parser)


def _serve(args: argparse.Namespace, config: LumberConfig) -> int:
    import uvicorn

    from lumber.console.app import create_app

    console = config.console.replace(
        host=args.host or config.console.host, port=args.port or config.console.port
    )
    config = config.replace(console=console)
    if not args.debug:  # each page opens ZooKeeper, broker and registry connections: INFO is noise here
        for name in ("kazoo", "httpx", "broker.client"):
            logging.getLogger(name).setLevel(logging.WARNING)
    print(f"lumber console: http://{console.host}:{console.port}/", flush=True)
    uvicorn.run(create_app(config), host=console.host, port=console.port, log_level="warning")
    return 0
