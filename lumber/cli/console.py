"""``lumber console``: the web console (:mod:`lumber.console`) on ``[console] host:port``.

    lumber console                              http://127.0.0.1:8090/
    lumber console --port 9000 --host 0.0.0.0   needs [console] users_file (or allow_unauthenticated = true)

Security (docs/security.md, "Console and metrics"): with ``[console] users_file`` every page needs a user of
that file (HTTP Basic; role ``read`` sees, ``admin`` also resets offsets), with ``ssl_certfile`` and
``ssl_keyfile`` it serves HTTPS. Bound beyond 127.0.0.1 without users it refuses to start (exit 2, one line
naming ``[console] allow_unauthenticated``), and with ``allow_unauthenticated = true`` it starts and warns.

It reads ZooKeeper (``[zookeeper] connect``), the brokers registered there (or ``[consumer]
bootstrap_servers``), the registry (``[registry] url``) and the load job's
warehouse (``[load] warehouse_url``, ``[load] job``) on every request; it keeps nothing. Stops on Ctrl-C /
SIGTERM.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import ssl
import sys
from typing import TYPE_CHECKING, Any

from broker.web.errors import WebSecurityError
from lumber.cli.cluster_options import add_cluster_options
from lumber.cli.verbosity import serves

if TYPE_CHECKING:
    from lumber.config import LumberConfig

logger = logging.getLogger(__name__)
BAD_INPUT_EXIT_CODE = 2


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
    security = console.security()
    if args.host:
        security = dataclasses.replace(security, host_key="--host")
    try:
        warnings = security.check()
        security.ssl_context()  # a certificate or key that cannot be loaded, named before uvicorn starts
        app = create_app(config)  # reads the users file
    except WebSecurityError as exc:
        print(f"lumber: error: {exc}", file=sys.stderr)
        return BAD_INPUT_EXIT_CODE
    for warning in warnings:
        logger.warning("%s", warning)
    if not args.debug:  # each page opens ZooKeeper, broker and registry connections: INFO is noise here
        for name in ("kazoo", "httpx", "broker.client"):
            logging.getLogger(name).setLevel(logging.WARNING)
    print(f"lumber console: {security.scheme}://{console.host}:{console.port}/", flush=True)
    server = uvicorn.Config(
        app,
        host=console.host,
        port=console.port,
        log_level="warning",
        ssl_certfile=console.ssl_certfile or None,
        ssl_keyfile=console.ssl_keyfile or None,
    )
    server.load()  # builds uvicorn's TLS context, raised here to TLS 1.2 as the other HTTP servers'
    if server.ssl is not None:
        server.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    uvicorn.Server(server).run()
    return 0
