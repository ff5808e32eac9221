"""The schemas package's root exception and its families.

``SchemaError`` is the root. Below it:

* :class:`RegistryError`: an error the registry reports over HTTP. Each subclass carries the HTTP status and
  the Confluent ``error_code`` of its kind, so the server turns it into ``{"error_code": N, "message": ...}``
  and the client turns such a body back into the same class (:func:`registry_error_for`).
* :class:`RegistryUnavailableError`: the client could not reach the registry at all.
* :class:`RegistryCredentialsError`: the client's password file or variable cannot be read.
* :class:`SerdeError`: a payload could not be framed, encoded or decoded (bad magic byte, unknown schema id,
  truncated payload, a record that does not fit its schema).
"""

from __future__ import annotations

from typing import ClassVar


class SchemaError(Exception):
    """Root of every error raised by :mod:`schemas`."""


class RegistryError(SchemaError):
    """An error with a Confluent Schema Registry ``error_code`` and HTTP status."""

    default_http_status: ClassVar[int] = 500
    default_error_code: ClassVar[int] = 50001

    def __init__(self, message: str, error_code: int | None = None, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = self.default_error_code if error_code is None else error_code
        self.http_status = self.default_http_status if http_status is None else http_status

    def to_body(self) -> dict[str, object]:
        """The JSON error body Confluent's registry sends."""
        return {"error_code": self.error_code, "message": self.message}


class SubjectNotFoundError(RegistryError):
    default_http_status = 404
    default_error_code = 40401


class VersionNotFoundError(RegistryError):
    default_http_status = 404
    default_error_code = 40402


class SchemaNotFoundError(RegistryError):
    default_http_status = 404
    default_error_code = 40403


class SubjectSoftDeletedError(RegistryError):
    """A soft delete of a subject whose versions are all soft-deleted already."""

    default_http_status = 404
    default_error_code = 40404


class SubjectNotSoftDeletedError(RegistryError):
    """A hard delete of a subject that was not soft-deleted first."""

    default_http_status = 404
    default_error_code = 40405


class VersionSoftDeletedError(RegistryError):
    """A soft delete of a version that is soft-deleted already."""

    default_http_status = 404
    default_error_code = 40406


class VersionNotSoftDeletedError(RegistryError):
    """A hard delete of a version that was not soft-deleted first."""

    default_http_status = 404
    default_error_code = 40407


class SubjectConfigNotFoundError(RegistryError):
    """``GET /config/{subject}`` for a subject without a subject-level compatibility level."""

    default_http_status = 404
    default_error_code = 40408


class IncompatibleSchemaError(RegistryError):
    """The schema breaks the subject's compatibility level; the message names the rule and path."""

    default_http_status = 409
    default_error_code = 409


class InvalidSchemaError(RegistryError):
    """Not a valid Avro schema (or not one the registry accepts); the message says why and where."""

    default_http_status = 422
    default_error_code = 42201


class InvalidVersionError(RegistryError):
    default_http_status = 422
    default_error_code = 42202


class InvalidCompatibilityLevelError(RegistryError):
    default_http_status = 422
    default_error_code = 42203


class InvalidSubjectError(RegistryError):
    default_http_status = 422
    default_error_code = 42208


class StoreError(RegistryError):
    """The backing store (ZooKeeper) failed or could not be reached."""

    default_http_status = 500
    default_error_code = 50001


class ConcurrentUpdateError(StoreError):
    """A compare-and-set in the store lost to a concurrent change; the registry re-reads and retries."""


class RegistryRequestError(RegistryError):
    """Any other error answer (malformed request body, unknown route, ...); ``error_code`` as received."""

    default_http_status = 400
    default_error_code = 400


class RegistryUnauthorizedError(RegistryRequestError):
    """HTTP 401: the registry wants credentials and those sent (if any) are not a user's; the message names
    the URL and the user, never a password."""

    default_http_status = 401
    default_error_code = 401


class RegistryCredentialsError(SchemaError):
    """The client's credentials cannot be read (``[registry] basic_auth_password_file`` or ``_env``); the
    message names the key and the file or variable, never the value."""


class RegistryUnavailableError(SchemaError):
    """The registry could not be reached (connection refused, timeout, ...); the message names the URL."""


class SerdeError(SchemaError):
    """A Confluent-framed Avro payload could not be encoded or decoded."""


class BadMagicByteError(SerdeError):
    """The payload does not start with the Confluent magic byte 0x00."""


class TruncatedPayloadError(SerdeError):
    """The payload ends before its header or its Avro record is complete."""


class UnknownSchemaIdError(SerdeError):
    """The payload's schema id is not known to the registry."""


class DecodeError(SerdeError):
    """The Avro bytes do not decode with the writer schema (or do not resolve to the reader schema)."""


class EncodeError(SerdeError):
    """The record does not fit the schema it is encoded with."""


_BY_CODE: dict[int, type[RegistryError]] = {
    cls.default_error_code: cls
    for cls in (
        SubjectNotFoundError,
        VersionNotFoundError,
        SchemaNotFoundError,
        SubjectSoftDeletedError,
        SubjectNotSoftDeletedError,
        VersionSoftDeletedError,
        VersionNotSoftDeletedError,
        SubjectConfigNotFoundError,
        IncompatibleSchemaError,
        InvalidSchemaError,
        InvalidVersionError,
        InvalidCompatibilityLevelError,
        InvalidSubjectError,
        StoreError,
    )
}


def registry_error_for(http_status: int, error_code: int, message: str) -> RegistryError:
    """The :class:`RegistryError` subclass for a Confluent error answer (a client-side mapping)."""
    cls = _BY_CODE.get(error_code)
    if cls is None:
        return RegistryRequestError(message, error_code, http_status)
    return cls(message, error_code, http_status)
