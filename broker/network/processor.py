"""A network processor: one thread and one selector serving its share of the connections (Kafka's Processor).

The acceptor hands each new socket to a processor (round robin); from then on only that processor's thread
touches it. Each turn of the loop runs the same steps, in this order::

    1. register new connections     sockets from the acceptor: selected for reading, idle clock started
    2. queue responses              responses from the handlers: empty ones unmute (or close) at once, the
                                    others start a send
    3. poll                         write the new sends; select; read readable connections (and those
                                    with a complete request in their read-ahead buffer), write writable
                                    ones; close connections idle longer than connections_max_idle_ms
    4. completed receives           hand each request read for the handler threads to the request channel
                                    (its connection was muted when the request was read)
    5. completed sends              each fully sent response ends its request: unmute (or close_after)
    6. disconnects                  log why each connection closed in this turn, count it

**TLS and SASL**: a TLS listener's connections first go through their handshake
(:mod:`broker.network.tls_handshake`, mixed into :class:`Processor`), a SASL listener's through their
authentication (:mod:`broker.network.sasl_serving`): until then step 3 hands their events and frames to
those, never to the handlers.

**Inline requests** and **pipelining**: with an :class:`~broker.network.request_channel.InlineHandler`, step 3
serves the requests it names on this thread (:mod:`broker.network.inline_serving`, mixed in), in the
handler's ``serving`` block, whose deferred work runs once the turn's answers are written.

Invariants:

* **Responses in request order, one request in flight per connection** except for pipelining: a
  connection is muted (not selected for reading, nothing read) from the moment a request is complete
  until its response (and those of the requests pipelined behind it) is fully sent or was empty, so a
  client that pipelines is simply read later (its read-ahead buffer, at most ``READ_AHEAD_BYTES``, waits;
  TCP holds the rest). Pipelining (above) is the bounded exception: behind a waiting Produce, the
  following Produce requests are read and served, and their responses queued in request order (sent
  together as far as they are given). A run served by ``handle_run`` is requests that need no response
  at all, served in order.
* **A failure closes only its connection.** An I/O error, end of stream, a size prefix out of bounds, an
  unsendable response or even a bug while serving one connection closes that connection with a logged
  reason; the processor keeps serving the others.
* **Idle** is time without reading progress while waiting for a request (a connection with a request in
  flight is not idle; its idle time starts again when the response has been sent).
* A response for a connection that is closed (or for a request no longer in flight) is dropped quietly.
* Back-pressure: when the request channel is full, step 4 waits for room (it stops reading, as Kafka
  does), checking for shutdown every :data:`_OFFER_WAIT_S`.

Thread safety: :meth:`Processor.accept` (acceptor thread), :meth:`Processor.enqueue_response` (any thread)
and :meth:`Processor.initiate_shutdown` (any thread) queue work under a lock and wake the selector (a
response enqueued by the processor's own thread skips both); everything else runs on the processor's own
thread.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

from broker.endpoint import SecurityProtocol
from broker.network.connection import Connection
from broker.network.errors import (
    ChannelClosedError,
    ConnectionFailure,
    InvalidRequestSizeError,
    PeerClosedError,
    ResponseSendError,
)
from broker.network.inline_serving import InlineServing
from broker.network.network_counters import NetworkCounters
from broker.network.request_channel import InlineHandler, NetworkRequest, NetworkResponse, RequestChannel
from broker.network.sasl_authenticator import MAX_RECEIVE_BYTES, SaslAuthenticator, SaslSettings
from broker.network.sasl_serving import SaslServing
from broker.network.selector_wakeup import SelectorWakeup
from broker.network.session import ANONYMOUS, Session
from broker.network.tls_handshake import TlsHandshaking
from broker.protocol.frame import SIZE_PREFIX_BYTES

logger = logging.getLogger(__name__)

#: The longest select() (Kafka's processor polls every 300 ms), shorter when an idle deadline is nearer.
_POLL_TIMEOUT_S = 0.3
#: How long step 4 waits for room in a full request channel before checking for shutdown.
_OFFER_WAIT_S = 0.1
#: Reads of one connection per poll (frames served inline count too), so that a large request or a
#: pipelining client does not starve the others.
_MAX_READS_PER_POLL = 64

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class Processor(InlineServing, TlsHandshaking, SaslServing):
    """One selector loop over a set of connections; see the module docstring for the steps."""

    def __init__(
        self,
        processor_id: int,
        channel: RequestChannel,
        *,
        listener: str,
        listener_name: str = "PLAINTEXT",
        security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT,
        max_request_bytes: int,
        connections_max_idle_ms: int,
        connection_index: Iterator[int],
        thread_name: str,
        inline: InlineHandler | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.processor_id = processor_id
        self._ssl_context = ssl_context
        self._sasl = sasl
        self._channel = channel
        self._listener = listener
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        self._max_request_bytes = max_request_bytes
        self._max_idle_ms = connections_max_idle_ms
        self._max_idle_ns = connections_max_idle_ms * 1_000_000
        self._connection_index = connection_index
        self._inline = inline
        self._inline_keys = inline.api_keys if inline is not None else frozenset()
        self._run_keys = inline.run_api_keys if inline is not None and inline.handle_run else frozenset()
        self._pipeline_keys = inline.pipeline_api_keys if inline is not None else frozenset()
        self._serving = inline.serving if inline is not None and inline.serving else contextlib.nullcontext
        self.counters = NetworkCounters()

        self._selector = selectors.DefaultSelector()
        self._wakeup = SelectorWakeup()
        self._selector.register(self._wakeup.fileno(), _READ, None)

        # Written by other threads, under _lock.
        self._lock = threading.Lock()
        self._new_sockets: list[tuple[socket.socket, str]] = []
        self._new_responses: list[NetworkResponse] = []
        self._wakeup_pending = False
        self._running = True
        self._stopped = False

        # The processor thread's own state.
        self._thread_ident: int | None = None
        #: Responses enqueued by the processor's own thread (inline handling), taken without the lock.
        self._local_responses: list[NetworkResponse] = []
        #: Connections with a complete frame in their read-ahead buffer: the socket will not select
        #: readable for it, so the next turn reads them without waiting.
        self._buffered: list[Connection] = []
        self._connections: dict[str, Connection] = {}
        #: Connections waiting for a request (RECEIVING), oldest activity first: id -> last activity (ns).
        self._idle: OrderedDict[str, int] = OrderedDict()
        self._to_write: list[Connection] = []
        #: Bytes of the request frames waiting in all connections' ``pipelined`` queues.
        self._pipelined_bytes = 0
        #: Requests read in this turn for the handler threads (their connections already muted).
        self._completed_receives: list[tuple[Connection, NetworkRequest]] = []
        self._completed_sends: list[Connection] = []
        #: (connection, reason, log level or None if already logged) closed in this turn.
        self._disconnected: list[tuple[Connection, str, int | None]] = []

        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    # -- called from other threads --------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def accept(self, sock: socket.socket, peer: str) -> None:
        """Take a new connection (acceptor thread); registered by the processor's next turn."""
        with self._lock:
            if not self._stopped:
                self._new_sockets.append((sock, peer))
                self._wake_locked()
                return
        sock.close()
        self.counters.count_close("shutdown_closed")

    def enqueue_response(self, response: NetworkResponse) -> None:
        """Queue ``response`` for step 2 and wake the selector (any thread); dropped once stopped."""
        if threading.get_ident() == self._thread_ident:
            # an inline request, or a delayed one it completed: the loop takes it without a wake-up
            self._local_responses.append(response)
            return
        with self._lock:
            if self._stopped:
                return
            self._new_responses.append(response)
            self._wake_locked()

    def initiate_shutdown(self) -> None:
        """Ask the thread to close every connection and end (any thread); see :meth:`join`."""
        with self._lock:
            self._running = False
            self._wake_locked()

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread to end; whether it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def close_unstarted(self) -> None:
        """Release the selector and wakeup pipe of a processor whose thread never started."""
        if self._thread.ident is None:
            self._close_all()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _wake_locked(self) -> None:
        if not self._wakeup_pending:
            self._wakeup_pending = True
            self._wakeup.wakeup()

    # -- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        self._thread_ident = threading.get_ident()
        try:
            while self._running:
                try:
                    self._run_once()
                except Exception:
                    logger.exception("processor %d: unexpected error in its loop", self.processor_id)
        finally:
            self._close_all()

    def _run_once(self) -> None:
        with self._lock:
            self._wakeup_pending = False
            new_sockets, self._new_sockets = self._new_sockets, []
            responses, self._new_responses = self._new_responses, []
        if self._local_responses:
            responses = self._local_responses + responses
            self._local_responses = []
        now = time.monotonic_ns()
        self._configure_new_connections(new_sockets, now)
        self._process_new_responses(responses, now)
        self._poll(now)
        self._process_completed_receives()
        self._process_completed_sends()
        self._process_disconnected()

    # 1. register new connections
    def _configure_new_connections(self, new_sockets: list[tuple[socket.socket, str]], now: int) -> None:
        for sock, peer in new_sockets:
            connection_id = f"{self._listener}-{peer}-{next(self._connection_index)}"
            session = Session(
                ANONYMOUS, self._listener_name, self._security_protocol, peer.rpartition(":")[0]
            )
            tls = self._ssl_context is not None
            wrapped = self._wrap_tls(sock, peer) if tls else sock
            if wrapped is None:
                continue
            conn = Connection(wrapped, connection_id, peer, self._max_request_bytes, session)
            conn.tls = conn.tls_handshaking = tls
            if self._sasl is not None:
                conn.sasl = SaslAuthenticator(self._sasl, session.client_host)
                conn.receive.max_bytes = min(self._max_request_bytes, MAX_RECEIVE_BYTES)
            try:
                self._selector.register(wrapped, _READ, conn)
            except (OSError, ValueError) as exc:
                conn.close()
                self.counters.count_close("error_closed")
                logger.info(
                    "processor %d: cannot register connection from %s: %s", self.processor_id, peer, exc
                )
                continue
            conn.interest = _READ
            self._connections[connection_id] = conn
            self._idle[connection_id] = now

    # 2. queue responses
    def _process_new_responses(self, responses: list[NetworkResponse], now: int) -> None:
        held: list[tuple[Connection, NetworkResponse]] = []
        for response in responses:
            request = response.request
            conn = self._connections.get(request.connection_id)
            if conn is not None and conn.pipelined:
                if conn.in_flight is request and conn.send is None:
                    # started after the others: answers later in this list to the requests pipelined
                    # behind it go out in the same send
                    held.append((conn, response))
                    continue
                waiting = next((p for p in conn.pipelined if p.request is request), None)
                if waiting is not None and waiting.response is None:
                    waiting.response = response  # sent after the requests before it
                    continue
            self._start_response(conn, response, now)
        for conn, response in held:
            self._start_response(conn, response, now)

    def _start_response(self, conn: Connection | None, response: NetworkResponse, now: int) -> None:
        """Start sending ``response`` to its in-flight request (with the pipelined answers right behind
        it, see :meth:`Connection.start_send`), or finish an empty one; drop it if its connection is
        closed or its request is not in flight."""
        request = response.request
        if conn is None or conn.in_flight is not request or conn.send is not None:
            self.counters.responses_dropped += 1
            logger.debug(
                "processor %d: dropping a response to %s (%s): %s",
                self.processor_id,
                request.connection_id,
                request.peer,
                "the connection is closed" if conn is None else "its request is not in flight",
            )
            return
        try:
            if not response.chunks:
                self.counters.responses_empty += 1
                conn.finish_request()
                if response.close_after:
                    self._close(conn, response.reason or "the response asked to close", "response_closed")
                else:
                    self._after_request(conn, now)
                return
            self._start_send(conn, response)
        except ResponseSendError as exc:
            self._close(conn, exc.reason, "error_closed", logging.ERROR)
            return
        except Exception:
            logger.exception("processor %d: cannot start a response to %s", self.processor_id, conn.peer)
            self._close(conn, "unexpected error starting a response", "error_closed", None)
            return
        self._to_write.append(conn)

    # 3. poll
    def _poll(self, now: int) -> None:
        to_write, self._to_write = self._to_write, []
        for pending in to_write:
            if not pending.closed:
                self._write(pending)
        if self._completed_sends or self._completed_receives or self._disconnected or self._buffered:
            timeout_s = 0.0
        else:
            timeout_s = _POLL_TIMEOUT_S
            if self._idle:
                last_active = next(iter(self._idle.values()))
                timeout_s = min(timeout_s, max(0.0, (last_active + self._max_idle_ns - now) / 1e9))
        events = self._selector.select(timeout_s)
        with self._serving():  # the inline handler's deferred work runs after this turn's answers
            for key, mask in events:
                conn: Connection | None = key.data
                if conn is None:
                    self._wakeup.drain()
                    continue
                if conn.closed:
                    continue
                if conn.tls_handshaking:
                    self._tls_handshake(conn)
                    continue
                if mask & _WRITE and conn.send is not None:
                    self._write(conn)
                if mask & _READ and not conn.closed:
                    self._read(conn)  # in flight too: reading ahead (selected for reading only then)
            if self._buffered:
                buffered, self._buffered = self._buffered, []
                for conn in buffered:
                    if conn.in_flight is None and not conn.closed and (conn.receive.has_frame or conn.tls):
                        self._read(conn)
        self._close_idle_connections(time.monotonic_ns())

    def _read(self, conn: Connection) -> None:
        inline_keys = self._inline_keys
        try:
            if conn.sasl is not None:
                self._serve_sasl(conn, conn.sasl)
                return
            if conn.in_flight is not None:
                self._read_ahead(conn, _MAX_READS_PER_POLL)
                return
            for _ in range(_MAX_READS_PER_POLL):
                frame = conn.read()
                if frame is None:
                    continue
                received_ns = time.monotonic_ns()
                api_key = (frame[0] << 8) | frame[1]
                if inline_keys and api_key in inline_keys:
                    if api_key in self._run_keys and conn.receive.next_api_key() in self._run_keys:
                        frame = self._serve_run(conn, frame, received_ns)
                        if frame is None:
                            continue  # all served: on to the next request
                    if self._serve_inline(conn, frame, received_ns):
                        continue  # answered: on to the next request (touched below)
                    if api_key in self._pipeline_keys:
                        self._serve_pipelined(conn)
                    return  # in flight, so not idle; or closed
                # muted now, so that nothing more is read from it in this turn (buffered frames included)
                self._mute(conn)
                request = self._in_flight(conn, frame, received_ns)
                self._completed_receives.append((conn, request))
                return
            if conn.receive.has_frame or (conn.tls and conn.sock.pending()):  # type: ignore[attr-defined]
                self._buffered.append(conn)
            self._touch(conn, time.monotonic_ns())
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            self._touch(conn, time.monotonic_ns())
        except ssl.SSLZeroReturnError:
            self._close(conn, "the peer closed its TLS session", "peer_closed", logging.DEBUG)
        except InvalidRequestSizeError as exc:
            counter = "oversized_closed" if exc.oversized else "invalid_size_closed"
            self._close(conn, exc.reason, counter, logging.WARNING)
        except PeerClosedError as exc:
            if conn.receive.in_progress:
                self._close(conn, f"{exc.reason} in the middle of a request", "peer_closed", logging.INFO)
            else:
                self._close(conn, exc.reason, "peer_closed", logging.DEBUG)
        except ConnectionResetError as exc:
            self._close(conn, f"connection reset by the peer: {exc}", "peer_closed", logging.INFO)
        except OSError as exc:
            self._close(conn, f"read failed: {exc}", "error_closed", logging.INFO)
        except Exception:
            logger.exception("processor %d: unexpected error reading from %s", self.processor_id, conn.peer)
            self._close(conn, "unexpected error while reading", "error_closed", None)

    def _in_flight(self, conn: Connection, frame: bytes, received_ns: int) -> NetworkRequest:
        """``frame`` as the request in flight on ``conn``, counted."""
        request = NetworkRequest(
            self.processor_id, conn.connection_id, conn.peer, frame, received_ns, conn.session
        )
        conn.in_flight = request
        counters = self.counters
        counters.requests += 1
        counters.request_bytes += SIZE_PREFIX_BYTES + len(frame)
        return request

    def _write(self, conn: Connection) -> None:
        send = conn.send
        if send is None:
            return
        try:
            send.write_to(conn.sock)
        except ConnectionFailure as exc:
            self._close(conn, exc.reason, "error_closed", logging.ERROR)
            return
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._close(conn, f"the peer went away during a response: {exc}", "peer_closed", logging.INFO)
            return
        except OSError as exc:
            self._close(conn, f"write failed: {exc}", "error_closed", logging.INFO)
            return
        except Exception:
            logger.exception("processor %d: unexpected error writing to %s", self.processor_id, conn.peer)
            self._close(conn, "unexpected error while writing", "error_closed", None)
            return
        if send.completed:
            self.counters.response_bytes += send.size_bytes
            self._completed_sends.append(conn)
        elif conn.interest != _WRITE:
            self._set_interest(conn, _WRITE)

    def _close_idle_connections(self, now: int) -> None:
        deadline = now - self._max_idle_ns
        idle = self._idle
        while idle:
            connection_id, last_active = next(iter(idle.items()))
            if last_active > deadline:
                return
            conn = self._connections[connection_id]
            self._close(
                conn,
                f"idle for {(now - last_active) // 1_000_000} ms, longer than "
                f"connections_max_idle_ms={self._max_idle_ms}",
                "idle_closed",
                logging.DEBUG,
            )

    # 4. completed receives
    def _process_completed_receives(self) -> None:
        receives, self._completed_receives = self._completed_receives, []
        for conn, request in receives:
            if conn.closed:
                continue
            if not self._hand_over(conn, request):
                return  # shutting down: every connection is about to close

    def _hand_over(self, conn: Connection, request: NetworkRequest) -> bool:
        """Offer ``request`` to the channel until it is taken; False if the processor stops meanwhile."""
        while True:
            try:
                if self._channel.offer_request(request, _OFFER_WAIT_S):
                    return True
            except ChannelClosedError:
                self._close(conn, "the request channel is closed", "error_closed", logging.WARNING)
                return True
            if not self._running:
                return False

    # 5. completed sends
    def _process_completed_sends(self) -> None:
        sends, self._completed_sends = self._completed_sends, []
        if not sends:
            return
        now = time.monotonic_ns()
        counters = self.counters
        for conn in sends:
            if conn.closed:
                continue
            send = conn.send
            responses = 1 if send is None else send.responses
            counters.responses_sent += responses
            counters.responses_merged += responses - 1
            conn.finish_request()
            if conn.close_after:
                self._close(conn, conn.close_reason or "the response asked to close", "response_closed")
            else:
                self._after_request(conn, now)

    # 6. disconnects
    def _process_disconnected(self) -> None:
        if not self._disconnected:
            return
        disconnected, self._disconnected = self._disconnected, []
        for conn, reason, level in disconnected:
            if level is not None and logger.isEnabledFor(level):
                logger.log(
                    level,
                    "processor %d closed connection %s from %s: %s",
                    self.processor_id,
                    conn.connection_id,
                    conn.peer,
                    reason,
                )

    # -- connection state ----------------------------------------------------------------------------

    def _touch(self, conn: Connection, now: int) -> None:
        idle = self._idle
        if conn.connection_id in idle:
            idle[conn.connection_id] = now
            idle.move_to_end(conn.connection_id)

    def _mute(self, conn: Connection) -> None:
        self._idle.pop(conn.connection_id, None)
        self._set_interest(conn, 0)

    def _unmute(self, conn: Connection, now: int) -> None:
        self._set_interest(conn, _READ)
        if not conn.closed:
            idle = self._idle
            idle[conn.connection_id] = now
            idle.move_to_end(conn.connection_id)  # not muted before when an inline request was answered
            if conn.receive.has_frame or (conn.tls and conn.sock.pending()):  # type: ignore[attr-defined]
                self._buffered.append(conn)

    def _set_interest(self, conn: Connection, events: int) -> None:
        if conn.interest == events:
            return
        try:
            if events == 0:
                self._selector.unregister(conn.sock)
            elif conn.interest == 0:
                self._selector.register(conn.sock, events, conn)
            else:
                self._selector.modify(conn.sock, events, conn)
        except (OSError, ValueError, KeyError) as exc:
            conn.interest = 0  # a closed or broken socket: the selector dropped it, or never had it
            self._close(conn, f"cannot change its selector registration: {exc}", "error_closed", logging.INFO)
            return
        conn.interest = events

    def _close(self, conn: Connection, reason: str, counter: str, level: int | None = logging.INFO) -> None:
        """Close ``conn`` now; step 6 logs ``reason`` at ``level`` (None: already logged)."""
        if conn.closed:
            return
        if conn.interest:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self._selector.unregister(conn.sock)
            conn.interest = 0
        self._pipelined_bytes -= conn.pipelined_bytes
        conn.close()
        self._connections.pop(conn.connection_id, None)
        self._idle.pop(conn.connection_id, None)
        self.counters.count_close(counter)
        self._disconnected.append((conn, reason, level))

    def _close_all(self) -> None:
        with self._lock:
            self._stopped = True
            new_sockets, self._new_sockets = self._new_sockets, []
            self._new_responses = []
        for sock, _ in new_sockets:
            sock.close()
            self.counters.count_close("shutdown_closed")
        for conn in list(self._connections.values()):
            self._close(conn, "the server is shutting down", "shutdown_closed", logging.DEBUG)
        self._process_disconnected()
        self._completed_receives = []
        self._completed_sends = []
        self._to_write = []
        self._buffered = []
        self._local_responses = []
        with contextlib.suppress(OSError, ValueError, KeyError):
            self._selector.unregister(self._wakeup.fileno())
        self._selector.close()
        self._wakeup.close()
