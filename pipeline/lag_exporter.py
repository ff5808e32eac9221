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
is ``prometheus_client``'s WSGI application behind a small dispatcher, served by
:class:`~broker.web.wsgi_server.WsgiServer` from a daemon thread: with ``[lag_exporter] users_file`` every
request needs a user of that file (either role: both paths only read), with ``ssl_certfile`` it is HTTPS,
and bound beyond 127.0.0.1 without users it refuses to start unless ``[lag_exporter]
allow_unauthenticated = true`` (:mod:`broker.web.web_security`). The collector is read by the server's
threads as its docstring allows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app

from broker.web.web_security import WebSecurity
from broker.web.wsgi_server import WsgiServer
from pipeline.lag_metrics import LagCollector

HISTORY_PATH = "/lag-history"

StartResponse = Callable[..., Any]


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


def start_lag_exporter(collector: LagCollector, port: int, security: WebSecurity | None = None) -> WsgiServer:
    """Serve ``collector`` on ``port`` from a daemon thread (127.0.0.1 without authentication unless
    ``security`` says otherwise: check it first, :meth:`WebSecurity.check`); ``stop()`` the server."""
    security = security or WebSecurity("the lag exporter", "lag_exporter", "127.0.0.1")
    return WsgiServer(exporter_app(collector), port, security, "lag-exporter")
