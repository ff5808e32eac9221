"""A network processor's SASL connections: requests of a connection not yet authenticated go to its
:class:`~broker.network.sasl_authenticator.SaslAuthenticator`, on the processor's own thread.

:class:`SaslServing` is mixed into :class:`~broker.network.processor.Processor`. On a SASL listener each
connection starts with an authenticator (after its TLS handshake on SASL_SSL) and its frames bounded by
:data:`~broker.network.sasl_authenticator.MAX_RECEIVE_BYTES`. Step 3 of the loop reads such a connection's
next frame, makes it the request in flight (the connection is muted, as for any request) and answers it
through the processor's own response queue, so that sending, closing after a failure and unmuting are the
processor's usual steps 2 and 5. When the authenticator says the client is authenticated, the connection gets
its session (``User:<name>``), loses its authenticator and gets the listener's full request size: from its
next request on it is served like any other. The credential lookups are the broker's in-memory cache
(no ZooKeeper round trip on a processor thread); SCRAM's HMACs take microseconds, SASL/PLAIN's PBKDF2 a few
milliseconds, which the processor's other connections wait for (as in Kafka, where authentication runs on
the network threads too).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from broker.network.connection import Connection
from broker.network.network_counters import NetworkCounters
from broker.network.request_channel import NetworkRequest, NetworkResponse
from broker.network.sasl_authenticator import SaslAuthenticator
from broker.network.session import Session

logger = logging.getLogger(__name__)

#: Reads of one connection's socket per turn while its SASL frame is incomplete.
_MAX_READS = 64


class SaslServing:
    """Authenticating a processor's SASL connections (see the module docstring); mixed into ``Processor``."""

    processor_id: int
    counters: NetworkCounters
    _max_request_bytes: int
    _local_responses: list[NetworkResponse]

    if TYPE_CHECKING:

        def _mute(self, conn: Connection) -> None: ...

        def _in_flight(self, conn: Connection, frame: bytes, received_ns: int) -> NetworkRequest: ...

    def _serve_sasl(self, conn: Connection, authenticator: SaslAuthenticator) -> None:
        """Read ``conn``'s next frame and answer it with ``authenticator``; raises what
        ``Connection.read`` raises (BlockingIOError when nothing more is there)."""
        frame = None
        for _ in range(_MAX_READS):
            frame = conn.read()
            if frame is not None:
                break
        if frame is None:
            return
        self._mute(conn)
        request = self._in_flight(conn, frame, time.monotonic_ns())
        step = authenticator.handle(frame)
        if step.failed:
            self.counters.authentication_failed += 1
        if step.principal is not None:
            session = conn.session
            conn.session = Session(
                step.principal, session.listener_name, session.security_protocol, session.client_host
            )
            conn.sasl = None
            conn.receive.max_bytes = self._max_request_bytes
            logger.debug("processor %d: %s authenticated as %s", self.processor_id, conn.peer, step.principal)
        close = step.close_reason is not None
        chunks = (step.response,) if step.response is not None else ()
        self._local_responses.append(
            NetworkResponse(request, chunks, close_after=close, reason=step.close_reason or "")
        )
