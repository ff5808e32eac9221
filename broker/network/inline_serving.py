"""A network processor serving requests on its own thread: inline requests, runs and read-ahead pipelining.

:class:`InlineServing` is mixed into :class:`~broker.network.processor.Processor`; its methods run on the
processor's thread only (step 3 of the loop, and steps 2 and 5 for :meth:`InlineServing._after_request`),
on the processor's own state, so they take no lock.

**Inline requests.** With an :class:`~broker.network.request_channel.InlineHandler`, step 3 serves the
requests it names itself, as it reads them: a response given during the call is queued without a wake-up
and, when empty or sent at once, the connection goes on to its next request in the same read (no mute,
no selector change); one answered later mutes the connection as usual. A run of pipelined requests the
handler can serve together goes to ``handle_run``; the requests it leaves are served one at a time.

**Pipelining.** When an inline request whose api key is in the handler's ``pipeline_api_keys``
(Produce) is answered later (an ``acks=-1`` Produce waiting for its followers or its group commit), the
requests with such keys behind it are served at once too (appended, their flushes requested, their
followers' waiting fetches answered); their responses wait in ``Connection.pipelined`` and go out in request
order once the earlier ones are sent. First the requests already whole in the read-ahead buffer; then the
connection stays selected for reading (*reading ahead*, :meth:`InlineServing._keep_reading_ahead`) and each
request completed on it is served the same way, so a producer with several ~100 KB requests in flight
(more than the 128 KiB read-ahead buffer holds) gets them all appended and replicated together instead of
one per round trip of its followers. Reading ahead stops (the connection is muted until its waiting
requests are answered, as without pipelining) when

* the next request is not a pipeline one (it is pushed back and read again once the connection is
  unmuted), or one of the waiting responses closes the connection;
* :data:`MAX_PIPELINED` requests wait, or their frames hold :data:`PIPELINED_MAX_BYTES` (per connection)
  or the processor's pipelined requests hold :data:`PIPELINED_MAX_BYTES_PER_PROCESSOR` (all its
  connections together);
* a response is being sent and the socket is full (the connection is selected for writing instead).

So what a connection holds beyond Kafka's one request is bounded by those limits plus the request being
read (at most ``max_request_bytes``, as always); an idle connection holds nothing more than before (its
read-ahead buffer). Kafka differs: its processor mutes a channel from a complete request until that
request's response is sent, so a producer's pipelined requests wait in the socket (docs/storage.md says so).

**Answers together.** When a pipeline request is answered at once (an ``acks=1`` Produce) and whole
pipeline requests wait behind it in the read-ahead buffer (a producer's requests that arrived together),
those are served first, as pipelined requests, and then the answers go out in one send (one ``sendmsg``,
or one TLS write, instead of one each): :meth:`Connection.start_send` takes the answers given to the
pipelined requests right behind the in-flight one, up to the first not given yet (that one and those behind
it go together once it is given) or the first that closes the connection. Only what the buffer already
holds is served before the first answer is written (nothing more is read for it), so that answer waits at
most for the requests of one read (the read-ahead buffer's 128 KiB). Kafka answers each request on its own.

**Served together.** With the handler's ``handle_pipelined``, a pipeline request with whole pipeline
requests buffered behind it (in flight, or itself pipelined) is given to it with those, in one call
(:meth:`InlineServing._handle`): the others are queued as pipelined requests as the handler takes them,
within the bounds above, and no more are given once an answer closes the connection. The handler serves
them as one at a time, in order (a producer's requests to one partition appended in one write).

All of these keep the processor's invariant that responses leave in request order per connection.
"""

from __future__ import annotations

import logging
import selectors
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from broker.network.connection import Connection, PipelinedRequest
from broker.network.errors import PeerClosedError, ResponseSendError
from broker.network.network_counters import NetworkCounters
from broker.network.request_channel import InlineHandler, NetworkRequest, NetworkResponse
from broker.protocol.frame import SIZE_PREFIX_BYTES

logger = logging.getLogger(__name__)

_READ = selectors.EVENT_READ

#: The most requests in one run given to ``InlineHandler.handle_run``.
MAX_RUN = 1000
#: The most requests served behind one that waits for its answer (pipelining).
MAX_PIPELINED = 100
#: The most bytes of request frames waiting behind the one in flight, per connection: reading ahead stops
#: there (a producer's ``max.in.flight.requests.per.connection`` x ``max.request.size`` is 5 MiB at
#: Kafka's defaults).
PIPELINED_MAX_BYTES = 8 * 1024 * 1024
#: The same bound for all of one processor's connections together.
PIPELINED_MAX_BYTES_PER_PROCESSOR = 64 * 1024 * 1024


class InlineServing:
    """Serving requests on the processor's thread (see the module docstring); mixed into ``Processor``."""

    # The processor's state these methods use (set by Processor.__init__).
    processor_id: int
    counters: NetworkCounters
    _inline: InlineHandler | None
    _run_keys: frozenset[int]
    _pipeline_keys: frozenset[int]
    _local_responses: list[NetworkResponse]
    _to_write: list[Connection]
    #: Bytes of the request frames in all connections' ``pipelined`` queues (see PIPELINED_MAX_BYTES...).
    _pipelined_bytes: int
    _idle: OrderedDict[str, int]

    if TYPE_CHECKING:  # the processor's steps these methods call

        def _in_flight(self, conn: Connection, frame: bytes, received_ns: int) -> NetworkRequest: ...
        def _process_new_responses(self, responses: list[NetworkResponse], now: int) -> None: ...
        def _process_completed_sends(self) -> None: ...
        def _write(self, conn: Connection) -> None: ...
        def _mute(self, conn: Connection) -> None: ...
        def _unmute(self, conn: Connection, now: int) -> None: ...
        def _set_interest(self, conn: Connection, events: int) -> None: ...
        def _close(
            self, conn: Connection, reason: str, counter: str, level: int | None = logging.INFO
        ) -> None: ...

    def _serve_run(self, conn: Connection, first: bytes, received_ns: int) -> bytes | None:
        """Give ``first`` and the run buffered after it to ``handle_run``; ``None`` if it served them all,
        else the first frame it left (to serve alone; the ones after it are pushed back to be read again).

        ``handle_run`` takes the requests one at a time and stops at the first it cannot serve, so only
        the frames it took are cut from the read-ahead buffer: a run refused at its first request (an
        ``acks=1`` Produce with more requests behind it) costs one request, not one per buffered frame."""
        assert self._inline is not None
        handle_run = self._inline.handle_run
        assert handle_run is not None
        frames = [first]
        try:
            served = handle_run(self._run_requests(conn, frames, received_ns))
        except Exception:
            logger.exception("processor %d: serving requests from %s failed", self.processor_id, conn.peer)
            served = 0
        if served:
            counters = self.counters
            counters.requests += served
            counters.request_bytes += sum(map(len, frames[:served])) + SIZE_PREFIX_BYTES * served
            counters.responses_empty += served
        if served == len(frames):
            return None
        if served + 1 < len(frames):
            conn.receive.push_back(frames[served + 1 :])
        return frames[served]

    def _run_requests(
        self, conn: Connection, frames: list[bytes], received_ns: int
    ) -> Iterator[NetworkRequest]:
        """The requests of a run as ``handle_run`` takes them: ``frames[0]``, then each buffered frame with a
        run api key, cut from the read-ahead buffer only when taken (and appended to ``frames``)."""
        receive, run_keys = conn.receive, self._run_keys
        processor_id, connection_id, peer, session = (
            self.processor_id,
            conn.connection_id,
            conn.peer,
            conn.session,
        )
        yield NetworkRequest(processor_id, connection_id, peer, frames[0], received_ns, session)
        while len(frames) < MAX_RUN and receive.next_api_key() in run_keys:
            frame = receive.read_from(conn.sock)  # buffered: no syscall
            assert frame is not None
            frames.append(frame)
            yield NetworkRequest(processor_id, connection_id, peer, frame, received_ns, session)

    def _serve_inline(self, conn: Connection, frame: bytes, received_ns: int) -> bool:
        """Answer ``frame`` on this thread; whether ``conn`` is ready for its next request (else it is muted,
        sending, or closed)."""
        assert self._inline is not None
        request = self._in_flight(conn, frame, received_ns)
        try:
            self._handle(conn, request)
        except Exception:
            logger.exception("processor %d: serving a request from %s failed", self.processor_id, conn.peer)
            self._close(conn, "unexpected error while serving a request", "error_closed", None)
        local = self._local_responses
        if len(local) == 1:
            only = local[0]
            if only.request is request and not only.chunks and not only.close_after and not conn.closed:
                # the common case (Produce with acks=0): nothing to send, the connection stays selected
                local.clear()
                conn.finish_request()
                self.counters.responses_empty += 1
                return True
        if local:
            responses, self._local_responses = local, []
            if self._answers_behind(conn, request, responses):
                self._serve_buffered(conn)  # their answers join this one's send
            self._process_new_responses(responses, received_ns)
            to_write, self._to_write = self._to_write, []
            for pending in to_write:
                if not pending.closed:
                    self._write(pending)
            self._process_completed_sends()
        if conn.closed:
            return False
        if not conn.muted:  # answered (in_flight cleared)
            return True
        if conn.send is None:
            self._mute(conn)  # answered later, from the purgatory
        else:
            self._idle.pop(conn.connection_id, None)  # the rest of the response waits for the socket
        return False

    def _answers_behind(
        self, conn: Connection, request: NetworkRequest, responses: list[NetworkResponse]
    ) -> bool:
        """Whether ``request`` (in flight on ``conn``, just served inline) is a pipeline request answered at
        once by ``responses`` and followed by a whole pipeline request in the read-ahead buffer: the buffered
        ones are then served before its answer is written, so that their answers go in the same send."""
        keys = self._pipeline_keys
        receive = conn.receive
        return (
            conn.in_flight is request
            and conn.send is None
            and receive.has_frame
            and ((request.frame[0] << 8) | request.frame[1]) in keys
            and receive.next_api_key() in keys
            and any(r.request is request for r in responses)
            and not any(r.close_after for r in responses)
        )

    def _serve_pipelined(self, conn: Connection) -> None:
        """``conn``'s in-flight request waits for its answer: serve the requests with pipeline api keys that
        its read-ahead buffer holds, then keep reading ahead if it may (see the module docstring)."""
        if self._serve_buffered(conn):
            self._keep_reading_ahead(conn)

    def _serve_buffered(self, conn: Connection) -> bool:
        """Serve the whole requests with pipeline api keys at the front of ``conn``'s read-ahead buffer
        behind its in-flight one, while it may pipeline; False if that closed the connection."""
        receive, keys = conn.receive, self._pipeline_keys
        while self._may_pipeline(conn) and receive.has_frame and receive.next_api_key() in keys:
            frame = receive.read_from(conn.sock)  # buffered: no syscall
            assert frame is not None
            if not self._serve_one_pipelined(conn, frame):
                return False
        return True

    def _read_ahead(self, conn: Connection, max_reads: int) -> None:
        """Read ``conn`` while its in-flight request waits (it is *reading ahead*): serve each pipeline
        request completed, push back anything else and stop. Raises what ``Connection.read`` raises."""
        keys = self._pipeline_keys
        for _ in range(max_reads):
            if not self._may_pipeline(conn):
                self._keep_reading_ahead(conn)
                return
            try:
                frame = conn.read()
            except PeerClosedError:
                # the peer sent all it had: answer what waits first; the end is read again once unmuted
                self._set_interest(conn, 0)
                return
            if frame is None:
                continue
            if ((frame[0] << 8) | frame[1]) not in keys:
                conn.receive.push_back([frame])  # read again once the requests before it are answered
                self._set_interest(conn, 0)
                return
            self.counters.requests_read_ahead += 1
            if not self._serve_one_pipelined(conn, frame):
                return
            self._serve_pipelined(conn)  # what that read buffered behind it; decides whether to go on
            if conn.interest == 0:
                return
        if conn.receive.has_frame:
            self._serve_pipelined(conn)

    def _may_pipeline(self, conn: Connection) -> bool:
        """Whether one more request of ``conn`` may be served behind its waiting in-flight request."""
        return (
            not conn.closed
            and conn.in_flight is not None
            and conn.send is None
            and len(conn.pipelined) < MAX_PIPELINED
            and conn.pipelined_bytes < PIPELINED_MAX_BYTES
            and self._pipelined_bytes < PIPELINED_MAX_BYTES_PER_PROCESSOR
            and not any(p.response is not None and p.response.close_after for p in conn.pipelined)
        )

    def _keep_reading_ahead(self, conn: Connection) -> None:
        """Select ``conn`` for reading while its in-flight (pipeline) request waits if it may pipeline one
        more and has no whole request buffered that could not be served; else mute it. Not while a
        response is being sent: the send owns the registration then (for writing while the socket is
        full), and step 5 decides again once it is sent."""
        if conn.closed or conn.send is not None:
            return
        in_flight = conn.in_flight
        reading_ahead = (
            in_flight is not None
            and ((in_flight.frame[0] << 8) | in_flight.frame[1]) in self._pipeline_keys
            and self._may_pipeline(conn)
            and not conn.receive.has_frame
        )
        self._set_interest(conn, _READ if reading_ahead else 0)

    def _handle(self, conn: Connection, request: NetworkRequest) -> None:
        """Give ``request`` (``conn``'s in-flight or last pipelined one) to the inline handler: alone, or
        with the whole pipeline requests buffered behind it (served as pipelined requests) when the handler
        serves them together (``handle_pipelined``: their appends to one partition in one write)."""
        inline = self._inline
        assert inline is not None
        keys, receive, frame = self._pipeline_keys, conn.receive, request.frame
        if (
            inline.handle_pipelined is not None
            and receive.has_frame
            and ((frame[0] << 8) | frame[1]) in keys
            and receive.next_api_key() in keys
            and self._may_pipeline(conn)
        ):
            inline.handle_pipelined(self._pipelined_requests(conn, request))
        else:
            inline.handle(request)

    def _pipelined_requests(self, conn: Connection, first: NetworkRequest) -> Iterator[NetworkRequest]:
        """``first``, then each whole pipeline request buffered behind it, cut from the read-ahead buffer and
        queued as pipelined only when taken, while ``conn`` may pipeline and no answer given so far closes
        it (as :meth:`_serve_buffered` would serve them one at a time)."""
        yield first
        receive, keys, local = conn.receive, self._pipeline_keys, self._local_responses
        while (
            receive.has_frame
            and receive.next_api_key() in keys
            and self._may_pipeline(conn)
            and not any(response.close_after for response in local)
        ):
            frame = receive.read_from(conn.sock)  # buffered: no syscall
            assert frame is not None
            yield self._pipelined(conn, frame)

    def _pipelined(self, conn: Connection, frame: bytes) -> NetworkRequest:
        """``frame`` queued behind ``conn``'s waiting requests, counted."""
        request = NetworkRequest(
            self.processor_id, conn.connection_id, conn.peer, frame, time.monotonic_ns(), conn.session
        )
        conn.pipelined.append(PipelinedRequest(request))
        conn.pipelined_bytes += len(frame)
        self._pipelined_bytes += len(frame)
        counters = self.counters
        counters.requests += 1
        counters.request_bytes += SIZE_PREFIX_BYTES + len(frame)
        return request

    def _serve_one_pipelined(self, conn: Connection, frame: bytes) -> bool:
        """Serve ``frame`` behind ``conn``'s waiting requests (with those buffered behind it, see
        :meth:`_handle`); False if that closed the connection."""
        request = self._pipelined(conn, frame)
        try:
            self._handle(conn, request)
        except Exception:
            logger.exception("processor %d: serving a request from %s failed", self.processor_id, conn.peer)
            self._close(conn, "unexpected error while serving a request", "error_closed", None)
            return False
        if self._local_responses:
            responses, self._local_responses = self._local_responses, []
            self._process_new_responses(responses, request.received_ns)
        return not conn.closed

    def _start_send(self, conn: Connection, response: NetworkResponse) -> None:
        """``conn.start_send(response)``, counting the pipelined requests it took (raises what it raises)."""
        taken, taken_bytes = conn.start_send(response)
        if taken:
            self._pipelined_bytes -= taken_bytes
            send = conn.send
            assert send is not None
            self.counters.responses_empty += taken + 1 - send.responses

    def _after_request(self, conn: Connection, now: int) -> None:
        """``conn``'s in-flight request is answered: the next pipelined request takes its place (its
        response, if given, starts now), or the connection is unmuted when none is left."""
        while conn.pipelined and not conn.closed:
            waiting = conn.pipelined.popleft()
            frame_bytes = len(waiting.request.frame)
            conn.pipelined_bytes -= frame_bytes
            self._pipelined_bytes -= frame_bytes
            conn.in_flight = waiting.request
            response = waiting.response
            if response is None:
                # answered later: not selected for writing (nothing to send); serve what is buffered
                # behind it and read ahead if it may
                self._idle.pop(conn.connection_id, None)
                self._serve_pipelined(conn)
                return
            if not response.chunks:
                self.counters.responses_empty += 1
                conn.finish_request()
                if response.close_after:
                    self._close(conn, response.reason or "the response asked to close", "response_closed")
                    return
                continue
            try:
                self._start_send(conn, response)
            except ResponseSendError as exc:
                self._close(conn, exc.reason, "error_closed", logging.ERROR)
                return
            self._to_write.append(conn)
            return
        if not conn.closed:
            self._unmute(conn, now)
