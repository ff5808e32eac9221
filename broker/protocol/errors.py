"""Errors of the Kafka wire-protocol codec, all under :class:`broker.errors.BrokerError`.

The code a server answers with when it can answer at all (most decoding failures close the connection
instead, as Apache Kafka does) is noted in brackets below; it comes from the broker's one table,
:mod:`broker.server.error_codes`.

::

    BrokerError
    └── ProtocolError                  (INVALID_REQUEST 42)
        ├── MalformedMessageError      bytes that do not decode: truncated, impossible lengths, null where
        │                              not nullable, bad UTF-8, over-long varints, trailing bytes
        ├── FrameSizeError             a frame's int32 size prefix is negative or above the limit
        ├── UnknownApiKeyError         an API key Lumber does not implement
        ├── UnsupportedVersionError    (UNSUPPORTED_VERSION 35) a known API at a version Lumber lacks
        ├── EncodeError                (UNKNOWN_SERVER_ERROR -1) a value that does not fit its wire type
        └── SchemaDefinitionError      a message declaration that cannot be compiled (a bug in Lumber)

Messages name the message ("Produce v7 request"), the field path
("topic_data[0].partition_data[2].records") and the byte position within the frame (the bytes after the
4-byte size prefix), e.g. ``Produce v7 request: topic_data[0].partition_data[2].records: length 1048576
exceeds remaining 12 bytes at position 87``.
"""

from __future__ import annotations

from broker.errors import BrokerError
from broker.protocol.api_key import ApiKey


class ProtocolError(BrokerError):
    """Root of the wire-protocol errors."""


class MalformedMessageError(ProtocolError):
    """Bytes that are not a valid encoding of the message they claim to be.

    ``context`` names the message ("Produce v7 request", "request header"), ``path`` the field
    ("topics[0].partitions[2].records"), ``reason`` what was wrong and ``position`` the byte offset in the
    frame where the failing value starts.
    """

    def __init__(
        self, reason: str, *, position: int | None = None, context: str = "", path: str = ""
    ) -> None:
        self.reason = reason
        self.position = position
        self.context = context
        self.path = path
        super().__init__(_located_message(context, path, reason, position))

    def located(self, context: str = "", path: str = "") -> MalformedMessageError:
        """The same failure, named by the message and field it occurred in (names already given win)."""
        return MalformedMessageError(
            self.reason, position=self.position, context=self.context or context, path=self.path or path
        )


class FrameSizeError(ProtocolError):
    """A frame's size prefix is negative or larger than the receiver accepts."""

    def __init__(self, size_bytes: int, max_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.max_bytes = max_bytes
        if size_bytes < 0:
            reason = f"frame size prefix {size_bytes} is negative"
        else:
            reason = f"frame size prefix {size_bytes} exceeds the limit of {max_bytes} bytes"
        super().__init__(reason)


class UnknownApiKeyError(ProtocolError):
    """A request for an API key that Lumber does not implement (Kafka closes such connections)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(
            f"request with correlation id {correlation_id}: api key {api_key} ({_api_name(api_key)}) "
            f"v{api_version} is not supported by Lumber"
        )


class UnsupportedVersionError(ProtocolError):
    """A request for a known API at a version outside the range Lumber implements.

    For ApiVersions the server answers with :func:`broker.protocol.codec.encode_api_versions_fallback`
    (UNSUPPORTED_VERSION in the v0 format, as the protocol guide prescribes); for any other API Kafka
    closes the connection, since a client only sends versions the broker advertised.
    """

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, min_version: int, max_version: int
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.min_version = min_version
        self.max_version = max_version
        super().__init__(
            f"request with correlation id {correlation_id}: {_api_name(api_key)} v{api_version} is not "
            f"supported: Lumber implements v{min_version} to v{max_version}"
        )


class EncodeError(ProtocolError):
    """A value that cannot be encoded as its field's wire type (out of range, wrong type, too long)."""

    def __init__(self, reason: str, *, context: str = "", path: str = "") -> None:
        self.reason = reason
        self.context = context
        self.path = path
        super().__init__(_located_message(context, path, reason, None))

    def located(self, context: str = "", path: str = "") -> EncodeError:
        """The same failure, named by the message and field it occurred in (names already given win)."""
        return EncodeError(self.reason, context=self.context or context, path=self.path or path)


class SchemaDefinitionError(ProtocolError):
    """A message declaration that cannot be compiled: a bug in Lumber's protocol package, not bad input."""


def _located_message(context: str, path: str, reason: str, position: int | None) -> str:
    where = ": ".join(part for part in (context, path) if part)
    text = f"{where}: {reason}" if where else reason
    return text if position is None else f"{text} at position {position}"


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).title
    except ValueError:
        return "unknown"
