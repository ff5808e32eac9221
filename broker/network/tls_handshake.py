"""A network processor's TLS connections: wrapping accepted sockets and driving their handshakes.

:class:`TlsHandshaking` is mixed into :class:`~broker.network.processor.Processor`; it runs on the processor's
thread only. On a listener with an :class:`ssl.SSLContext` (SSL, SASL_SSL), step 1 of the processor's loop
wraps each accepted socket (server side, no handshake yet) and the connection starts HANDSHAKING
(``Connection.tls_handshaking``): every selector event of it goes to :meth:`TlsHandshaking._tls_handshake`,
one non-blocking ``do_handshake`` that either

* wants to read or write: the connection is selected for that and waits (the idle clock runs, so a client
  that stalls in the handshake is closed after ``connections_max_idle_ms``, as Kafka does);
* fails (an unknown CA, no client certificate where one is required, a plaintext client, garbage): the
  connection is closed, logged at INFO with the client's address and OpenSSL's reason, and counted as
  ``tls_failed_closed``; the listener goes on;
* succeeds: the client's principal is taken from its certificate
  (:func:`~broker.network.ssl_factory.principal_of`), the connection gets its session and is RECEIVING.

**Bytes the socket does not show.** A connection's :class:`~broker.network.tls_transport.TlsTransport`
buffers what it read from the socket and has not decrypted and handed out yet, where ``select`` cannot see
it; so the processor reads a TLS connection again without waiting for the selector whenever it would stop
reading it with bytes pending (``TlsTransport.pending()``), as it does for frames already in its read-ahead
buffer.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import time
from typing import TYPE_CHECKING, cast

from broker.network.connection import Connection
from broker.network.network_counters import NetworkCounters
from broker.network.session import Session
from broker.network.ssl_factory import principal_of
from broker.network.tls_transport import TlsTransport

if TYPE_CHECKING:
    from broker.endpoint import SecurityProtocol

logger = logging.getLogger(__name__)

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class TlsHandshaking:
    """The TLS handshake of a processor's connections (see the module docstring); mixed into ``Processor``."""

    # The processor's state these methods use (set by Processor.__init__).
    processor_id: int
    counters: NetworkCounters
    _ssl_context: ssl.SSLContext | None
    _listener_name: str
    _security_protocol: SecurityProtocol
    _buffered: list[Connection]

    if TYPE_CHECKING:

        def _set_interest(self, conn: Connection, events: int) -> None: ...

        def _touch(self, conn: Connection, now: int) -> None: ...

        def _close(
            self, conn: Connection, reason: str, counter: str, level: int | None = logging.INFO
        ) -> None: ...

    def _wrap_tls(self, sock: socket.socket, peer: str) -> socket.socket | None:
        """``sock`` as the server side of a TLS connection (a :class:`TlsTransport`, which reads and writes
        as a socket does), handshake not started; None (closed) if it cannot be wrapped."""
        assert self._ssl_context is not None
        try:
            return cast(socket.socket, TlsTransport(self._ssl_context, sock))
        except (OSError, ValueError) as exc:
            with contextlib.suppress(OSError):
                sock.close()
            self.counters.count_close("tls_failed_closed")
            logger.info("processor %d: cannot start TLS with %s: %s", self.processor_id, peer, exc)
            return None

    def _tls_handshake(self, conn: Connection) -> None:
        """One step of ``conn``'s handshake (see the module docstring)."""
        sock = cast(TlsTransport, conn.sock)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_interest(conn, _READ)
            return
        except ssl.SSLWantWriteError:
            self._set_interest(conn, _WRITE)
            return
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
            self._close(conn, f"TLS handshake failed: {reason}", "tls_failed_closed", logging.INFO)
            return
        conn.tls_handshaking = False
        try:
            certificate = sock.getpeercert()
        except (ValueError, OSError):
            certificate = None
        principal = principal_of(certificate)
        conn.session = Session(
            principal, self._listener_name, self._security_protocol, conn.session.client_host
        )
        logger.debug(
            "processor %d: TLS with %s (%s, %s) as %s",
            self.processor_id,
            conn.peer,
            sock.version(),
            (sock.cipher() or ("?",))[0],
            principal,
        )
        self._set_interest(conn, _READ)
        if not conn.closed:
            self._touch(conn, time.monotonic_ns())
            self._buffered.append(conn)  # the client's first request may be decrypted already
