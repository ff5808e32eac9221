"""The lag exporter's HTTP server (``lumber groups lag --watch --metrics-port N``): metrics and lag history.

========================================= ============================================================
``GET /metrics``                          the :class:`~pipeline.lag_metrics.LagCollector`'s metrics, in
                                          Prometheus' text format (any other path but the one below too,
                                          as ``prometheus_client``'s own server answers)
``GET /lag-history[?group=G][&kind=K]``   the watched groups' windows of samples as JSON
                                          (:meth:`~pipeline.lag_metrics.LagCollector.history`):
                                          ``{"groups": [...]}``; 404 when a named group is not watched
========================================= ============================================================

``/lag-history`` is where the console's group page (``[console] lag_exporter_url``) finds the lag history
of ZooKeeper groups: ZooKeeper keeps only each partition's last commit, and the console keeps nothing, so
the exporter's window (``--window`` observations every ``--interval``) is the history there is. The server
is ``prometheus_client``'s WSGI application behind a small dispatcher, on a threading WSGI server in a
daemon thread (``prometheus_client.start_http_server``'s shape); the collector is read by its threads as its
docstring allows.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from pipeline.lag_metrics import LagCollector

HISTORY_PATH = "/lag-history"

StartResponse = Callable[..., Any]


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request (the watcher prints its observations there)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def exporter_app(collector: LagCollector) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI application: ``/lag-history`` as JSON, everything else the metrics of ``collector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HISTORY_PATH:
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        query = parse_qs(environ.get("QUERY_STRING", ""))
        group = query.get("group", [None])[0]
        kind = query.get("kind", [None])[0]
        groups = collector.history(group, kind)
        status = "200 OK"
        body: dict[str, Any] = {"groups": groups}
        if group is not None and not groups:
            status = "404 Not Found"
            what = f"group {group!r}" + (f" of kind {kind!r}" if kind else "")
            body = {"groups": [], "error": f"{what} is not watched by this lag exporter"}
        data = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    return app


def start_lag_exporter(collector: LagCollector, port: int, host: str = "127.0.0.1") -> WSGIServer:
    """Serve ``collector`` on ``host:port`` from a daemon thread; ``shutdown()`` the server to stop it."""
    server = make_server(
        host, port, exporter_app(collector), ThreadingWSGIServer, handler_class=_QuietHandler
    )
    threading.Thread(target=server.serve_forever, name="lag-exporter", daemon=True).start()
    return server
