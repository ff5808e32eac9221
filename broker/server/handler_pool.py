"""The request handler threads: take requests from the channel, hand each to KafkaApis.

Kafka's ``KafkaRequestHandlerPool``: I/O (the network processors) and request handling are separate, so a
slow request never stalls a selector. A handler that raises is logged and the thread goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker.network.request_channel import NetworkRequest, RequestChannel

logger = logging.getLogger(__name__)

_POLL_S = 0.3


class HandlerPool:
    """``num_threads`` threads running ``handle`` on every request of ``channel`` until :meth:`shutdown`."""

    def __init__(
        self, channel: RequestChannel, handle: Callable[[NetworkRequest], None], num_threads: int
    ) -> None:
        self._channel = channel
        self._handle = handle
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"lumber-request-handler-{i}", daemon=True)
            for i in range(num_threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            request = self._channel.receive_request(_POLL_S)
            if request is None:
                continue
            try:
                self._handle(request)
            except Exception:
                logger.exception("request from %s: the handler failed", request.peer)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=timeout_s)
