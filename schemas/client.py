"""A client for the schema registry's HTTP API (ours, or any Confluent-compatible registry), with caches.

Caching follows what can change:

* by id (``get_schema``): cached for the life of the client. An id's schema never changes (the paper: "this
  lookup need only be done once per schema, since the values are immutable").
* by subject (``get_version``, ``lookup``, ``register``, ``get_versions``): cached for ``subject_cache_ttl_s``
  (``[registry] subject_cache_ttl_ms``), since ``latest`` moves and versions can be deleted; a write through
  this client (register, delete, config) drops that subject's entries at once.

Error answers become the :class:`~schemas.errors.RegistryError` subclass of their Confluent ``error_code``
(e.g. :class:`~schemas.errors.SchemaNotFoundError` for 40403); a 401 (credentials missing or wrong) is
:class:`~schemas.errors.RegistryUnauthorizedError`, one line naming the URL and the user, never a password; an
unreachable registry raises :class:`~schemas.errors.RegistryUnavailableError` naming the URL.

Lumber's components make their clients with :meth:`SchemaRegistryClient.from_config` from ``[registry]``
(URL, user and password, CA file), so that with the registry's authentication on every one of them sends
the credentials; the constructor is for tools that talk to a registry outside the config.

Thread-safe. Picklable: only the settings travel (for Spark executors: the password too, as the
brokers' SASL password does); the HTTP connection pool and the caches are created anew, lazily, on first use.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from schemas.avro_schema import AvroSchema
from schemas.compatibility_result import CompatibilityResult
from schemas.errors import (
    RegistryRequestError,
    RegistryUnauthorizedError,
    RegistryUnavailableError,
    registry_error_for,
)
from schemas.registered_schema import RegisteredSchema

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
Version = int | str


class RegistryClientSettings(Protocol):
    """The ``[registry]`` keys a client reads (:meth:`SchemaRegistryClient.from_config`). The registry's
    own section (:class:`schemas.registry.config.RegistryConfig`) has them; the client never imports the
    server's package (issue 18: ``schemas.registry`` imports the client side, not the reverse)."""

    @property
    def url(self) -> str: ...
    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def subject_cache_ttl_ms(self) -> int: ...
    @property
    def ssl_cafile(self) -> str: ...
    def basic_auth(self) -> tuple[str, str] | None:
        """``(user, password)``, the password read now from where the config says; None: no credentials.
        Raises :class:`~schemas.errors.RegistryCredentialsError` when it cannot be read."""
        ...

    def with_secrets_read(self) -> RegistryClientSettings:
        """A copy holding the password itself, read now (for a process without its file or variable)."""
        ...


def _segment(value: str | int) -> str:
    return quote(str(value), safe="")


def _schema_text(schema: str | AvroSchema) -> str:
    return schema.canonical if isinstance(schema, AvroSchema) else schema


class SchemaRegistryClient:
    """HTTP client of one registry (see the module docstring)."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 10.0,
        subject_cache_ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        basic_auth: tuple[str, str] | None = None,
        cafile: str = "",
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.subject_cache_ttl_s = subject_cache_ttl_s
        self.clock = clock
        self._basic_auth = basic_auth
        self._cafile = cafile
        self._init_runtime()

    def __repr__(self) -> str:  # never the password
        user = f", as {self._basic_auth[0]!r}" if self._basic_auth else ""
        return f"SchemaRegistryClient({self.url!r}{user})"

    @classmethod
    def from_config(
        cls,
        config: RegistryClientSettings,
        url: str | None = None,
        *,
        timeout_s: float | None = None,
        subject_cache_ttl_s: float | None = None,
    ) -> SchemaRegistryClient:
        """The one way Lumber makes a client of its registry: ``[registry]``'s URL (or ``url``), timeout and
        cache (or the overrides), its user with the password read now from the key, file or variable the
        config names (:class:`~schemas.errors.RegistryCredentialsError` if it cannot be read), and its CA
        file. The client holds the password it read, so a pickled copy (a Spark task's) needs neither the
        file nor the variable; ``repr`` shows the user only."""
        return cls(
            url or config.url,
            timeout_s=config.request_timeout_ms / 1000 if timeout_s is None else timeout_s,
            subject_cache_ttl_s=(
                config.subject_cache_ttl_ms / 1000 if subject_cache_ttl_s is None else subject_cache_ttl_s
            ),
            basic_auth=config.basic_auth(),
            cafile=config.ssl_cafile,
        )

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None
        self._by_id: dict[int, AvroSchema] = {}
        self._by_subject: dict[tuple[Any, ...], tuple[float, Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "timeout_s": self.timeout_s,
            "subject_cache_ttl_s": self.subject_cache_ttl_s,
            "clock": self.clock,
            "_basic_auth": self._basic_auth,
            "_cafile": self._cafile,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- HTTP ------------------------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                verify: Any = True
                if self._cafile:
                    verify = ssl.create_default_context(cafile=self._cafile)
                self._http = httpx.Client(
                    base_url=self.url,
                    timeout=self.timeout_s,
                    headers={"Accept": MEDIA_TYPE, "Content-Type": MEDIA_TYPE},
                    auth=httpx.BasicAuth(*self._basic_auth) if self._basic_auth else None,
                    verify=verify,
                )
            return self._http

    def _request(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        where = f"{method} {self.url}{path}"
        try:
            response = self._client().request(method, path, json=body, params=params)
        except httpx.TransportError as exc:
            raise RegistryUnavailableError(
                f"cannot reach the schema registry at {self.url} ({where}): {type(exc).__name__}: {exc}"
            ) from exc
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.is_success:
            if payload is None and response.content:
                raise RegistryRequestError(f"{where}: answer is not JSON: {response.text[:200]!r}")
            return payload
        if response.status_code == 401:
            who = f"user {self._basic_auth[0]!r}" if self._basic_auth else "no credentials"
            raise RegistryUnauthorizedError(
                f"{where}: HTTP 401 Unauthorized: the schema registry refused {who} ([registry] "
                "basic_auth_username and its password)",
                http_status=401,
            )
        if isinstance(payload, dict) and "error_code" in payload:
            code = payload["error_code"]
            message = str(payload.get("message", ""))
            if isinstance(code, int):
                raise registry_error_for(response.status_code, code, message)
        raise RegistryRequestError(
            f"{where}: HTTP {response.status_code}: {response.text[:200]!r}",
            error_code=response.status_code,
            http_status=response.status_code,
        )

    # -- caches ----------------------------------------------------------------------------------------

    def _cached(self, key: tuple[Any, ...], load: Callable[[], Any]) -> Any:
        now = self.clock()
        with self._lock:
            hit = self._by_subject.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        value = load()
        with self._lock:
            self._by_subject[key] = (now + self.subject_cache_ttl_s, value)
        return value

    def invalidate_subject(self, subject: str) -> None:
        """Forget every cached by-subject answer about ``subject``."""
        with self._lock:
            for key in [k for k in self._by_subject if k[1] == subject]:
                del self._by_subject[key]

    # -- schemas by id ---------------------------------------------------------------------------------

    def get_schema(self, schema_id: int) -> AvroSchema:
        """The schema of an id; cached for good. :class:`SchemaNotFoundError` (40403) if unknown."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        body = self._request("GET", f"/schemas/ids/{int(schema_id)}")
        schema = AvroSchema.parse(str(body["schema"]))
        with self._lock:
            self._by_id[schema_id] = schema
        return schema

    # -- subjects --------------------------------------------------------------------------------------

    def register(self, subject: str, schema: str | AvroSchema) -> int:
        """Register ``schema`` under ``subject`` (idempotent); return its id."""
        text = _schema_text(schema)
        key = ("register", subject, AvroSchema.parse(text).fingerprint)

        def load() -> int:
            body = self._request("POST", f"/subjects/{_segment(subject)}/versions", {"schema": text})
            self.invalidate_subject(subject)
            return int(body["id"])

        schema_id: int = self._cached(key, load)
        return schema_id

    def lookup(self, subject: str, schema: str | AvroSchema, deleted: bool = False) -> RegisteredSchema:
        """The version of ``subject`` holding ``schema``. 40401 / 40403 if none."""
        text = _schema_text(schema)
        key = ("lookup", subject, AvroSchema.parse(text).fingerprint, deleted)

        def load() -> RegisteredSchema:
            body = self._request(
                "POST", f"/subjects/{_segment(subject)}", {"schema": text}, {"deleted": _flag(deleted)}
            )
            return RegisteredSchema.from_json(body)

        found: RegisteredSchema = self._cached(key, load)
        return found

    def get_version(
        self, subject: str, version: Version = "latest", deleted: bool = False
    ) -> RegisteredSchema:
        """A version of ``subject`` (default: the latest)."""

        def load() -> RegisteredSchema:
            body = self._request(
                "GET",
                f"/subjects/{_segment(subject)}/versions/{_segment(version)}",
                params={"deleted": _flag(deleted)},
            )
            return RegisteredSchema.from_json(body)

        found: RegisteredSchema = self._cached(("version", subject, str(version), deleted), load)
        return found

    def get_latest(self, subject: str) -> RegisteredSchema:
        return self.get_version(subject, "latest")

    def get_versions(self, subject: str, deleted: bool = False) -> list[int]:
        def load() -> list[int]:
            body = self._request(
                "GET", f"/subjects/{_segment(subject)}/versions", params={"deleted": _flag(deleted)}
            )
            return [int(v) for v in body]

        versions: list[int] = self._cached(("versions", subject, deleted), load)
        return list(versions)

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Every subject (not cached)."""
        params: dict[str, Any] = {"deleted": _flag(deleted)}
        if prefix:
            params["subjectPrefix"] = prefix
        return [str(s) for s in self._request("GET", "/subjects", params=params)]

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        try:
            body = self._request(
                "DELETE", f"/subjects/{_segment(subject)}", params={"permanent": _flag(permanent)}
            )
        finally:
            self.invalidate_subject(subject)
        return [int(v) for v in body]

    def delete_version(self, subject: str, version: Version, permanent: bool = False) -> int:
        try:
            body = self._request(
                "DELETE",
                f"/subjects/{_segment(subject)}/versions/{_segment(version)}",
                params={"permanent": _flag(permanent)},
            )
        finally:
            self.invalidate_subject(subject)
        return int(body)

    # -- compatibility and config ---------------------------------------------------------------------

    def check_compatibility(
        self, subject: str, schema: str | AvroSchema, version: Version | None = "latest"
    ) -> CompatibilityResult:
        """Test ``schema`` against ``version`` (None: every live version); registers nothing. Not cached."""
        path = f"/compatibility/subjects/{_segment(subject)}/versions"
        if version is not None:
            path += f"/{_segment(version)}"
        body = self._request("POST", path, {"schema": _schema_text(schema)}, {"verbose": "true"})
        return CompatibilityResult(
            bool(body["is_compatible"]), tuple(str(m) for m in body.get("messages", ()))
        )

    def get_compatibility(self, subject: str | None = None, default_to_global: bool = False) -> str:
        """The global level, or a subject's own (40408 without one, unless ``default_to_global``)."""
        if subject is None:
            return str(self._request("GET", "/config")["compatibilityLevel"])
        body = self._request(
            "GET", f"/config/{_segment(subject)}", params={"defaultToGlobal": _flag(default_to_global)}
        )
        return str(body["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_segment(subject)}"
        body = self._request("PUT", path, {"compatibility": level})
        if subject is not None:
            self.invalidate_subject(subject)
        return str(body["compatibility"])


def _flag(value: bool) -> str:
    return "true" if value else "false"
