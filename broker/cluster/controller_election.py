"""Electing the cluster's controller: the ephemeral ``/controller`` and the fencing ``/controller_epoch``.

Kafka's ``KafkaController.elect`` with ``KafkaZkClient.registerControllerAndIncrementControllerEpoch``:
the broker that creates ``/controller`` is the controller, and in the same multi it increments
``/controller_epoch`` by compare-and-set (creating it as ``1`` when absent). The epoch's new znode version is
what every later write of this controller checks
(:func:`~broker.cluster.partition_state_store.write_states`), so a controller that lost its office (a
session that expired while it was paused) cannot write anything: its multis fail on the check.

States and transitions (one thread, ``controller-election-<id>``, makes every ZooKeeper call and every
callback; kazoo's watch and state callbacks only set flags and wake it)::

                start()
                   │
                   ▼            multi(create /controller, bump epoch) succeeded
    ┌───────▶ CONTENDING ──────────────────────────────────────────────────▶ ELECTED
    │           │   ▲  │ ConnectionLoss: read /controller again; if its              │ on_elected(epoch,
    │           │   │  │ ephemeralOwner is our session, the create whose reply was    │   epoch_zk_version)
    │           │   │  │ lost went through: ELECTED                                   │
    │  /controller held by another                                                    │
    │           ▼   │ /controller deleted (watch)                                     │
    │        WATCHING                                                                 │
    │                                                                                 │
    │   /controller deleted or held by another (watch), or session LOST:             │
    └──────────────────────────── on_resigned() ◀──────────────────────────────────────┘

    any state ──resign()──▶ STOPPED  (our node deleted if our session holds it; on_resigned() if ELECTED)

* CONTENDING reads ``/controller`` with a watch. Held by our own session: a create whose reply was lost;
  elected with the epoch as ZooKeeper holds it now (only the controller writes it). Held by another:
  WATCHING. Absent: the multi. A multi that loses on ``/controller`` (NodeExists) goes back to reading; one
  that loses on the epoch (BadVersion/NodeExists: two contenders read the same epoch) is tried again, at
  most :data:`MAX_ATTEMPTS` times in a row before backing off.
* While the session is only SUSPENDED (disconnected), ZooKeeper keeps ``/controller`` and the controller
  stays elected: its writes are fenced anyway. On LOST (expired) ZooKeeper has deleted the node: the
  controller resigns (``on_resigned``) and contends again once CONNECTED with a new session.
* Every CONNECTED re-checks ``/controller`` (and sets its watch again), whatever happened while
  disconnected.
* ``on_elected`` and ``on_resigned`` run on the election thread, in order, never concurrently, never on
  kazoo's threads; an exception in them is logged and the election goes on. ``on_elected`` may call
  ZooKeeper (it is not a kazoo callback).

Thread-safe: :meth:`start`, :meth:`resign` and the properties may be called from any thread (but
:meth:`resign` not from ``on_elected``/``on_resigned``: it waits for the thread that runs them).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster import zk_paths
from broker.cluster.errors import ClusterError
from broker.cluster.zk_transactions import first_error

logger = logging.getLogger(__name__)

#: First and longest wait before a failed election step is tried again.
RETRY_INITIAL_S = 0.1
RETRY_MAX_S = 5.0
#: Multis lost on the epoch in a row before backing off.
MAX_ATTEMPTS = 10
#: How long :meth:`ControllerElection.resign` waits for the election thread.
STOP_TIMEOUT_S = 10.0

OnElected = Callable[[int, int], None]
OnResigned = Callable[[], None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ElectionState(enum.Enum):
    NEW = "new"
    CONTENDING = "contending"
    WATCHING = "watching"
    ELECTED = "elected"
    STOPPED = "stopped"


class ControllerElection:
    """Contends for ``/controller`` for ``broker_id`` (see the module docstring)."""

    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        on_elected: OnElected,
        on_resigned: OnResigned,
        *,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
            raise ClusterError(f"broker id {broker_id!r} is not a non-negative integer")
        self._client = client
        self.broker_id = broker_id
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._clock_ms = clock_ms
        self._watch_fn = self._on_watch  # one object, so kazoo keeps one watch per path
        self._lock = threading.Lock()  # guards _state, _epoch, _epoch_zk_version, _thread
        self._state = ElectionState.NEW
        self._epoch = -1
        self._epoch_zk_version = -1
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._session_lost = False  # set by the listener on LOST, consumed by the thread
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------------- public

    @property
    def state(self) -> ElectionState:
        return self._state

    @property
    def is_controller(self) -> bool:
        return self._state is ElectionState.ELECTED

    @property
    def epoch(self) -> int:
        """The controller epoch this broker was elected with; -1 while it is not the controller."""
        return self._epoch if self.is_controller else -1

    @property
    def epoch_zk_version(self) -> int:
        """The ``/controller_epoch`` znode version that fences this controller's writes; -1 if not elected."""
        return self._epoch_zk_version if self.is_controller else -1

    def start(self) -> None:
        """Start contending (on the election thread). Idempotent while running."""
        with self._lock:
            if self._state is ElectionState.STOPPED:
                raise ClusterError(f"broker {self.broker_id}: the controller election was resigned")
            if self._thread is not None:
                return
            self._state = ElectionState.CONTENDING
            self._client.add_listener(self._on_state)
            self._thread = threading.Thread(
                target=self._run, name=f"controller-election-{self.broker_id}", daemon=True
            )
            self._thread.start()
        self._wake.set()

    def resign(self) -> None:
        """Stop contending; delete ``/controller`` if our session holds it; ``on_resigned`` if elected.
        Idempotent."""
        with self._lock:
            if self._state is ElectionState.STOPPED:
                return
            self._stopping.set()
            self._wake.set()
            self._client.remove_listener(self._on_state)
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("controller election: thread did not stop within %.0f s", STOP_TIMEOUT_S)
        was_elected = self._state is ElectionState.ELECTED
        self._set_state(ElectionState.STOPPED)
        self._delete_own_node()
        if was_elected:
            logger.info("broker %d resigned as controller (epoch %d)", self.broker_id, self._epoch)
            self._call(self._on_resigned)

    # ----------------------------------------------------------------------------------- kazoo callbacks

    def _on_watch(self, _event: Any) -> None:
        """A watch on ``/controller`` fired (kazoo's thread): wake the election thread."""
        self._wake.set()

    def _on_state(self, state: KazooState) -> None:
        """kazoo's state listener: never blocks, never calls ZooKeeper."""
        if state == KazooState.LOST:
            self._session_lost = True
            self._wake.set()
        elif state == KazooState.CONNECTED:
            self._wake.set()

    # ----------------------------------------------------------------------------------- the thread

    def _run(self) -> None:
        backoff_s = RETRY_INITIAL_S
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                if self._session_lost:
                    self._session_lost = False
                    self._lose_office("the zookeeper session expired")
                if not self._client.connected:
                    continue  # the CONNECTED listener wakes us
                self._step()
            except (KazooException, KazooTimeoutError) as exc:
                logger.warning(
                    "controller election: broker %d: %r; retrying in %.1f s", self.broker_id, exc, backoff_s
                )
            except Exception:  # the thread's top loop: log and keep contending
                logger.exception(
                    "controller election: broker %d failed; retrying in %.1f s", self.broker_id, backoff_s
                )
            else:
                backoff_s = RETRY_INITIAL_S
                continue
            self._stopping.wait(backoff_s)
            backoff_s = min(backoff_s * 2, RETRY_MAX_S)
            self._wake.set()

    def _step(self) -> None:
        """CONTENDING, WATCHING or ELECTED: look at ``/controller`` and act (see the module docstring)."""
        for _ in range(MAX_ATTEMPTS):
            if self._stopping.is_set():
                return
            holder = self._read_holder()
            if holder == "ours":
                if self._state is not ElectionState.ELECTED:
                    self._elected_found_again()
                return
            if self._state is ElectionState.ELECTED:
                self._lose_office(f"/controller is now {holder or 'deleted'}")
            if holder is not None:
                self._set_state(ElectionState.WATCHING)
                return
            self._set_state(ElectionState.CONTENDING)
            if self._try_create():
                return
        raise ClusterError(f"broker {self.broker_id}: lost {MAX_ATTEMPTS} controller elections in a row")

    def _read_holder(self) -> str | None:
        """``"ours"``, a description of the other holder, or None when ``/controller`` is absent; sets
        the watch either way."""
        path = zk_paths.CONTROLLER_PATH
        try:
            data, stat = self._client.get(path, watch=self._watch_fn)
        except NoNodeError:
            if self._client.exists(path, watch=self._watch_fn) is None:
                return None
            return "just created"  # WATCHING; the watch fires again and we read it
        session = self._client.client_id
        if session is not None and stat.ephemeralOwner == session[0]:
            return "ours"
        try:
            return f"held by broker {zk_paths.decode_controller(path, data)}"
        except zk_paths.ZkDataError:
            return f"held by session 0x{stat.ephemeralOwner:x}"

    def _try_create(self) -> bool:
        """The multi; True if elected, False to look again (lost on the epoch, or on /controller)."""
        epoch_path = zk_paths.CONTROLLER_EPOCH_PATH
        try:
            data, stat = self._client.get(epoch_path)
            epoch, version = zk_paths.decode_controller_epoch(epoch_path, data), stat.version
        except NoNodeError:
            epoch, version = 0, -1
        new_epoch = epoch + 1
        transaction = self._client.transaction()
        transaction.create(
            zk_paths.CONTROLLER_PATH,
            zk_paths.encode_controller(self.broker_id, self._clock_ms()),
            ephemeral=True,
        )
        if version < 0:
            transaction.create(epoch_path, zk_paths.encode_controller_epoch(new_epoch))
        else:
            transaction.set_data(epoch_path, zk_paths.encode_controller_epoch(new_epoch), version=version)
        results = transaction.commit()
        error = first_error(results)
        if error is None:
            new_version = 0 if version < 0 else results[1].version
            self._become_controller(new_epoch, new_version)
            return True
        if isinstance(results[0], NodeExistsError):
            return False  # another broker won: read it, watch it
        if isinstance(error, BadVersionError | NodeExistsError):
            logger.info(
                "controller election: broker %d lost epoch %d to another contender", self.broker_id, new_epoch
            )
            return False
        raise error

    def _elected_found_again(self) -> None:
        """Our session holds ``/controller`` but we did not know: a multi whose reply was lost went through.
        The epoch node is as we wrote it (only the controller writes it)."""
        data, stat = self._client.get(zk_paths.CONTROLLER_EPOCH_PATH)
        epoch = zk_paths.decode_controller_epoch(zk_paths.CONTROLLER_EPOCH_PATH, data)
        logger.info(
            "controller election: broker %d found its own /controller after a lost reply", self.broker_id
        )
        self._become_controller(epoch, stat.version)

    def _become_controller(self, epoch: int, epoch_zk_version: int) -> None:
        with self._lock:
            self._epoch = epoch
            self._epoch_zk_version = epoch_zk_version
            self._state = ElectionState.ELECTED
        logger.info(
            "broker %d is the controller: epoch %d (znode version %d)",
            self.broker_id,
            epoch,
            epoch_zk_version,
        )
        self._call(lambda: self._on_elected(epoch, epoch_zk_version))

    def _lose_office(self, why: str) -> None:
        if self._state is not ElectionState.ELECTED:
            return
        self._set_state(ElectionState.CONTENDING)
        logger.warning(
            "broker %d is no longer the controller (epoch %d): %s", self.broker_id, self._epoch, why
        )
        self._call(self._on_resigned)

    def _set_state(self, state: ElectionState) -> None:
        with self._lock:
            if self._state is not ElectionState.STOPPED:
                self._state = state

    def _call(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # a callback's bug must not stop the election
            logger.exception("controller election: broker %d: a callback failed", self.broker_id)

    def _delete_own_node(self) -> None:
        path = zk_paths.CONTROLLER_PATH
        try:
            _, stat = self._client.get(path)
            session = self._client.client_id
            if session is None or stat.ephemeralOwner != session[0]:
                return
            self._client.delete(path, version=stat.version)
        except (NoNodeError, ConnectionClosedError):
            return
        except (KazooException, KazooTimeoutError) as exc:
            logger.warning("controller election: cannot delete %s: %r (it goes with the session)", path, exc)
            return
        logger.info("broker %d deleted %s", self.broker_id, path)
