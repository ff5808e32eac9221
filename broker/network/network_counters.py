"""The network layer's counters, one set per acceptor and per processor, summed by ``SocketServer.stats()``.

Every counter only grows. Each set is written by its own thread only and read by any thread (a reader may
see a value a moment old, never a torn one).

=====================  ===============================================================================
counter                what it counts
=====================  ===============================================================================
connections_accepted   connections the acceptor accepted
accept_errors          ``accept()`` failures (e.g. out of file descriptors); the acceptor keeps going
connections_closed     connections closed, for any reason (the ``*_closed`` counters below split it)
peer_closed            ... because the peer closed its end or reset the connection
idle_closed            ... because they were idle longer than ``connections_max_idle_ms``
oversized_closed       ... because a size prefix exceeded ``max_request_bytes``
invalid_size_closed    ... because a size prefix was negative, zero or smaller than a request header
response_closed        ... because a response asked for it (``close_after``)
error_closed           ... because of another I/O error, an unsendable response or a closed channel
tls_failed_closed      ... because their TLS handshake failed (unknown CA, no client certificate...)
authentication_failed  SASL authentications that failed (each also closes its connection: response_closed)
shutdown_closed        ... because the server shut down
requests               complete requests handed to the request channel
request_bytes          bytes of those requests, size prefixes included
requests_read_ahead    ... of which read from the socket while an earlier request of the connection waited
responses_sent         responses with chunks, fully sent
responses_merged       ... of which sent in one send with the response before them (pipelined answers)
responses_empty        empty responses (nothing to send: the connection was just unmuted or closed)
responses_dropped      responses whose connection was closed (or that answered no request in flight)
response_bytes         bytes of the responses fully sent
=====================  ===============================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(slots=True)
class NetworkCounters:
    """One thread's counters (see the module's table)."""

    connections_accepted: int = 0
    accept_errors: int = 0
    connections_closed: int = 0
    peer_closed: int = 0
    idle_closed: int = 0
    oversized_closed: int = 0
    invalid_size_closed: int = 0
    response_closed: int = 0
    error_closed: int = 0
    tls_failed_closed: int = 0
    authentication_failed: int = 0
    shutdown_closed: int = 0
    requests: int = 0
    request_bytes: int = 0
    requests_read_ahead: int = 0
    responses_sent: int = 0
    responses_merged: int = 0
    responses_empty: int = 0
    responses_dropped: int = 0
    response_bytes: int = 0

    def count_close(self, counter: str) -> None:
        """Count one closed connection under ``connections_closed`` and ``counter`` (a ``*_closed``)."""
        self.connections_closed += 1
        setattr(self, counter, getattr(self, counter) + 1)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @staticmethod
    def sum(counters: list[NetworkCounters]) -> dict[str, int]:
        """Every counter summed over ``counters``."""
        total = {field.name: 0 for field in fields(NetworkCounters)}
        for one in counters:
            for name, value in one.as_dict().items():
                total[name] += value
        return total
