"""Running the registry: connect to ZooKeeper, prepare the store, serve the HTTP API with uvicorn.

``lumber schemas serve`` calls :func:`serve`, which blocks until SIGTERM or SIGINT (uvicorn's handlers), then
stops serving and closes the ZooKeeper session. With ``[registry] ssl_certfile`` it serves HTTPS; with
``auth_users_file`` every request authenticates (:mod:`schemas.registry.basic_auth`). Several servers may
share one ZooKeeper store (same connect string and ``zookeeper_path``): they are all equal, and the store's
compare-and-set settles their races.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.zookeeper_auth import new_zookeeper_client
from schemas.errors import StoreError
from schemas.registry.app import create_app
from schemas.registry.basic_auth import BasicAuthMiddleware, read_users
from schemas.registry.config import RegistryConfig
from schemas.registry.registry_metrics import CountingSchemaStore, RegistryMetrics, instrument
from schemas.registry.schema_registry import SchemaRegistry
from schemas.registry.schema_store import SchemaStore

log = logging.getLogger(__name__)


@contextmanager
def connected_registry(
    config: RegistryConfig,
    zookeeper_connect: str,
    session_timeout_ms: int = 10_000,
    connect_timeout_ms: int = 15_000,
    metrics: RegistryMetrics | None = None,
) -> Iterator[SchemaRegistry]:
    """A :class:`SchemaRegistry` on a started kazoo client (closed on exit), its store layout in place."""
    client = new_zookeeper_client(hosts=zookeeper_connect, timeout=session_timeout_ms / 1000)
    try:
        client.start(timeout=connect_timeout_ms / 1000)
    except KazooTimeoutError as exc:
        client.close()
        raise StoreError(
            f"cannot connect to ZooKeeper at {zookeeper_connect} within {connect_timeout_ms} ms "
            "(is it running? see [zookeeper] connect)"
        ) from exc
    try:
        store = (
            SchemaStore(client, config.zookeeper_path)
            if metrics is None
            else CountingSchemaStore(client, config.zookeeper_path, metrics)
        )
        store.ensure_layout()
        yield SchemaRegistry(store, config)
    finally:
        client.stop()
        client.close()


class _Server(uvicorn.Server):
    """uvicorn's server, but a SIGTERM / SIGINT ends :meth:`run` normally instead of being re-raised after the
    graceful shutdown, so that :func:`serve` closes its ZooKeeper session and the process exits with 0."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve(
    config: RegistryConfig,
    zookeeper_connect: str,
    session_timeout_ms: int = 10_000,
    connect_timeout_ms: int = 15_000,
) -> None:
    """Serve the registry on ``config.host:config.port`` until SIGTERM / SIGINT."""
    metrics = RegistryMetrics()
    with connected_registry(
        config, zookeeper_connect, session_timeout_ms, connect_timeout_ms, metrics
    ) as registry:
        app = create_app(registry)
        instrument(app, metrics)  # GET /metrics (schemas/registry/registry_metrics.py)
        served: Any = app
        if config.auth_users_file:
            users = read_users(Path(config.auth_users_file))
            served = BasicAuthMiddleware(app, users)
            log.info(
                "schema registry: HTTP Basic authentication, %d user(s) of %s",
                len(users),
                config.auth_users_file,
            )
        scheme = "https" if config.ssl_certfile else "http"
        log.info(
            "schema registry on %s://%s:%d, store %s%s",
            scheme,
            config.host,
            config.port,
            zookeeper_connect,
            config.zookeeper_path,
        )
        tls: dict[str, Any] = {}
        if config.ssl_certfile:
            tls = {"ssl_certfile": config.ssl_certfile, "ssl_keyfile": config.ssl_keyfile or None}
        server = _Server(
            uvicorn.Config(
                served,
                host=config.host,
                port=config.port,
                log_level="info",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=5,
                **tls,
            )
        )
        server.run()  # a port already in use ends the process with uvicorn's message and exit code 1
    log.info("schema registry on http://%s:%d stopped", config.host, config.port)
