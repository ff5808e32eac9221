"""A request a connection has sent (:mod:`broker.client.network.connection`): its response or failure, once.

Completed once, by the connection's reader thread (or by whoever closes the connection), which then runs its
callback; :meth:`PendingRequest.wait` may be called from any thread and is always bounded by the
connection's own request timeout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from broker.client.errors import ClientError, RequestTimeoutError
from broker.protocol import ApiKey, ResponseBody

log = logging.getLogger(__name__)

Callback = Callable[["PendingRequest"], None]


class PendingRequest:
    """A request that was sent: its response (``response``) or failure (``error``) once ``done``.

    Thread safety: completed once, by the connection's reader thread (or by whoever closes the
    connection); :meth:`wait` may be called from any thread.
    """

    __slots__ = (
        "_event",
        "_lock",
        "api_key",
        "api_version",
        "broker",
        "callback",
        "correlation_id",
        "deadline",
        "done",
        "error",
        "response",
        "sent_at",
    )

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        deadline: float,
        callback: Callback | None,
        lock: threading.Lock,
        broker: str,
    ) -> None:
        self.broker = broker
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.deadline = deadline
        self.callback = callback
        self.sent_at = 0.0
        self.done = False
        self.response: Any = None
        self.error: ClientError | None = None
        self._event: threading.Event | None = None
        self._lock = lock

    def _complete(self, response: Any, error: ClientError | None) -> None:
        with self._lock:
            if self.done:
                return
            self.response = response
            self.error = error
            self.done = True
            event = self._event
        if event is not None:
            event.set()
        callback = self.callback
        if callback is not None:
            try:
                callback(self)
            except Exception:
                log.exception(
                    "callback of %s request %d failed", ApiKey(self.api_key).title, self.correlation_id
                )

    def wait(self, timeout_s: float | None = None) -> Any:
        """The response, after waiting up to ``timeout_s`` (``None``: until done); raises the request's error.

        The connection's own request timeout always ends the wait, so ``None`` cannot hang forever.
        """
        if not self.done:
            with self._lock:
                if not self.done and self._event is None:
                    self._event = threading.Event()
                event = self._event
            if event is not None and not event.wait(timeout_s):
                raise RequestTimeoutError(
                    self.broker,
                    f"no response to {ApiKey(self.api_key).title} request {self.correlation_id} "
                    f"within {timeout_s} s",
                )
        if self.error is not None:
            raise self.error
        return self.response


def response_of(pending: PendingRequest) -> ResponseBody:
    """The response of a completed request (raising its error): for callbacks."""
    if pending.error is not None:
        raise pending.error
    body: ResponseBody = pending.response
    return body
