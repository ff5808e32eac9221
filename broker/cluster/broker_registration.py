"""A broker's ephemeral registration ``/brokers/ids/<id>``, kept for as long as the broker runs.

States and transitions::

    NEW ──register()──▶ REGISTERED ──session LOST──▶ LOST ──CONNECTED (new session)──▶ REREGISTERING
                          ▲   │                                                            │
                          │   └──deregister()──▶ STOPPED ◀──deregister()───────────────────┤
                          └─────────────── create succeeded ◀──────────────────────────────┘
                                            (id taken by another session, or ZooKeeper down:
                                             log, back off, try again until deregister())

* ``register()`` creates the ephemeral node (and its parents) holding ``{"host", "port", "timestamp_ms"}``.
  If the node exists and its ``ephemeralOwner`` is another session, the id belongs to a live broker:
  :class:`~broker.cluster.errors.BrokerIdTakenError` names the id and the holder's ``host:port``. If the
  owner is our own session, it is our create whose reply was lost (kazoo retried it): registered.
* While the session only disconnects (SUSPENDED), ZooKeeper keeps the node and nothing is done. When the
  session is LOST (expired: ZooKeeper deleted the node) the next CONNECTED (a new session) makes the
  re-registration thread create the node again. kazoo's state listener only sets flags; every ZooKeeper call
  runs on that thread.
* ``deregister()`` stops re-registration and deletes the node if our session owns it. Idempotent.

Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import ForceRetryError, KazooRetry

from broker.cluster import zk_paths
from broker.cluster.errors import BrokerIdTakenError, ClusterError, ZooKeeperError, zookeeper_error

logger = logging.getLogger(__name__)

#: First and longest wait between two re-registration attempts.
RETRY_INITIAL_S = 0.2
RETRY_MAX_S = 5.0
#: How long one registration attempt keeps retrying through connection loss.
REGISTER_DEADLINE_S = 15.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerRegistration:
    """Registers a broker id in ZooKeeper and keeps it registered across session expiry (see the module)."""

    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
            raise ClusterError(f"broker id {broker_id!r} is not a non-negative integer")
        if not host:
            raise ClusterError(f"broker {broker_id}: the advertised host is empty")
        if not 0 < port < 65536:
            raise ClusterError(f"broker {broker_id}: port {port} is not a TCP port")
        self._client = client
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.path = zk_paths.broker_path(broker_id)
        self.rack = rack or None
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._session_lost = False  # set by the listener on LOST, consumed on the next CONNECTED
        self._thread: threading.Thread | None = None
        self._registered = False
        self._ever_registered = False

    @property
    def registered(self) -> bool:
        """True while this object believes the node exists (false from session loss to re-registration)."""
        return self._registered

    # ----------------------------------------------------------------------------------- public

    def register(self) -> None:
        """Create ``/brokers/ids/<id>``; BrokerIdTakenError if another live session holds it."""
        with self._lock:
            if self._stopped.is_set():
                raise ClusterError(
                    f"broker {self.broker_id}: the registration was deregistered; make a new one"
                )
            if self._thread is not None:
                return
            self._create()
            self._client.add_listener(self._on_state)
            self._thread = threading.Thread(
                target=self._run, name=f"broker-registration-{self.broker_id}", daemon=True
            )
            self._thread.start()
        logger.info("broker %d registered at %s as %s:%d", self.broker_id, self.path, self.host, self.port)

    def deregister(self) -> None:
        """Stop re-registering and delete the node if our session owns it. Idempotent."""
        with self._lock:
            already = self._stopped.is_set()
            self._stopped.set()
            self._wake.set()
            self._client.remove_listener(self._on_state)
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if already or not self._ever_registered:
            return
        try:
            self._delete_own_node()
        finally:
            self._registered = False

    # ----------------------------------------------------------------------------------- internals

    def _create(self) -> None:
        """Create the node (or find our own); raises BrokerIdTakenError or ZooKeeperError."""
        data = zk_paths.encode_broker(self.host, self.port, self._clock_ms(), self.rack)

        def create_once() -> None:
            try:
                self._client.create(self.path, data, ephemeral=True, makepath=True)
            except NodeExistsError:
                try:
                    held, stat = self._client.get(self.path)
                except NoNodeError:
                    raise ForceRetryError from None  # the holder went away just now: create again
                self._check_owner(held, stat.ephemeralOwner)

        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=REGISTER_DEADLINE_S)
        try:
            retry(create_once)
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("create", self.path, exc) from exc
        self._registered = True
        self._ever_registered = True

    def _check_owner(self, held: bytes, owner: int) -> None:
        session = self._client.client_id
        if session is not None and owner == session[0]:
            return  # our own node: a create whose reply was lost and which kazoo retried
        try:
            host, port = zk_paths.decode_broker(self.path, held)
            holder = f"{host}:{port}"
        except zk_paths.ZkDataError:
            holder = f"an unreadable address {held[:100]!r}"
        raise BrokerIdTakenError(self.broker_id, holder, owner)

    def _delete_own_node(self) -> None:
        try:
            _, stat = self._client.get(self.path)
            session = self._client.client_id
            if session is None or stat.ephemeralOwner != session[0]:
                logger.info("broker %d: %s is not ours; leaving it", self.broker_id, self.path)
                return
            self._client.delete(self.path, version=stat.version)
        except (NoNodeError, ConnectionClosedError):
            return  # gone already, or the session is closed and ZooKeeper deletes it with the session
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("delete", self.path, exc) from exc
        logger.info("broker %d deregistered (%s deleted)", self.broker_id, self.path)

    def _on_state(self, state: KazooState) -> None:
        """kazoo's state listener: never blocks, never calls ZooKeeper (the thread does)."""
        if state == KazooState.LOST:
            self._session_lost = True
            self._registered = False
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            logger.warning(
                "broker %d: the zookeeper session expired and %s went with it; registering again",
                self.broker_id,
                self.path,
            )
            self._reregister()

    def _reregister(self) -> None:
        backoff_s = RETRY_INITIAL_S
        while not self._stopped.is_set():
            try:
                with self._lock:
                    if self._stopped.is_set():
                        return
                    self._create()
            except BrokerIdTakenError as exc:
                logger.error(  # noqa: TRY400 - an expected condition: the message says it all
                    "broker %d cannot register again: %s; retrying in %.1f s", self.broker_id, exc, backoff_s
                )
            except ZooKeeperError as exc:
                logger.warning(
                    "broker %d cannot register again: %s; retrying in %.1f s", self.broker_id, exc, backoff_s
                )
            except Exception:  # the thread's top loop: log anything else and keep trying
                logger.exception(
                    "broker %d: re-registration failed; retrying in %.1f s", self.broker_id, backoff_s
                )
            else:
                logger.info(
                    "broker %d registered again at %s as %s:%d",
                    self.broker_id,
                    self.path,
                    self.host,
                    self.port,
                )
                return
            self._stopped.wait(backoff_s)
            backoff_s = min(backoff_s * 2, RETRY_MAX_S)
