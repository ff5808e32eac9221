"""A broker's copy of the cluster's ACLs, kept current by the change notifications (Kafka's
``AclAuthorizer`` cache fed by ``ZkNodeChangeNotificationListener``).

:meth:`AclWatcher.start` sets a children watch on both change directories, ``/kafka-acl-changes`` and
``/kafka-acl-extended-changes`` (:mod:`broker.cluster.acl_store` draws the znodes). The first call of each
watch loads every ACL and remembers the notifications already there; every later call takes the
notifications with a higher sequence number than the last one handled, in order, and reads the resource
each names again (a whole node: applying a notification twice is harmless, so a notification that comes
after the node was already read costs a read, never a wrong answer). Notifications older than
:data:`~broker.cluster.acl_store.CHANGE_EXPIRATION_MS` are deleted on the way, by whichever broker sees
them first. After a lost session kazoo's watch lists the children again, and the notifications of the
gap are still there (kept 15 minutes).

:attr:`AclWatcher.cache` is what the authorizer reads on the request threads: one attribute read of an
immutable :class:`~broker.security.acl_cache.AclCache`, never a ZooKeeper round trip. A node or
notification that does not decode is logged and skipped.

Thread-safe: kazoo's callback thread (and, for each watch's first call, the thread that starts it) writes,
one at a time under a lock, swapping whole caches; any thread reads;
:meth:`AclWatcher.wait_for` lets a caller wait until a change it made is seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch

from broker.cluster import acl_store
from broker.cluster.acl_store import AclStore
from broker.cluster.errors import ClusterError
from broker.security.acl_binding import PatternType
from broker.security.acl_cache import AclCache
from broker.security.errors import InvalidAclError

logger = logging.getLogger(__name__)


def _sequence(name: str) -> int:
    try:
        return int(name.removeprefix(acl_store.CHANGE_PREFIX))
    except ValueError:
        return -1


class AclWatcher:
    """Every ACL, followed through ZooKeeper (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._store = AclStore(client)
        self.cache = AclCache()
        self._last_seen: dict[PatternType, int] = {}
        self._changed = threading.Condition()
        self._handling = threading.Lock()  # the first call of a watch runs on the starting thread
        self._stopped = False

    @property
    def store(self) -> AclStore:
        """The store the ACLs are written through (with the same ZooKeeper client)."""
        return self._store

    def start(self) -> None:
        """Load every ACL and follow the changes (raises what kazoo raises when ZooKeeper is unreachable)."""
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            path = acl_store.changes_path(pattern_type)
            self._client.ensure_path(path)
            ChildrenWatch(
                self._client, path, lambda children, kind=pattern_type: self._on_changes(kind, children)
            )

    def stop(self) -> None:
        """Stop following changes (the watches end at their next event)."""
        self._stopped = True

    def wait_for(self, predicate: Callable[[AclCache], bool], timeout_s: float) -> bool:
        """Wait until ``predicate(cache)`` holds (True) or ``timeout_s`` passed (False)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate(self.cache):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _on_changes(self, pattern_type: PatternType, children: list[str]) -> bool:
        if self._stopped:
            return False
        try:
            with self._handling:
                self._handle(pattern_type, children)
        except (KazooException, KazooTimeoutError, ClusterError) as exc:
            # the next notification (or the session's return) lists the children again
            logger.warning("ACL changes under %s not read yet: %r", acl_store.changes_path(pattern_type), exc)
        with self._changed:
            self._changed.notify_all()
        return True

    def _handle(self, pattern_type: PatternType, children: list[str]) -> None:
        root = acl_store.changes_path(pattern_type)
        names = sorted((n for n in children if _sequence(n) >= 0), key=_sequence)
        if pattern_type not in self._last_seen:  # the first call: everything, as it is now
            self.cache = self._store.load()
            self._last_seen[pattern_type] = _sequence(names[-1]) if names else -1
            logger.info("ACLs loaded: %d bindings", len(self.cache))
            self._purge(root, names)
            return
        last = self._last_seen[pattern_type]
        for name in names:
            if _sequence(name) <= last:
                continue
            path = f"{root}/{name}"
            try:
                data, _stat = self._client.get(path)
                pattern = acl_store.decode_change(pattern_type, path, data)
                self.cache = self.cache.with_resource(pattern, self._store.read(pattern))
                logger.info("ACLs of %s changed: %d bindings now", pattern, len(self.cache.entries(pattern)))
            except NoNodeError:
                pass  # purged by another broker: it was older than anything this broker has not read
            except InvalidAclError as exc:
                logger.warning("ACL change skipped: %s", exc)
            self._last_seen[pattern_type] = _sequence(name)
        self._purge(root, names)

    def _purge(self, root: str, names: list[str]) -> None:
        """Delete the notifications older than the expiration (Kafka's purgeObsoleteNotifications)."""
        now_ms = time.time() * 1000
        for name in names:
            path = f"{root}/{name}"
            try:
                stat = self._client.exists(path)
                if stat is None or now_ms - stat.ctime < acl_store.CHANGE_EXPIRATION_MS:
                    return  # in sequence order: the later ones are younger
                self._client.delete(path)
            except NoNodeError:
                continue
