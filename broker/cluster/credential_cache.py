"""A broker's copy of the SASL users' credentials, kept current by ZooKeeper watches (Kafka's
CredentialCache fed by its config change notifications).

:meth:`CredentialCache.start` sets a children watch on ``/config/users`` and a data watch on each user's
node (:mod:`broker.cluster.zk_paths`); kazoo's watch thread replaces a user's entry whenever its node
changes and drops it when the node goes. :meth:`CredentialCache.lookup` is what the network processors call
during a SASL exchange: a dictionary read, never a ZooKeeper round trip, so a slow ZooKeeper cannot stall a
processor (a change reaches the cache a watch notification later). A node that does not decode is logged
and leaves its user without credentials (it cannot log in) rather than with stale ones.

Thread-safe: kazoo's thread writes (replacing whole entries), any thread reads.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.cluster import zk_paths
from broker.cluster.zookeeper_auth import ensure_sensitive_path
from broker.network.scram_credential import ScramCredential, ScramMechanism

logger = logging.getLogger(__name__)


class CredentialCache:
    """Every user's SCRAM credentials, by name and mechanism (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        ensure_sensitive_path(self._client, zk_paths.CONFIG_USERS_PATH)
        ChildrenWatch(self._client, zk_paths.CONFIG_USERS_PATH, self._on_children)

    def stop(self) -> None:
        """Stop following changes (the watches end at their next event)."""
        self._stopped = True

    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``; None if it has none (or is unknown)."""
        entry = self._users.get(user)
        return None if entry is None else entry.get(mechanism.mechanism_name)

    def users(self) -> list[str]:
        return sorted(self._users)

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        with self._lock:
            new = [c for c in children if c not in self._watched]
            self._watched.update(new)
        for user in new:
            DataWatch(self._client, f"{zk_paths.CONFIG_USERS_PATH}/{user}", self._data_watcher(user))
        return True

    def _data_watcher(self, user: str) -> Any:
        path = f"{zk_paths.CONFIG_USERS_PATH}/{user}"

        def on_data(data: bytes | None, _stat: Any) -> bool:
            if self._stopped:
                return False
            if data is None:
                self._users.pop(user, None)
                with self._lock:
                    self._watched.discard(user)
                return False  # gone: a new node of that name gets a new watch
            try:
                config = zk_paths.decode_user_config(path, data)
                entry = {name: ScramCredential.from_text(text) for name, text in config.items()}
            except ValueError as exc:
                logger.warning("user %r cannot log in: %s", user, exc)
                entry = {}
            self._users[user] = entry
            return True

        return on_data
