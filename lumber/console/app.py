"""The console's FastAPI application: the page routers, and every error rendered as a clear page.

:func:`create_app` takes the whole :class:`~lumber.config.LumberConfig` (kept on ``app.state``; the only
thing the application holds) and mounts the page groups. Errors become pages (or JSON with
``?format=json``) with the status that says whose fault they are:

=========================================================== =================================================
:class:`~lumber.console.errors.ConsoleError`              its own status (404 not found, 400 bad parameter,
                                                            503 a source does not answer)
a malformed parameter (``?offset=abc``), FastAPI's check    400, naming the parameter and what it expects
an unknown route or method                                  404 / 405
the registry's "not found" answers (40401, 40402, 40403)    404; its other refusals 400
ZooKeeper, a broker or the registry unreachable             503
no or wrong credentials ([console] users_file)              401, ``WWW-Authenticate: Basic``
                                                            (:mod:`~lumber.console.console_auth`)
an action a read-only user may not take                     403
=========================================================== =================================================

Anything else is a bug: 500, logged with its traceback, and the page still says what happened.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from kazoo.exceptions import KazooException
from starlette.exceptions import HTTPException as StarletteHTTPException

from broker.errors import BrokerError
from lumber.config import LumberConfig
from lumber.console import (
    audit_pages,
    cluster_pages,
    group_pages,
    load_pages,
    reset_pages,
    schema_pages,
    search_pages,
    topic_pages,
)
from lumber.console.console_auth import ConsoleAuth
from lumber.console.errors import ConsoleError
from lumber.console.page import error_response
from schemas.errors import (
    RegistryCredentialsError,
    RegistryError,
    RegistryUnauthorizedError,
    RegistryUnavailableError,
    SchemaNotFoundError,
    StoreError,
    SubjectNotFoundError,
    VersionNotFoundError,
)

logger = logging.getLogger(__name__)

_NOT_FOUND = (SubjectNotFoundError, VersionNotFoundError, SchemaNotFoundError)


def create_app(config: LumberConfig) -> FastAPI:
    app = FastAPI(title="Lumber console", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.config = config
    app.add_middleware(ConsoleAuth, authenticator=config.console.security().authenticator())

    @app.exception_handler(ConsoleError)
    async def console_error(request: Request, exc: ConsoleError) -> Response:
        return error_response(request, exc.status, exc.title, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError) -> Response:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("query", "path"))
            problems.append(f"parameter {where}={error.get('input')!r}: {error.get('msg')}")
        return error_response(request, 400, "Bad request", "; ".join(problems) or str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = f"no page at {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        return error_response(request, exc.status_code, str(exc.detail), message)

    @app.exception_handler(RegistryError)
    async def registry_error(request: Request, exc: RegistryError) -> Response:
        if isinstance(exc, _NOT_FOUND):
            return error_response(request, 404, "Not found", f"schema registry: {exc}")
        if isinstance(exc, StoreError | RegistryUnauthorizedError):
            return error_response(request, 503, "Unavailable", f"schema registry: {exc}")
        return error_response(request, 400, "Bad request", f"schema registry: {exc}")

    @app.exception_handler(RegistryUnavailableError)
    async def registry_down(request: Request, exc: RegistryUnavailableError) -> Response:
        return error_response(request, 503, "Unavailable", str(exc))

    @app.exception_handler(RegistryCredentialsError)
    async def registry_credentials(request: Request, exc: RegistryCredentialsError) -> Response:
        return error_response(request, 503, "Unavailable", f"schema registry: {exc}")

    @app.exception_handler(BrokerError)
    async def broker_error(request: Request, exc: BrokerError) -> Response:
        return error_response(request, 503, "Unavailable", f"{type(exc).__name__}: {exc}")

    @app.exception_handler(KazooException)
    async def zookeeper_error(request: Request, exc: KazooException) -> Response:
        return error_response(request, 503, "Unavailable", f"ZooKeeper: {exc!r}")

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> Response:
        logger.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(request, 500, "Internal error", f"{type(exc).__name__}: {exc}")

    for module in (
        cluster_pages,
        search_pages,
        topic_pages,
        reset_pages,
        group_pages,
        schema_pages,
        load_pages,
        audit_pages,
    ):
        app.include_router(module.router)
    return app
