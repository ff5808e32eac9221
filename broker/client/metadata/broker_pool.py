"""The connections of one client (a producer or a consumer), at most one per broker, opened on demand.

A connection that broke is dropped and the next :meth:`BrokerPool.get` opens a new one, but not sooner than
``retry_backoff_ms`` after the last failed attempt to reach that address (:class:`BrokerConnectionError`
in between, without touching the network), so that a down broker is not hammered.

Every connection of a pool is secured the same way (``security``: the client's protocol, login and TLS
files); the pool builds the TLS context once. A refused login
(:class:`~broker.client.errors.AuthenticationError`) is remembered like any failure, so a client with a
wrong password does not try again sooner than ``retry_backoff_ms``.

Thread safety: every method may be called from any thread; connecting holds the pool's lock, so the
connect timeout bounds how long other callers wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from broker.client.client_security import PLAINTEXT, ClientSecurity
from broker.client.errors import BrokerConnectionError
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.client.network.connection import BrokerConnection

Key = tuple[str, int]


class BrokerPool:
    """Open connections by broker address (see the module docstring)."""

    def __init__(
        self,
        *,
        client_id: str,
        request_timeout_ms: int,
        connect_timeout_ms: int,
        retry_backoff_ms: int,
        max_response_bytes: int = 1024 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.security = security
        self._ssl_context = security.ssl_context()
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._max_response_bytes = max_response_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._connections: dict[Key, BrokerConnection] = {}
        self._failures: dict[Key, tuple[float, BrokerConnectionError]] = {}
        self._closed = False

    def get(self, address: BrokerAddress) -> BrokerConnection:
        """A ready connection to ``address`` (opened if needed); raises :class:`BrokerConnectionError`."""
        key = (address.host, address.port)
        existing = self._connections.get(key)
        if existing is not None and not existing.closed:
            return existing
        with self._lock:
            if self._closed:
                raise BrokerConnectionError(str(address), "the client is closed")
            existing = self._connections.get(key)
            if existing is not None and not existing.closed:
                return existing
            failure = self._failures.get(key)
            if failure is not None and self._clock() - failure[0] < self._retry_backoff_s:
                raise failure[1]
            connection = BrokerConnection(
                address.host,
                address.port,
                node_id=address.node_id,
                client_id=self._client_id,
                request_timeout_ms=self._request_timeout_ms,
                connect_timeout_ms=self._connect_timeout_ms,
                max_response_bytes=self._max_response_bytes,
                security=self.security,
                ssl_context=self._ssl_context,
            )
            try:
                connection.connect()
            except BrokerConnectionError as exc:
                self._failures[key] = (self._clock(), exc)
                raise
            self._failures.pop(key, None)
            self._connections[key] = connection
            return connection

    def peek(self, address: BrokerAddress) -> BrokerConnection | None:
        """The open connection to ``address``, if there is one (never connects)."""
        existing = self._connections.get((address.host, address.port))
        return existing if existing is not None and not existing.closed else None

    def close(self) -> None:
        """Close every connection (requests in flight fail); later :meth:`get` calls raise."""
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()
