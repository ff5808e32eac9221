"""The registry's HTTP API: Confluent Schema Registry's REST API for Avro, on FastAPI.

Routes (Confluent's; ``{version}`` is ``latest``, ``-1`` or 1..2^31-1)::

    GET    /                                             {}
    GET    /schemas/types                                ["AVRO"]
    GET    /schemas/ids/{id}                             {"schema": "..."}
    GET    /schemas/ids/{id}/schema                      the schema itself (JSON)
    GET    /schemas/ids/{id}/subjects     ?deleted       ["subject", ...]
    GET    /schemas/ids/{id}/versions     ?deleted       [{"subject": ..., "version": ...}, ...]
    GET    /subjects                      ?deleted ?subjectPrefix
    GET    /subjects/{subject}/versions   ?deleted       [1, 2, ...]
    POST   /subjects/{subject}/versions                  {"schema": "...", "schemaType"?, "references"?}
                                                         -> {"id": N}
    GET    /subjects/{subject}/versions/{version}         ?deleted   {"subject", "version", "id", "schema"}
    GET    /subjects/{subject}/versions/{version}/schema  ?deleted   the schema itself (JSON)
    POST   /subjects/{subject}            ?deleted       look up: {"subject", "version", "id", "schema"}
    DELETE /subjects/{subject}            ?permanent     [versions deleted]
    DELETE /subjects/{subject}/versions/{version} ?permanent   the version deleted
    POST   /compatibility/subjects/{subject}/versions/{version} ?verbose  {"is_compatible": bool, "messages"?}
    POST   /compatibility/subjects/{subject}/versions           ?verbose  (against every live version)
    GET    /config                                       {"compatibilityLevel": "BACKWARD"}
    PUT    /config                                       {"compatibility": "FULL"} -> the same
    GET    /config/{subject}              ?defaultToGlobal
    PUT    /config/{subject}
    DELETE /config/{subject}                             -> {"compatibilityLevel": <the level removed>}
    GET    /openapi.json                                 this API's OpenAPI description

Answers are ``application/vnd.schemaregistry.v1+json``; request bodies may be that,
``application/vnd.schemaregistry+json`` or ``application/json`` (anything else: 415). Errors are
``{"error_code": N, "message": "..."}`` with Confluent's codes: 40401 subject not found, 40402 version not
found, 40403 schema not found, 40404 subject already soft-deleted, 40405 subject not soft-deleted before a
permanent delete, 40406 / 40407 the same for a version, 40408 no subject-level config, 409 incompatible
schema, 42201 invalid schema, 42202 invalid version, 42203 invalid compatibility level, 42208 invalid subject,
50001 store (ZooKeeper) error; malformed requests get the HTTP status as code (400 bad JSON, 415, 422 missing
or mistyped fields, 404 / 405 unknown routes; a 405's ``Allow`` names every method of the path). The
OpenAPI document states the rules the server checks on subjects, versions and levels
(:mod:`schemas.registry.openapi_document`); schemathesis with every check finds no difference (tested).
Query flags ``normalize`` (schemas are always normalized) and
others this registry does not use are accepted and ignored.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from schemas.errors import RegistryError, RegistryRequestError
from schemas.registry.openapi_document import true_document
from schemas.registry.schema_registry import SchemaRegistry

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_MEDIA_TYPES = frozenset({MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json"})

log = logging.getLogger(__name__)


class RegistryJSONResponse(JSONResponse):
    media_type = MEDIA_TYPE


class SchemaRequest(BaseModel):
    """A schema in a request body (register, look up, test compatibility)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    schema_text: str = Field(alias="schema", description="the Avro schema as a JSON string")
    schemaType: str | None = Field(default=None, description="AVRO (the only type supported); default AVRO")  # noqa: N815
    references: list[dict[str, Any]] | None = Field(default=None, description="not supported: must be empty")


class ConfigRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility: str = Field(
        description="BACKWARD, BACKWARD_TRANSITIVE, FORWARD, ..., FULL_TRANSITIVE or NONE"
    )


class ErrorBody(BaseModel):
    error_code: int
    message: str


class IdBody(BaseModel):
    id: int


class SchemaBody(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_text: str = Field(alias="schema")


class SubjectVersionBody(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    subject: str
    version: int
    id: int
    schema_text: str = Field(alias="schema")


class SubjectVersionRef(BaseModel):
    subject: str
    version: int


class CompatibilityBody(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


class ConfigBody(BaseModel):
    compatibilityLevel: str  # noqa: N815


class ConfigUpdateBody(BaseModel):
    compatibility: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "the request body is not valid JSON"),
        (404, "40401 subject / 40402 version / 40403 schema not found; 40404-40408 soft-delete and config"),
        (409, "incompatible schema"),
        (415, "unsupported request content type"),
        (422, "42201 invalid schema / 42202 invalid version / 42203 invalid level / 42208 invalid subject"),
        (500, "50001 store error"),
    )
}


def _schema_json(text: str) -> Response:
    """A stored schema served as the JSON it is. Its text is sent as stored (canonical JSON), never parsed
    and serialized again: every schema the registry accepts (nested up to ``normalize.MAX_DEPTH`` levels)
    is served, where a serializer's own depth limit would fail deep ones."""
    return Response(content=text.encode(), media_type=MEDIA_TYPE)


def _check_content_type(request: Request) -> None:
    raw = request.headers.get("content-type")
    if raw is None:
        return
    media = raw.split(";", 1)[0].strip().lower()
    if media not in ACCEPTED_MEDIA_TYPES:
        raise RegistryRequestError(
            f"Unsupported content type {raw!r}: send one of {', '.join(sorted(ACCEPTED_MEDIA_TYPES))}",
            error_code=415,
            http_status=415,
        )


def _allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """The methods of every route whose path matches ``request``'s (a 405's ``Allow``)."""
    methods: set[str] = set()
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path_regex.match(request.url.path):
            methods |= route.methods or set()
    return sorted(methods)


def create_app(registry: SchemaRegistry) -> FastAPI:
    """The FastAPI application serving ``registry``."""
    app = FastAPI(
        title="Lumber schema registry",
        description="Confluent-compatible Avro schema registry backed by ZooKeeper.",
        version="1",
        docs_url=None,
        redoc_url=None,
        default_response_class=RegistryJSONResponse,
        responses=_ERRORS,
    )
    body_dependency = [Depends(_check_content_type)]

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = true_document(get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            ))  # fmt: skip
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to change the document

    @app.exception_handler(RegistryError)
    async def _registry_error(_request: Request, exc: RegistryError) -> JSONResponse:
        if exc.http_status >= 500:
            log.error("store error: %s", exc.message)
        return RegistryJSONResponse(exc.to_body(), status_code=exc.http_status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            detail = "; ".join(str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors)
            return RegistryJSONResponse(
                {"error_code": 400, "message": f"The request body is not valid JSON: {detail}"},
                status_code=400,
            )
        parts = []
        for error in errors:
            where = ".".join(str(p) for p in error.get("loc", ()))
            parts.append(f"{where}: {error.get('msg')}")
        return RegistryJSONResponse(
            {"error_code": 422, "message": "Unprocessable request: " + "; ".join(parts)}, status_code=422
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = (
            HTTPStatus(exc.status_code).phrase if exc.status_code in HTTPStatus._value2member_map_ else ""
        )
        message = (
            exc.detail
            if isinstance(exc.detail, str) and exc.detail != phrase
            else f"HTTP {exc.status_code} {phrase}"
        )
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # every method of the path (Starlette names only the first route's)
            headers["Allow"] = ", ".join(_allowed_methods(app, request))
        return RegistryJSONResponse(
            {"error_code": exc.status_code, "message": message}, status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error", exc_info=exc)
        return RegistryJSONResponse(
            {"error_code": 500, "message": f"Internal error: {type(exc).__name__}: {exc}"}, status_code=500
        )

    # -- root and schemas by id ---------------------------------------------------------------------

    @app.get("/", summary="Liveness: an empty object")
    def root() -> dict[str, Any]:
        return {}

    @app.get("/schemas/types", summary="Schema types this registry stores")
    def schema_types() -> list[str]:
        return ["AVRO"]

    @app.get("/schemas/ids/{id}", response_model=SchemaBody, summary="The schema of an id")
    def schema_by_id(id: int) -> dict[str, Any]:  # noqa: A002 - Confluent's parameter name
        return {"schema": registry.schema_text(id)}

    @app.get("/schemas/ids/{id}/schema", summary="The schema of an id, as JSON")
    def raw_schema_by_id(id: int) -> Response:  # noqa: A002
        return _schema_json(registry.schema_text(id))

    @app.get("/schemas/ids/{id}/subjects", summary="Subjects using an id")
    def subjects_by_id(id: int, deleted: bool = False) -> list[str]:  # noqa: A002
        return sorted({subject for subject, _ in registry.id_versions(id, deleted)})

    @app.get("/schemas/ids/{id}/versions", summary="Subject versions using an id")
    def versions_by_id(id: int, deleted: bool = False) -> list[SubjectVersionRef]:  # noqa: A002
        return [SubjectVersionRef(subject=s, version=v) for s, v in registry.id_versions(id, deleted)]

    # -- subjects -------------------------------------------------------------------------------------

    @app.get("/subjects", summary="Subjects with a live version")
    def subjects(deleted: bool = False, subjectPrefix: str = "") -> list[str]:  # noqa: N803
        return registry.subjects(deleted=deleted, prefix=subjectPrefix)

    @app.get("/subjects/{subject}/versions", summary="Versions of a subject")
    def versions(subject: str, deleted: bool = False) -> list[int]:
        return registry.versions(subject, deleted=deleted)

    @app.post(
        "/subjects/{subject}/versions",
        response_model=IdBody,
        dependencies=body_dependency,
        summary="Register a schema under a subject",
    )
    def register(subject: str, body: SchemaRequest) -> dict[str, Any]:
        return {"id": registry.register(subject, body.schema_text, body.schemaType, body.references)}

    @app.get(
        "/subjects/{subject}/versions/{version}",
        response_model=SubjectVersionBody,
        response_model_by_alias=True,
        summary="One version of a subject",
    )
    def get_version(subject: str, version: str, deleted: bool = False) -> dict[str, Any]:
        return registry.get_version(subject, version, deleted=deleted).to_json()

    @app.get("/subjects/{subject}/versions/{version}/schema", summary="One version's schema, as JSON")
    def get_version_schema(subject: str, version: str, deleted: bool = False) -> Response:
        return _schema_json(registry.get_version(subject, version, deleted=deleted).schema)

    @app.post(
        "/subjects/{subject}",
        response_model=SubjectVersionBody,
        response_model_by_alias=True,
        dependencies=body_dependency,
        summary="Look up a schema under a subject",
    )
    def lookup(subject: str, body: SchemaRequest, deleted: bool = False) -> dict[str, Any]:
        found = registry.lookup(subject, body.schema_text, body.schemaType, body.references, deleted=deleted)
        return found.to_json()

    @app.delete("/subjects/{subject}", summary="Delete a subject (soft; hard with permanent=true)")
    def delete_subject(subject: str, permanent: bool = False) -> list[int]:
        return registry.delete_subject(subject, permanent=permanent)

    @app.delete(
        "/subjects/{subject}/versions/{version}", summary="Delete a version (soft; hard with permanent=true)"
    )
    def delete_version(subject: str, version: str, permanent: bool = False) -> int:
        return registry.delete_version(subject, version, permanent=permanent)

    # -- compatibility --------------------------------------------------------------------------------

    def _compatibility(messages: list[str], verbose: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            body["messages"] = messages
        return body

    @app.post(
        "/compatibility/subjects/{subject}/versions/{version}",
        response_model=CompatibilityBody,
        response_model_exclude_none=True,
        dependencies=body_dependency,
        summary="Test a schema against a version under the subject's compatibility level",
    )
    def test_version(
        subject: str, version: str, body: SchemaRequest, verbose: bool = False
    ) -> dict[str, Any]:
        messages = registry.test_compatibility(
            subject, body.schema_text, version, body.schemaType, body.references
        )
        return _compatibility(messages, verbose)

    @app.post(
        "/compatibility/subjects/{subject}/versions",
        response_model=CompatibilityBody,
        response_model_exclude_none=True,
        dependencies=body_dependency,
        summary="Test a schema against every live version of the subject",
    )
    def test_all(subject: str, body: SchemaRequest, verbose: bool = False) -> dict[str, Any]:
        messages = registry.test_compatibility(
            subject, body.schema_text, None, body.schemaType, body.references
        )
        return _compatibility(messages, verbose)

    # -- config ---------------------------------------------------------------------------------------

    @app.get("/config", response_model=ConfigBody, summary="The global compatibility level")
    def get_global_config() -> dict[str, Any]:
        return {"compatibilityLevel": registry.global_level().value}

    @app.put(
        "/config",
        response_model=ConfigUpdateBody,
        dependencies=body_dependency,
        summary="Set the global level",
    )
    def put_global_config(body: ConfigRequest) -> dict[str, Any]:
        return {"compatibility": registry.set_global_level(body.compatibility).value}

    @app.get("/config/{subject}", response_model=ConfigBody, summary="A subject's compatibility level")
    def get_subject_config(subject: str, defaultToGlobal: bool = False) -> dict[str, Any]:  # noqa: N803
        return {
            "compatibilityLevel": registry.subject_level(subject, default_to_global=defaultToGlobal).value
        }

    @app.put(
        "/config/{subject}",
        response_model=ConfigUpdateBody,
        dependencies=body_dependency,
        summary="Set a subject's compatibility level",
    )
    def put_subject_config(subject: str, body: ConfigRequest) -> dict[str, Any]:
        return {"compatibility": registry.set_subject_level(subject, body.compatibility).value}

    @app.delete("/config/{subject}", response_model=ConfigBody, summary="Remove a subject's own level")
    def delete_subject_config(subject: str) -> dict[str, Any]:
        return {"compatibilityLevel": registry.delete_subject_level(subject).value}

    return app
