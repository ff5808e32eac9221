"""The registry's Prometheus metrics, served at ``GET /metrics`` beside the API.

=============================================================== =============================================
``schema_registry_requests_total{method,endpoint,status}``      answers, by route template (``/subjects/
                                                                {subject}/versions``; ``other`` for paths no
                                                                route matched) and HTTP status
``schema_registry_request_duration_seconds{method,endpoint}``   time to answer (histogram)
``schema_registry_registrations_total``                         new versions stored (a schema already live in
                                                                the subject is not a registration)
``schema_registry_compatibility_refusals_total``                registrations refused as incompatible (409)
=============================================================== =============================================

:func:`instrument` hooks a :class:`RegistryMetrics` into the application built by
:func:`~schemas.registry.app.create_app` (an ASGI middleware that sees every answer, including errors, and
the ``/metrics`` route, kept out of the OpenAPI description); :class:`CountingSchemaStore` is the store
that counts the versions it adds (the one place a version is created). The counters live in the metrics'
own :class:`~prometheus_client.CollectorRegistry`, so several registries in one process (tests) do not
share them. prometheus_client's counters are thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from kazoo.client import KazooClient
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from schemas.registry.schema_store import SchemaStore, SubjectState

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REGISTER_ENDPOINT = "/subjects/{subject}/versions"


class RegistryMetrics:
    """The registry's counters (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "schema_registry_requests",
            "Answers of the registry's HTTP API, by route template and status",
            ["method", "endpoint", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "schema_registry_request_duration_seconds",
            "Time to answer a request of the registry's HTTP API",
            ["method", "endpoint"],
            registry=self.registry,
        )
        self.registrations = Counter(
            "schema_registry_registrations", "New schema versions stored", registry=self.registry
        )
        self.refusals = Counter(
            "schema_registry_compatibility_refusals",
            "Registrations refused as incompatible (HTTP 409)",
            registry=self.registry,
        )

    def observe(self, method: str, endpoint: str, status: int, seconds: float) -> None:
        self.requests.labels(method, endpoint, str(status)).inc()
        self.duration.labels(method, endpoint).observe(seconds)
        if status == 409 and method == "POST" and endpoint == REGISTER_ENDPOINT:
            self.refusals.inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class CountingSchemaStore(SchemaStore):
    """A :class:`SchemaStore` that counts each version it adds in ``metrics.registrations``."""

    def __init__(self, client: KazooClient, root: str, metrics: RegistryMetrics) -> None:
        super().__init__(client, root)
        self.metrics = metrics

    def add_version(
        self,
        subject: str,
        state: SubjectState | None,
        schema_id: int | None,
        canonical: str,
        fingerprint: str,
    ) -> tuple[int, int]:
        added = super().add_version(subject, state, schema_id, canonical, fingerprint)
        self.metrics.registrations.inc()
        return added


class _MetricsMiddleware:
    """Times and counts every HTTP answer, by the template of the route that matched."""

    def __init__(self, app: ASGIApp, metrics: RegistryMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception that escapes every handler is answered 500 by the server

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            endpoint = str(getattr(route, "path", "other"))
            self.metrics.observe(scope["method"], endpoint, status, time.perf_counter() - started)


def instrument(app: FastAPI, metrics: RegistryMetrics) -> None:
    """Count ``app``'s answers in ``metrics`` and serve them at ``GET /metrics`` (before the app starts)."""

    def exposition() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route("/metrics", exposition, methods=["GET"], include_in_schema=False)
    app.add_middleware(_MetricsMiddleware, metrics=metrics)
