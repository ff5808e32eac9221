"""The hand-off between the network processors and the request handler threads (Kafka's RequestChannel).

Requests flow one way, responses the other::

    processor ──send_request──▶ [bounded request queue] ──receive_request──▶ handler threads
        ▲                                                                            │
        └──── processor's response queue + selector wakeup ◀──send_response─────────┘

* **Requests.** One queue shared by all processors of all servers using this channel, bounded by
  ``queue_size``. A processor blocks while the queue is full (back-pressure: it stops reading from its
  connections, as Kafka's processors do); handlers take requests in arrival order.
* **Responses.** Every :class:`NetworkResponse` goes to the processor named by its request's
  ``processor_id`` (registered with :meth:`RequestChannel.register_processor`), which queues it and wakes
  its selector. A response whose processor is gone (server shut down) is dropped.
* **One response per request.** A connection is muted from the moment its request is received until its
  response has been sent, so a handler must answer every request exactly once, with an empty
  :class:`NetworkResponse` when there is nothing to send (Produce with acks=0). A request never answered
  leaves its connection muted (unread, so not even a peer's close is noticed) until the server shuts
  down: a connection waiting for its response is not idle; idle time counts from the end of the last
  response.
* **Close.** :meth:`RequestChannel.close` drops the queued requests; from then on
  :meth:`receive_request` returns ``None`` at once and offering a request raises
  :class:`~broker.network.errors.ChannelClosedError`. Responses are still routed (a handler finishing its
  last request may still answer it).

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from broker.network.errors import ChannelClosedError, NetworkConfigError
from broker.network.session import PLAINTEXT_SESSION, Session
from broker.protocol.region import Region

logger = logging.getLogger(__name__)


class NetworkRequest(NamedTuple):
    """One complete request as it came off a connection (a named tuple: made once per request, it must be
    cheap; the processor tells requests apart by identity)."""

    #: The processor that owns the connection (responses are routed back to it).
    processor_id: int
    #: Unique per connection for the life of the process: ``local host:port-peer host:port-index``.
    connection_id: str
    #: The peer's ``host:port``.
    peer: str
    #: The request: the bytes after the 4-byte size prefix (header, then body).
    frame: bytes
    #: ``time.monotonic_ns()`` when the request's last byte arrived.
    received_ns: int
    #: Who sent it, through which listener (one object per connection, made when its client was known).
    session: Session = PLAINTEXT_SESSION


class NetworkResponse(NamedTuple):
    """The answer to ``request``: what to send, and whether to close the connection afterwards.

    ``chunks`` are sent in order and verbatim, so they hold the whole response as it goes on the wire,
    size prefix included: bytes, and regions (:class:`broker.log.file_region.FileRegion`) sent with
    ``sendfile``. No chunks means nothing to send: the connection is unmuted (or closed, with
    ``close_after``) at once.
    """

    request: NetworkRequest
    chunks: tuple[bytes | Region, ...] = ()
    #: Close the connection once ``chunks`` are sent (at once if there are none).
    close_after: bool = False
    #: Why the connection is closed (logged); only with ``close_after``.
    reason: str = ""


@dataclass(frozen=True, slots=True)
class InlineHandler:
    """Requests a processor serves on its own thread instead of handing them to a handler thread.

    Under CPython's GIL the hand-over (queue, handler thread wake-up, response queue, selector wake-up)
    costs more than answering a Produce, Fetch, ListOffsets or ApiVersions request, which neither blocks
    nor waits (a Fetch long-poll or an ``acks=-1`` Produce waits in the purgatory, not on the thread).
    ``handle`` must answer through the channel exactly as a handler thread would; requests whose api key
    is not in ``api_keys`` (ZooKeeper work: Metadata, CreateTopics...) still go to the handler threads.

    ``handle_run`` serves a *run*: consecutive requests of one connection, all with api keys in
    ``run_api_keys``, that a pipelining client sent and the processor has buffered (a producer with
    ``acks=0`` sends hundreds per read). It serves the leading requests of the run that need no response
    at all, as one unit (one append per partition instead of one per request), and returns how many it
    served; it must leave the first request it cannot serve that way (one that needs a response, or
    fails) and every request after it untouched, for :attr:`handle`, one at a time. It gets the run as an
    iterator that cuts each request from the read-ahead buffer when taken, and takes no request after the
    first it cannot serve (so a run refused at its first request costs one request, however many are
    buffered behind it).

    ``pipeline_api_keys``: while a request with one of these api keys waits for its answer (an ``acks=-1``
    Produce waiting for its group commit), the processor also serves the following requests with these
    keys that its read-ahead buffer already holds, through :attr:`handle`, and sends their answers in
    request order after the waiting one's; one fsync can then answer a pipelining producer's requests
    together instead of one each.

    ``handle_pipelined`` serves a request with pipeline api keys and the whole requests with such keys that
    the read-ahead buffer holds behind it (the first is the in-flight request or a pipelined one, the
    others are pipelined behind it), exactly as :attr:`handle` would one at a time, in order, but may append
    several of them in one write (a producer's requests to one partition that arrived in one read). It
    takes them from an iterator that cuts each from the buffer when taken and ends once the connection may
    pipeline no more or an answer given so far closes the connection; it must answer every request it takes
    but for those behind one whose answer closes the connection.

    ``serving`` makes the block the processor holds open over each turn's reading and serving, answers
    written included: what the handler defers to the end of the outermost block it opens (the server's
    purgatory re-checking the delayed operations that the turn's appends made ready: a consumer's waiting
    Fetch, a follower's) then runs once the turn's answers have been written, so an ``acks=1`` Produce is
    answered before the Fetch it wakes is (Kafka's ``KafkaApis.handle`` sends its response, then drains its
    action queue).
    """

    handle: Callable[[NetworkRequest], None]
    api_keys: frozenset[int]
    handle_run: Callable[[Iterator[NetworkRequest]], int] | None = None
    run_api_keys: frozenset[int] = frozenset()
    pipeline_api_keys: frozenset[int] = frozenset()
    handle_pipelined: Callable[[Iterator[NetworkRequest]], None] | None = None
    serving: Callable[[], AbstractContextManager[object]] | None = None


class ResponseSink(Protocol):
    """A processor, as the channel sees it."""

    def enqueue_response(self, response: NetworkResponse) -> None:
        """Queue ``response`` for sending and wake the processor; any thread."""
        ...


class RequestChannel:
    """The request queue shared by the processors and the handlers, and the routes back to processors."""

    def __init__(self, queue_size: int = 500) -> None:
        if queue_size < 1:
            raise NetworkConfigError(f"queue_size must be at least 1, got {queue_size}")
        self._queue_size = queue_size
        self._requests: deque[NetworkRequest] = deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._closed = False
        self._processors: dict[int, ResponseSink] = {}
        self._processor_ids = itertools.count()

    @property
    def queue_size(self) -> int:
        return self._queue_size

    @property
    def closed(self) -> bool:
        return self._closed

    def pending_requests(self) -> int:
        """How many requests wait for a handler now."""
        return len(self._requests)

    # -- processors ----------------------------------------------------------------------------------

    def allocate_processor_id(self) -> int:
        """A processor id not used before on this channel (ids stay unique across servers sharing it)."""
        return next(self._processor_ids)

    def register_processor(self, processor_id: int, sink: ResponseSink) -> None:
        """Route responses to requests of ``processor_id`` to ``sink``."""
        with self._lock:
            if processor_id in self._processors:
                raise NetworkConfigError(f"processor id {processor_id} is already registered")
            self._processors[processor_id] = sink

    def unregister_processor(self, processor_id: int) -> None:
        """Stop routing to ``processor_id``; its later responses are dropped."""
        with self._lock:
            self._processors.pop(processor_id, None)

    # -- requests ------------------------------------------------------------------------------------

    def send_request(self, request: NetworkRequest) -> None:
        """Queue ``request`` for the handlers, waiting while the queue is full.

        Raises :class:`~broker.network.errors.ChannelClosedError` if the channel is (or gets) closed.
        """
        with self._not_full:
            while True:
                if self._closed:
                    raise ChannelClosedError("the request channel is closed")
                if len(self._requests) < self._queue_size:
                    break
                self._not_full.wait()
            self._requests.append(request)
            self._not_empty.notify()

    def offer_request(self, request: NetworkRequest, timeout_s: float) -> bool:
        """Like :meth:`send_request`, but gives up after ``timeout_s`` while the queue stays full.

        Returns whether ``request`` was queued. Processors use this so that they notice a shutdown while
        waiting for room.
        """
        with self._not_full:
            deadline: float | None = None
            while True:
                if self._closed:
                    raise ChannelClosedError("the request channel is closed")
                if len(self._requests) < self._queue_size:
                    break
                if deadline is None:
                    deadline = time.monotonic() + timeout_s
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._not_full.wait(remaining)
            self._requests.append(request)
            self._not_empty.notify()
            return True

    def receive_request(self, timeout_s: float) -> NetworkRequest | None:
        """The oldest queued request, waiting up to ``timeout_s``; ``None`` on timeout or once closed."""
        with self._not_empty:
            if not self._requests and not self._closed:
                deadline = time.monotonic() + timeout_s
                while not self._requests and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._not_empty.wait(remaining)
            if self._closed:
                return None
            request = self._requests.popleft()
            self._not_full.notify()
            return request

    # -- responses -----------------------------------------------------------------------------------

    def send_response(self, response: NetworkResponse) -> None:
        """Hand ``response`` to the processor of its request, which sends it; dropped if that is gone."""
        sink = self._processors.get(response.request.processor_id)
        if sink is None:
            logger.debug(
                "dropping the response to %s (%s): processor %d is gone",
                response.request.connection_id,
                response.request.peer,
                response.request.processor_id,
            )
            return
        sink.enqueue_response(response)

    def close(self) -> None:
        """Drop the queued requests and refuse new ones; idempotent."""
        with self._lock:
            self._closed = True
            self._requests.clear()
            self._not_empty.notify_all()
            self._not_full.notify_all()
