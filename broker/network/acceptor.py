"""The acceptor: one thread accepting TCP connections and dealing them to the processors (Kafka's Acceptor).

The listening socket is non-blocking and selected together with a wakeup pipe (for shutdown). When it is
readable the acceptor accepts every pending connection, makes each socket non-blocking with
``TCP_NODELAY``, and hands it to the next processor in round-robin order; it never reads or writes a
connection itself.

Failures: an ``accept()`` error (out of file descriptors, say) is logged and counted and the acceptor backs
off for :data:`_ACCEPT_ERROR_BACKOFF_S` before trying again, so that a lasting error does not spin; a socket
that fails to configure is closed. The acceptor keeps serving in both cases.

Ownership: the acceptor owns the listening socket from :meth:`Acceptor.start` on and closes it when its
thread ends, so once :meth:`Acceptor.join` returns the port is closed.

Thread safety: :meth:`Acceptor.initiate_shutdown` may be called from any thread; the rest runs on the
acceptor's thread.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Sequence

from broker.network.network_counters import NetworkCounters
from broker.network.processor import Processor
from broker.network.selector_wakeup import SelectorWakeup

logger = logging.getLogger(__name__)

#: The longest select() of the acceptor (it is woken at once for shutdown anyway).
_POLL_TIMEOUT_S = 0.5
#: Connections accepted per readable event before checking for shutdown again.
_MAX_ACCEPTS_PER_POLL = 256
#: Pause after a failed accept(), e.g. when the process is out of file descriptors.
_ACCEPT_ERROR_BACKOFF_S = 0.05


class Acceptor:
    """Accepts connections on ``listen_sock`` and gives them to ``processors`` in turn."""

    def __init__(
        self, listen_sock: socket.socket, processors: Sequence[Processor], *, thread_name: str
    ) -> None:
        self._listen_sock = listen_sock
        self._processors = tuple(processors)
        self._next_processor = 0
        self._running = True
        self._wakeup = SelectorWakeup()
        self.counters = NetworkCounters()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def initiate_shutdown(self) -> None:
        """Ask the thread to stop accepting and close the listening socket (any thread)."""
        self._running = False
        self._wakeup.wakeup()

    def join(self, timeout_s: float) -> bool:
        """Wait for the thread to end; whether it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            selector.register(self._listen_sock, selectors.EVENT_READ, "listen")
            selector.register(self._wakeup.fileno(), selectors.EVENT_READ, "wakeup")
            while self._running:
                try:
                    for key, _ in selector.select(_POLL_TIMEOUT_S):
                        if key.data == "wakeup":
                            self._wakeup.drain()
                        elif self._running:
                            self._accept_pending()
                except Exception:
                    logger.exception("acceptor: unexpected error; it keeps accepting")
                    time.sleep(_ACCEPT_ERROR_BACKOFF_S)
        finally:
            selector.close()
            self._listen_sock.close()
            self._wakeup.close()

    def _accept_pending(self) -> None:
        for _ in range(_MAX_ACCEPTS_PER_POLL):
            try:
                sock, address = self._listen_sock.accept()
            except BlockingIOError:
                return
            except ConnectionAbortedError:
                continue  # the peer gave up while queued
            except OSError as exc:
                self.counters.accept_errors += 1
                logger.warning("acceptor: accept() failed: %s; retrying shortly", exc)
                time.sleep(_ACCEPT_ERROR_BACKOFF_S)
                return
            peer = f"{address[0]}:{address[1]}"
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    sock.close()
                logger.info("acceptor: dropping the connection from %s: cannot configure it: %s", peer, exc)
                continue
            self.counters.connections_accepted += 1
            processor = self._processors[self._next_processor]
            self._next_processor = (self._next_processor + 1) % len(self._processors)
            processor.accept(sock, peer)
