"""The broker's TCP server: one acceptor thread and N processor threads (Kafka's SocketServer).

::

    clients ──TCP──▶ Acceptor ──round robin──▶ Processor 0..N-1 (a selector each) ──requests──▶ RequestChannel
                                                     ▲                                             │
                                                     └────────────── responses ◀── handler threads ┘

The server does I/O only: it frames requests (int32 size prefix, checked against ``max_request_bytes`` before
anything is buffered), hands them to the :class:`~broker.network.request_channel.RequestChannel`, and sends
the responses the handlers give back, record data with ``sendfile``. Handling requests is the handler
threads' job, written against the channel; ``inline`` names the cheap requests a processor answers on its
own thread instead (:class:`~broker.network.request_channel.InlineHandler`). See
:mod:`broker.network.processor` for the processor's loop and its invariants (one request in flight per
connection, a failure closes only its connection).

Life cycle: ``SocketServer(...)`` allocates nothing; :meth:`SocketServer.start` binds and listens (port 0
picks a free port, :attr:`SocketServer.port` tells which) before it returns, then starts the threads;
:meth:`SocketServer.shutdown` stops accepting, closes the listening socket and every connection, and ends
every thread of the server before it returns. It does not close the channel, which the caller owns (so
several servers, one per listener, may share one). A server is started at most once.

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading

from broker.endpoint import SecurityProtocol
from broker.network.acceptor import Acceptor
from broker.network.errors import ListenError, NetworkConfigError, SocketServerStateError
from broker.network.network_counters import NetworkCounters
from broker.network.network_receive import MIN_REQUEST_BYTES
from broker.network.processor import Processor
from broker.network.request_channel import InlineHandler, RequestChannel
from broker.network.sasl_authenticator import SaslSettings

logger = logging.getLogger(__name__)

#: The listen backlog: connections the kernel queues before the acceptor takes them.
_LISTEN_BACKLOG = 1024
#: How long shutdown() waits for each thread before logging that it is stuck.
_JOIN_TIMEOUT_S = 10.0

_NEW, _STARTED, _STOPPED = "new", "started", "stopped"


class SocketServer:
    """Accepts connections on ``host:port`` and moves requests and responses through ``channel``."""

    def __init__(
        self,
        channel: RequestChannel,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        num_processors: int = 3,
        max_request_bytes: int = 100 * 1024 * 1024,
        connections_max_idle_ms: int = 600_000,
        name: str = "broker",
        inline: InlineHandler | None = None,
        listener_name: str = "PLAINTEXT",
        security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        if num_processors < 1:
            raise NetworkConfigError(f"num_processors must be at least 1, got {num_processors}")
        if max_request_bytes < MIN_REQUEST_BYTES:
            raise NetworkConfigError(
                f"max_request_bytes must be at least {MIN_REQUEST_BYTES} (a request header), "
                f"got {max_request_bytes}"
            )
        if connections_max_idle_ms < 1:
            raise NetworkConfigError(
                f"connections_max_idle_ms must be positive, got {connections_max_idle_ms}"
            )
        if not 0 <= port <= 65535:
            raise NetworkConfigError(f"port must be in [0, 65535], got {port}")
        self._channel = channel
        self._host = host
        self._requested_port = port
        self._num_processors = num_processors
        self._max_request_bytes = max_request_bytes
        self._connections_max_idle_ms = connections_max_idle_ms
        self._name = name
        self._inline = inline
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        if security_protocol.uses_tls and ssl_context is None:
            raise NetworkConfigError(f"listener {listener_name} ({security_protocol}) needs a TLS context")
        self._ssl_context = ssl_context if security_protocol.uses_tls else None
        if security_protocol.uses_sasl and sasl is None:
            raise NetworkConfigError(f"listener {listener_name} ({security_protocol}) needs SASL settings")
        self._sasl = sasl if security_protocol.uses_sasl else None
        self._lock = threading.Lock()
        self._state = _NEW
        self._port = 0
        self._acceptor: Acceptor | None = None
        self._processors: list[Processor] = []

    @property
    def host(self) -> str:
        return self._host

    @property
    def name(self) -> str:
        return self._name

    @property
    def listener_name(self) -> str:
        return self._listener_name

    @property
    def port(self) -> int:
        """The bound port; raises :class:`~broker.network.errors.SocketServerStateError` before start()."""
        if not self._port:
            raise SocketServerStateError(f"{self._name}: the socket server has not been started")
        return self._port

    def start(self) -> None:
        """Bind, listen and start the threads; raises :class:`~broker.network.errors.ListenError` if the
        address cannot be bound (nothing is left running then)."""
        with self._lock:
            if self._state != _NEW:
                raise SocketServerStateError(f"{self._name}: the socket server was already {self._state}")
            try:
                listen_sock = socket.create_server(
                    (self._host, self._requested_port), backlog=_LISTEN_BACKLOG, reuse_port=False
                )
            except OSError as exc:
                raise ListenError(self._host, self._requested_port, exc) from exc
            try:
                listen_sock.setblocking(False)
                self._port = listen_sock.getsockname()[1]
                acceptor = self._build(listen_sock)
            except BaseException:
                self._abandon(listen_sock)
                raise
            for processor in self._processors:
                processor.start()
            acceptor.start()
            self._acceptor = acceptor
            self._state = _STARTED
            logger.info(
                "%s: listener %s (%s) on %s:%d with %d processors (max_request_bytes=%d, "
                "connections_max_idle_ms=%d)",
                self._name,
                self._listener_name,
                self._security_protocol.value,
                self._host,
                self._port,
                self._num_processors,
                self._max_request_bytes,
                self._connections_max_idle_ms,
            )

    def _build(self, listen_sock: socket.socket) -> Acceptor:
        """The processors (registered with the channel) and the acceptor, threads not started yet."""
        listener = f"{self._host}:{self._port}"
        connection_index = itertools.count()
        for _ in range(self._num_processors):
            processor_id = self._channel.allocate_processor_id()
            processor = Processor(
                processor_id,
                self._channel,
                listener=listener,
                listener_name=self._listener_name,
                security_protocol=self._security_protocol,
                ssl_context=self._ssl_context,
                sasl=self._sasl,
                max_request_bytes=self._max_request_bytes,
                connections_max_idle_ms=self._connections_max_idle_ms,
                connection_index=connection_index,
                thread_name=f"{self._name}-network-processor-{processor_id}",
                inline=self._inline,
            )
            self._processors.append(processor)
            self._channel.register_processor(processor_id, processor)
        return Acceptor(listen_sock, self._processors, thread_name=f"{self._name}-network-acceptor")

    def _abandon(self, listen_sock: socket.socket) -> None:
        """Undo a start() that failed before any thread ran: nothing stays open or registered."""
        for processor in self._processors:
            self._channel.unregister_processor(processor.processor_id)
            processor.close_unstarted()
        self._processors = []
        self._port = 0
        self._state = _STOPPED
        listen_sock.close()

    def shutdown(self) -> None:
        """Stop accepting, close every connection and the listening socket, end the threads; idempotent."""
        with self._lock:
            previous, self._state = self._state, _STOPPED
            if previous != _STARTED:
                return
            acceptor, processors = self._acceptor, list(self._processors)
        if acceptor is not None:
            acceptor.initiate_shutdown()
            if not acceptor.join(_JOIN_TIMEOUT_S):
                logger.error(
                    "%s: the acceptor thread did not stop within %.0f s", self._name, _JOIN_TIMEOUT_S
                )
        for processor in processors:
            self._channel.unregister_processor(processor.processor_id)
            processor.initiate_shutdown()
        for processor in processors:
            if not processor.join(_JOIN_TIMEOUT_S):
                logger.error(
                    "%s: processor %d did not stop within %.0f s",
                    self._name,
                    processor.processor_id,
                    _JOIN_TIMEOUT_S,
                )
        logger.info("%s: socket server on %s:%d shut down", self._name, self._host, self._port)

    def stats(self) -> dict[str, int]:
        """The counters of :mod:`broker.network.network_counters` summed over the acceptor and the
        processors, plus ``connections_open`` (accepted and not closed yet)."""
        with self._lock:
            counters = [processor.counters for processor in self._processors]
            if self._acceptor is not None:
                counters.append(self._acceptor.counters)
        total = NetworkCounters.sum(counters)
        total["connections_open"] = total["connections_accepted"] - total["connections_closed"]
        return total
