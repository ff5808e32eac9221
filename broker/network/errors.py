"""Errors of the broker's network layer, all under :class:`broker.errors.BrokerError`.

::

    BrokerError
    └── NetworkError
        ├── NetworkConfigError         a SocketServer or RequestChannel setting that cannot work
        ├── SocketServerStateError     start() twice, start() after shutdown(), port before start()
        ├── ListenError                the listening socket cannot be bound (address in use, bad host)
        ├── ChannelClosedError         a request offered to a RequestChannel after close()
        ├── SaslAuthenticationError    a client's SASL exchange failed (bad credentials, malformed
        │                              token); the message names the user, never a secret
        └── ConnectionFailure          why the processor closes one connection (never leaves the processor)
            ├── PeerClosedError        the peer closed its end (EOF on read)
            ├── InvalidRequestSizeError a size prefix that is negative, zero, shorter than a request
            │                          header or larger than ``max_request_bytes``
            └── ResponseSendError      a response that cannot be sent: a chunk that is neither bytes nor a
                                       region with ``transfer_to``, or a region whose file ends early

A :class:`ConnectionFailure` closes exactly the connection that raised it; its message (which names the
peer) is the reason the processor logs.
"""

from __future__ import annotations

from broker.errors import BrokerError


class NetworkError(BrokerError):
    """Root of the network layer's errors."""


class NetworkConfigError(NetworkError):
    """A setting that cannot work (``num_processors`` < 1, ``max_request_bytes`` below a header...)."""


class SocketServerStateError(NetworkError):
    """A :class:`~broker.network.socket_server.SocketServer` method called in the wrong state."""


class ListenError(NetworkError):
    """The server socket cannot be created, bound or put in listening state."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        self.host = host
        self.port = port
        super().__init__(f"cannot listen on {host}:{port}: {cause}")


class ChannelClosedError(NetworkError):
    """The :class:`~broker.network.request_channel.RequestChannel` was closed; no request is accepted."""


class ConnectionFailure(NetworkError):  # noqa: N818 - a reason to close, named like Kafka's
    """Why one connection is closed; ``peer`` is the remote ``host:port``."""

    def __init__(self, peer: str, reason: str) -> None:
        self.peer = peer
        self.reason = reason
        super().__init__(f"{peer}: {reason}")


class PeerClosedError(ConnectionFailure):
    """The peer closed the connection (a read returned end of stream)."""

    def __init__(self, peer: str) -> None:
        super().__init__(peer, "the peer closed the connection")


class InvalidRequestSizeError(ConnectionFailure):
    """A request's int32 size prefix is outside ``[min_bytes, max_bytes]``; no frame is allocated for it.

    ``oversized`` tells a size above ``max_bytes`` (``max_request_bytes``) from one that is negative, zero or
    too small to hold a request header.
    """

    def __init__(self, peer: str, size_bytes: int, min_bytes: int, max_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.oversized = size_bytes > max_bytes
        if self.oversized:
            reason = f"request size prefix {size_bytes} exceeds the limit max_request_bytes={max_bytes}"
        elif size_bytes < 0:
            reason = f"request size prefix {size_bytes} is negative (limit max_request_bytes={max_bytes})"
        else:
            reason = (
                f"request size prefix {size_bytes} is smaller than a request header ({min_bytes} bytes; "
                f"limit max_request_bytes={max_bytes})"
            )
        super().__init__(peer, reason)


class ResponseSendError(ConnectionFailure):
    """A response that cannot be sent as given; the connection is closed since the stream is broken."""


class SaslAuthenticationError(NetworkError):
    """A SASL exchange failed; the message may be logged (it names the user and why, never a password or
    key). The client is told SASL_AUTHENTICATION_FAILED with ``client_message`` when given (Kafka's own words
    for PLAIN's refusals), else Kafka's generic "invalid credentials with SASL mechanism ..." message."""

    def __init__(self, message: str, *, client_message: str | None = None) -> None:
        super().__init__(message)
        self.client_message = client_message
