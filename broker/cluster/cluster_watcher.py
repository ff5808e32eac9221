"""Each broker's live picture of the cluster: brokers, topics, partition states, topic configs, the
controller and controlled-shutdown requests in ZooKeeper, kept current by watches.

How it stays current:

* every read sets a watch: the children of ``/brokers/ids``, ``/brokers/topics`` and
  ``/admin/controlled_shutdown``, the data of each broker and topic node, of every partition's state node,
  of each ``/config/topics/<t>`` and of ``/controller`` (``exists`` on a missing node, so its creation is
  seen too). A read and its watch are one ZooKeeper call, so no change after a read can go unnoticed;
* kazoo runs watch callbacks and state listeners on its own threads; they only record *what* changed
  (brokers, the topic list, topic X, the state of X-p, the config of X, the controller, the shutdowns, or
  everything) and wake the reload thread. They never call ZooKeeper;
* the reload thread re-reads only what changed (a state change re-reads one node; a topic re-read
  re-reads its states and config) and publishes a new :class:`ClusterView` if it differs. Reads of many
  nodes are pipelined (:mod:`broker.cluster.zk_reads`), so 1,000 partition states load in one round trip
  plus ZooKeeper's work;
  :meth:`ClusterWatcher.refresh` re-reads everything on the caller's thread. Both read and publish under one
  lock, and one session's reads see ZooKeeper's state in order, so successive views never go back in time
  (a topic, once seen deleted, does not reappear unless created again);
* kazoo drops every watch when the connection is lost (SUSPENDED) and ZooKeeper drops them with an expired
  session (LOST), so every CONNECTED triggers a full re-read, which sets them all again. While ZooKeeper
  is unreachable the last view stays in place; failed reads are retried with backoff;
* ``on_change(old, new)`` is called on the notification thread, once per published view, in order and
  never concurrently; ``old`` is the view before ``new``, so successive calls chain. The state read by
  :meth:`~ClusterWatcher.start` is not a change: callers take it from :attr:`~ClusterWatcher.view`. An
  exception in ``on_change`` is logged and the next change is still delivered.

A topic node that does not hold an assignment is logged and keeps its last good assignment (or stays out of
the view if it never had one); a state node that does not hold a state likewise keeps its last good state;
a broker node without an address is left out. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType

from broker.cluster import zk_paths, zk_reads
from broker.cluster.cluster_view import EMPTY_VIEW, NO_BROKER, ClusterView
from broker.cluster.errors import ClusterError, zookeeper_error
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: First and longest wait before a failed re-read is tried again.
RETRY_INITIAL_S = 0.1
RETRY_MAX_S = 5.0
#: How long :meth:`ClusterWatcher.stop` waits for each of its threads.
STOP_TIMEOUT_S = 10.0

OnChange = Callable[[ClusterView, ClusterView], None]

_TOPIC_PREFIX = zk_paths.TOPICS_PATH + "/"
_BROKER_PREFIX = zk_paths.BROKER_IDS_PATH + "/"
_CONFIG_PREFIX = zk_paths.CONFIG_TOPICS_PATH + "/"
_SHUTDOWN_PREFIX = zk_paths.CONTROLLED_SHUTDOWN_PATH + "/"


@dataclass
class _Dirty:
    """What must be re-read."""

    full: bool = False
    brokers: bool = False
    topic_list: bool = False
    controller: bool = False
    shutting_down: bool = False
    topics: set[str] = field(default_factory=set)
    states: set[TopicPartition] = field(default_factory=set)
    configs: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return (
            self.full
            or self.brokers
            or self.topic_list
            or self.controller
            or self.shutting_down
            or bool(self.topics)
            or bool(self.states)
            or bool(self.configs)
        )

    def merge(self, other: _Dirty) -> None:
        self.full |= other.full
        self.brokers |= other.brokers
        self.topic_list |= other.topic_list
        self.controller |= other.controller
        self.shutting_down |= other.shutting_down
        self.topics |= other.topics
        self.states |= other.states
        self.configs |= other.configs


class ClusterWatcher:
    """The cluster's brokers and topics, watched in ZooKeeper (see the module docstring)."""

    def __init__(self, client: KazooClient, *, on_change: OnChange | None = None) -> None:
        self._client = client
        self._on_change = on_change
        self._watch_fn = self._on_watch_event  # one object, so kazoo keeps one watch per path
        self._reload_lock = threading.Lock()  # one reader at a time: reads and publishing stay in order
        self._dirty_lock = threading.Lock()
        self._dirty = _Dirty()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._changed = threading.Condition()  # guards _view and _pending
        self._view = EMPTY_VIEW
        self._pending: deque[tuple[ClusterView, ClusterView]] = deque()
        self._started = False
        self._threads: list[threading.Thread] = []

    # ----------------------------------------------------------------------------------- public

    def start(self) -> None:
        """Read the cluster once (the view is valid on return), then follow it; ZooKeeperError if unable."""
        with self._reload_lock:
            if self._started:
                raise ClusterError("the cluster watcher is already started")
            for path in (zk_paths.BROKER_IDS_PATH, zk_paths.TOPICS_PATH):
                try:
                    self._client.ensure_path(path)
                except (KazooException, KazooTimeoutError) as exc:
                    raise zookeeper_error("create", path, exc) from exc
            self._client.add_listener(self._on_state)
            try:
                self._view = self._read(_Dirty(full=True), EMPTY_VIEW)
            except (KazooException, KazooTimeoutError) as exc:
                self._client.remove_listener(self._on_state)
                raise zookeeper_error("read the cluster from", zk_paths.BROKERS_PATH, exc) from exc
            self._started = True
        self._threads = [threading.Thread(target=self._run_reloads, name="cluster-watcher", daemon=True)]
        if self._on_change is not None:
            self._threads.append(
                threading.Thread(target=self._run_notifications, name="cluster-watcher-notify", daemon=True)
            )
        for thread in self._threads:
            thread.start()
        view = self._view
        logger.info(
            "cluster: %d live brokers %s, %d topics",
            len(view.brokers),
            sorted(view.brokers),
            len(view.topics),
        )

    @property
    def view(self) -> ClusterView:
        """The latest snapshot (immutable; replaced as a whole on every change)."""
        return self._view

    def refresh(self) -> ClusterView:
        """Re-read everything now and return the result.

        While ZooKeeper is unreachable this returns the last view (logged); the watcher re-reads once the
        session is back.
        """
        if not self._started:
            raise ClusterError("the cluster watcher is not started")
        if not self._client.connected:
            logger.debug("cluster: zookeeper is not connected; serving the last view")
            return self._view
        try:
            return self._reload(_Dirty(full=True))
        except (KazooException, KazooTimeoutError) as exc:
            logger.warning("cluster: cannot re-read the cluster (%r); serving the last view", exc)
            self._mark(_Dirty(full=True))
            return self._view

    def controller_id(self) -> int:
        """The view's controller; when the view names none, ``/controller`` read again now (on the
        caller's thread, and published): an election the watch has not delivered yet is not answered as
        "no controller" (a client that caches that answer may wait for its next metadata refresh before
        it sends an admin request). -1 only when ZooKeeper holds no controller either, or cannot be read.
        """
        view = self._view
        if view.controller_id != NO_BROKER or not self._started or not self._client.connected:
            return view.controller_id
        try:
            return self._reload(_Dirty(controller=True)).controller_id
        except (KazooException, KazooTimeoutError) as exc:
            logger.warning("cluster: cannot read the controller (%r); answering none", exc)
            return NO_BROKER

    def wait_for(self, predicate: Callable[[ClusterView], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(view)`` holds; False if it still does not after ``timeout_s``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._view), timeout=timeout_s)

    def stop(self) -> None:
        """Stop following the cluster; pending notifications are dropped. Idempotent."""
        self._stopping.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()
        self._client.remove_listener(self._on_state)
        for thread in self._threads:
            if thread is threading.current_thread():
                continue
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive():
                logger.warning("cluster: thread %s did not stop within %.0f s", thread.name, STOP_TIMEOUT_S)

    # ----------------------------------------------------------------------------------- reading

    def _reload(self, dirty: _Dirty) -> ClusterView:
        """Re-read what ``dirty`` names and publish the result (under the reload lock)."""
        with self._reload_lock:
            new = self._read(dirty, self._view)
            with self._changed:
                old = self._view
                if new != old:
                    self._view = new
                    if self._on_change is not None:
                        self._pending.append((old, new))
                    self._changed.notify_all()
            return new

    def _read(self, dirty: _Dirty, current: ClusterView) -> ClusterView:
        """``current`` with the parts named by ``dirty`` read again (setting their watches)."""
        watch = self._watch_fn
        client = self._client
        brokers = current.brokers
        if dirty.full or dirty.brokers:
            brokers = zk_reads.read_brokers(client, watch)
        topics = dict(current.topics)
        if dirty.full or dirty.topic_list:
            names = zk_reads.read_topic_names(client, watch)
            to_read = set(names) if dirty.full else (set(names) - set(topics)) | (dirty.topics & set(names))
            topics = {name: topics[name] for name in names if name in topics}
        else:
            to_read = set(dirty.topics)
        states = {tp: s for tp, s in current.states.items() if tp.topic in topics}
        configs = {name: c for name, c in current.topic_configs.items() if name in topics}
        moving = {tp: r for tp, r in current.reassignments.items() if tp.topic in topics}
        versions = {name: v for name, v in current.topic_versions.items() if name in topics}
        for name, found in zk_reads.read_assignments(client, sorted(to_read), watch).items():
            if isinstance(found, zk_paths.ZkDataError):
                kept = "keeping its last assignment" if name in topics else "leaving it out"
                logger.error("cluster: topic %r: %s; %s", name, found, kept)
                continue
            for tp in [tp for tp in moving if tp.topic == name]:
                del moving[tp]
            if found is None:
                topics.pop(name, None)
                versions.pop(name, None)
            else:
                topics[name] = found.assignment
                versions[name] = found.zk_version
                for p, (adding, removing) in found.moving.items():
                    if p in found.assignment:
                        moving[TopicPartition(name, p)] = PartitionReassignment(
                            found.assignment[p], adding, removing
                        )
        # the states of re-read topics, and those whose own watch fired
        state_tps = {TopicPartition(name, p) for name in to_read if name in topics for p in topics[name]}
        state_tps |= {tp for tp in dirty.states if tp.partition in topics.get(tp.topic, {})}
        for tp in list(states):
            if tp.partition not in topics.get(tp.topic, {}):
                del states[tp]  # a partition the assignment no longer has
        vanished: set[str] = set()
        for tp, state in zk_reads.read_states(client, sorted(state_tps), watch, skip_bad=True).items():
            if state is None:
                states.pop(tp, None)
                if tp.topic not in to_read:
                    vanished.add(tp.topic)
            else:
                states[tp] = state
        # a state gone without its topic re-read: the topic may be deleted (one transaction); look now, so
        # that no view shows a deleted topic without its states
        for name, found in zk_reads.read_assignments(client, sorted(vanished), watch).items():
            if found is None:
                topics.pop(name, None)
                configs.pop(name, None)
                versions.pop(name, None)
                for tp in [tp for tp in moving if tp.topic == name]:
                    del moving[tp]
                for tp in [tp for tp in states if tp.topic == name]:
                    del states[tp]
        config_names = sorted({n for n in to_read | dirty.configs if n in topics})
        for name, config in zk_reads.read_topic_configs(client, config_names, watch).items():
            if config:
                configs[name] = config
            else:
                configs.pop(name, None)
        controller_id = current.controller_id
        if dirty.full or dirty.controller:
            controller_id = zk_reads.read_controller(client, watch)
        shutting_down = current.shutting_down
        if dirty.full or dirty.shutting_down:
            shutting_down = frozenset(
                int(child)
                for child in zk_reads.read_children(client, zk_paths.CONTROLLED_SHUTDOWN_PATH, watch)
                if child.isdigit()
            )
        return ClusterView(
            brokers=brokers,
            topics=topics,
            states=states,
            topic_configs=configs,
            controller_id=controller_id,
            shutting_down=shutting_down,
            reassignments=moving,
            topic_versions=versions,
        )

    # ----------------------------------------------------------------------------------- kazoo callbacks

    def _on_watch_event(self, event: Any) -> None:
        """A watch fired (kazoo's callback thread): note what changed; the reload thread reads it."""
        if self._stopping.is_set() or event.type == EventType.NONE:
            return  # NONE: the connection dropped and kazoo cleared its watches; CONNECTED re-reads all
        path: str = event.path or ""
        if path == zk_paths.BROKER_IDS_PATH or path.startswith(_BROKER_PREFIX):
            self._mark(_Dirty(brokers=True))
        elif path == zk_paths.TOPICS_PATH:
            self._mark(_Dirty(topic_list=True))
        elif path.startswith(_TOPIC_PREFIX):
            tp = zk_paths.parse_state_path(path)
            rest = path[len(_TOPIC_PREFIX) :]
            if tp is not None:
                self._mark(_Dirty(states={tp}))
            elif "/" not in rest:
                self._mark(_Dirty(topics={rest}))
            else:
                self._mark(_Dirty(full=True))
        elif path == zk_paths.CONTROLLER_PATH:
            self._mark(_Dirty(controller=True))
        elif path.startswith(_CONFIG_PREFIX):
            self._mark(_Dirty(configs={path[len(_CONFIG_PREFIX) :]}))
        elif path == zk_paths.CONTROLLED_SHUTDOWN_PATH or path.startswith(_SHUTDOWN_PREFIX):
            self._mark(_Dirty(shutting_down=True))
        else:
            self._mark(_Dirty(full=True))

    def _on_state(self, state: KazooState) -> None:
        """kazoo's state listener: never blocks, never calls ZooKeeper."""
        if state == KazooState.CONNECTED and not self._stopping.is_set():
            self._mark(_Dirty(full=True))
        elif state == KazooState.LOST:
            logger.warning(
                "cluster: the zookeeper session expired; re-reading everything when connected again"
            )

    def _mark(self, dirty: _Dirty) -> None:
        with self._dirty_lock:
            self._dirty.merge(dirty)
        self._wake.set()

    def _take_dirty(self) -> _Dirty:
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, _Dirty()
        return dirty

    # ----------------------------------------------------------------------------------- threads

    def _run_reloads(self) -> None:
        backoff_s = RETRY_INITIAL_S
        while True:
            self._wake.wait()
            if self._stopping.is_set():
                return
            self._wake.clear()
            dirty = self._take_dirty()
            if not dirty:
                continue
            if not self._client.connected:
                # calls would wait for the connection; the CONNECTED listener wakes us for a full re-read
                with self._dirty_lock:
                    self._dirty.full = True
                continue
            try:
                self._reload(dirty)
            except (KazooException, KazooTimeoutError) as exc:
                logger.warning("cluster: cannot re-read the cluster (%r); retrying in %.1f s", exc, backoff_s)
            except Exception:  # the thread's top loop: log and keep watching
                logger.exception("cluster: re-reading the cluster failed; retrying in %.1f s", backoff_s)
            else:
                backoff_s = RETRY_INITIAL_S
                continue
            self._stopping.wait(backoff_s)
            backoff_s = min(backoff_s * 2, RETRY_MAX_S)
            self._mark(_Dirty(full=True))

    def _run_notifications(self) -> None:
        on_change = self._on_change
        if on_change is None:
            return
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending) or self._stopping.is_set())
                if self._stopping.is_set():
                    return
                old, new = self._pending.popleft()
            try:
                on_change(old, new)
            except Exception:  # the thread's top loop: a failing listener must not stop the notifications
                logger.exception("cluster: on_change failed for the change to %s", _summary(new))


def _summary(view: ClusterView) -> str:
    return f"brokers {sorted(view.brokers)}, topics {sorted(view.topics)}"
