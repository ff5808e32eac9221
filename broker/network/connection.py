"""One accepted TCP connection as its processor sees it (Kafka's KafkaChannel): socket, receive, send.

Life of a connection (one request in flight at a time but for pipelining, responses in request order)::

    RECEIVING ──request complete──▶ MUTED ──response with chunks──▶ SENDING ──all sent──▶ RECEIVING
        ▲  selected for reading       │ not selected (but when        │ written at once, then selected
        │                             │ reading ahead, pipelining)    │ for writing while the socket
        └──────── empty response ─────┘                               │ buffer is full
                                                                      └─ close_after ─▶ CLOSED
    any state ── EOF, I/O error, bad size prefix, idle, close_after, shutdown ──▶ CLOSED

Invariants:

* ``in_flight`` is the request being handled from the moment it is received until its response is fully
  sent (or was empty); while it is set nothing is read from the socket;
* ``pipelined`` holds the requests served after ``in_flight`` while it waits for its answer (pipelining
  of the processor, :mod:`broker.network.inline_serving`: only api keys the inline handler allows, within
  its bounds), oldest first, each with its response once given; each becomes ``in_flight`` in turn, so
  responses still leave in request order; ``pipelined_bytes`` is the size of their frames. While they
  wait the connection may stay selected for reading (MUTED is then *reading ahead*);
* one send may carry several answers: the in-flight request's and those already given to the pipelined
  requests right behind it (:meth:`Connection.start_send`), in request order; the last of them is then
  ``in_flight`` and the ones before it are answered (their bytes are in the send, which the connection
  finishes before reading anything more);
* ``send`` is set only in SENDING; ``interest`` is the selector events the socket is registered for
  (0 = not registered), kept by the processor;
* the socket is non-blocking with ``TCP_NODELAY``, and closed exactly once (:meth:`Connection.close`);
* a TLS connection (``tls``) is HANDSHAKING (``tls_handshaking``) before RECEIVING: the processor drives
  the handshake (:mod:`broker.network.tls_handshake`) and only then makes its :attr:`session`.

Thread safety: none; a connection belongs to its processor's thread.
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque

from broker.network.network_receive import NetworkReceive
from broker.network.request_channel import NetworkRequest, NetworkResponse
from broker.network.response_send import ResponseSend
from broker.network.sasl_authenticator import SaslAuthenticator
from broker.network.session import Session


class PipelinedRequest:
    """A request served while an earlier one of its connection waits, and its response once given."""

    __slots__ = ("request", "response")

    def __init__(self, request: NetworkRequest) -> None:
        self.request = request
        self.response: NetworkResponse | None = None


class Connection:
    """The processor's state for one peer: its socket, partial request, in-flight request and send."""

    __slots__ = (
        "close_after",
        "close_reason",
        "closed",
        "connection_id",
        "in_flight",
        "interest",
        "peer",
        "pipelined",
        "pipelined_bytes",
        "receive",
        "sasl",
        "send",
        "session",
        "sock",
        "tls",
        "tls_handshaking",
    )

    def __init__(
        self, sock: socket.socket, connection_id: str, peer: str, max_request_bytes: int, session: Session
    ) -> None:
        self.sock = sock
        #: A TLS connection (``sock`` is an :class:`ssl.SSLSocket`): its sends copy through user space.
        self.tls = False
        #: The TLS handshake is not done yet: the processor drives it, nothing is read as a request.
        self.tls_handshaking = False
        #: The SASL exchange of a connection not authenticated yet (None: authenticated, or no SASL).
        self.sasl: SaslAuthenticator | None = None
        self.connection_id = connection_id
        self.peer = peer
        #: Who the client is and the listener it came in on (every request carries it).
        self.session = session
        self.receive = NetworkReceive(peer, max_request_bytes)
        #: The request whose response has not been fully sent yet (None while RECEIVING).
        self.in_flight: NetworkRequest | None = None
        #: Requests served while ``in_flight`` waits, oldest first, with their responses once given.
        self.pipelined: deque[PipelinedRequest] = deque()
        #: Bytes of the frames in ``pipelined``.
        self.pipelined_bytes = 0
        #: The response being sent (SENDING only).
        self.send: ResponseSend | None = None
        #: Close once the current send completes (the response asked for it), logging ``close_reason``.
        self.close_after = False
        self.close_reason = ""
        #: Selector events the socket is registered for; 0 when not registered.
        self.interest = 0
        self.closed = False

    @property
    def muted(self) -> bool:
        """Whether reading is suspended because a request is in flight."""
        return self.in_flight is not None

    def read(self) -> bytes | None:
        """Read what the socket has of the next request; the frame when complete (see
        :meth:`NetworkReceive.read_from` for what it raises)."""
        return self.receive.read_from(self.sock)

    def start_send(self, response: NetworkResponse) -> tuple[int, int]:
        """Enter SENDING with ``response``'s chunks (the in-flight request's answer) followed by those of
        the pipelined requests already answered right behind it, up to the first not answered yet or one
        that closes the connection: one send, whose last request becomes ``in_flight`` (the ones before it
        are answered once their bytes are in the send). Returns how many pipelined requests it took and their
        frames' bytes (for the processor's counters and ``pipelined_bytes``). Raises
        :class:`~broker.network.errors.ResponseSendError` for a chunk that cannot be sent."""
        chunks = response.chunks
        close_after = response.close_after
        reason = response.reason
        taken = taken_bytes = 0
        responses = 1
        pipelined = self.pipelined
        if not close_after and pipelined and pipelined[0].response is not None:
            merged = list(chunks)
            while pipelined:
                waiting = pipelined[0]
                following = waiting.response
                if following is None:
                    break
                pipelined.popleft()
                taken += 1
                taken_bytes += len(waiting.request.frame)
                self.in_flight = waiting.request
                if following.chunks:
                    merged.extend(following.chunks)
                    responses += 1
                if following.close_after:
                    close_after, reason = True, following.reason
                    break
            chunks = tuple(merged)
            self.pipelined_bytes -= taken_bytes
        send = ResponseSend(self.peer, chunks, tls=self.tls)
        send.responses = responses
        self.send = send
        if close_after:
            self.close_after = True
            self.close_reason = reason
        return taken, taken_bytes

    def finish_request(self) -> None:
        """The in-flight request is answered: back to RECEIVING."""
        self.in_flight = None
        self.send = None

    def close(self) -> None:
        """Close the socket; idempotent. Unregister it from the selector first."""
        if self.closed:
            return
        self.closed = True
        self.in_flight = None
        self.pipelined.clear()
        self.pipelined_bytes = 0
        self.send = None
        with contextlib.suppress(OSError):
            self.sock.close()

    def __repr__(self) -> str:
        return f"Connection({self.connection_id!r}{', closed' if self.closed else ''})"
