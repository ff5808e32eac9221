"""SASL users' SCRAM credentials in ZooKeeper, ``/config/users/<name>`` (:mod:`broker.cluster.zk_paths`):
adding, deleting and listing them (``lumber users``).

Writes are compare-and-set: :meth:`UserCredentialStore.upsert` reads the node and sets it at the version it
read (or creates it), retrying when another writer came between, so two administrators adding mechanisms to
one user at once both keep theirs; :meth:`UserCredentialStore.delete` removes mechanisms the same way and the
node with the last one. The brokers see every change through their watches
(:class:`~broker.cluster.credential_cache.CredentialCache`). Nothing here sees a password: callers pass
credentials made by :meth:`~broker.network.scram_credential.ScramCredential.generate`. With a ZooKeeper
identity (:mod:`broker.cluster.zookeeper_auth`) the nodes are readable by that identity only.

Thread-safe (every operation is its own ZooKeeper transaction).
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster import zk_paths
from broker.cluster.errors import ClusterError, zookeeper_error
from broker.cluster.zookeeper_auth import ensure_sensitive_path
from broker.network.scram_credential import ScramCredential, ScramMechanism

_TRIES = 10


class UserCredentialStore:
    """``/config/users`` through ``client`` (see the module docstring)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client

    def upsert(self, user: str, credentials: dict[ScramMechanism, ScramCredential]) -> None:
        """Set ``user``'s credentials for these mechanisms (the others it has stay)."""
        path = self._path(user)
        changes = {m.mechanism_name: c.to_text() for m, c in credentials.items()}
        try:
            for _ in range(_TRIES):
                try:
                    data, stat = self._client.get(path)
                except NoNodeError:
                    try:
                        self._create(path, zk_paths.encode_user_config(changes))
                    except NodeExistsError:
                        continue
                    return
                current = zk_paths.decode_user_config(path, data)
                try:
                    self._client.set(path, zk_paths.encode_user_config({**current, **changes}), stat.version)
                except BadVersionError:
                    continue
                return
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("write", path, exc) from exc
        raise ClusterError(f"{path}: changed by another writer {_TRIES} times in a row; try again")

    def delete(self, user: str, mechanisms: list[ScramMechanism] | None = None) -> list[str]:
        """Remove ``user``'s credentials of ``mechanisms`` (None: all, and the node); the mechanisms
        removed (empty: the user had none of them)."""
        path = self._path(user)
        try:
            for _ in range(_TRIES):
                try:
                    data, stat = self._client.get(path)
                except NoNodeError:
                    return []
                current = zk_paths.decode_user_config(path, data)
                names = [m.mechanism_name for m in mechanisms] if mechanisms is not None else list(current)
                removed = sorted(n for n in names if n in current)
                kept = {k: v for k, v in current.items() if k not in removed}
                try:
                    if kept:
                        self._client.set(path, zk_paths.encode_user_config(kept), stat.version)
                    else:
                        self._client.delete(path, stat.version)
                except (BadVersionError, NoNodeError):
                    continue
                return removed
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("write", path, exc) from exc
        raise ClusterError(f"{path}: changed by another writer {_TRIES} times in a row; try again")

    def list_users(self) -> dict[str, list[str]]:
        """Every user and the mechanisms it has credentials for, by name."""
        users: dict[str, list[str]] = {}
        try:
            names = sorted(self._client.get_children(zk_paths.CONFIG_USERS_PATH))
        except NoNodeError:
            return {}
        except (KazooException, KazooTimeoutError) as exc:
            raise zookeeper_error("read", zk_paths.CONFIG_USERS_PATH, exc) from exc
        for name in names:
            path = f"{zk_paths.CONFIG_USERS_PATH}/{name}"
            try:
                data, _ = self._client.get(path)
            except NoNodeError:
                continue
            except (KazooException, KazooTimeoutError) as exc:
                raise zookeeper_error("read", path, exc) from exc
            users[name] = sorted(zk_paths.decode_user_config(path, data))
        return users

    def _create(self, path: str, data: bytes) -> None:
        """Create ``path`` and its missing parents; with a ZooKeeper identity, ``/config/users`` and the
        user's node take the sensitive ACL (the identity only: no world READ of credentials)."""
        acl = ensure_sensitive_path(self._client, zk_paths.CONFIG_USERS_PATH)
        self._client.create(path, data, acl=acl)

    @staticmethod
    def _path(user: str) -> str:
        try:
            return zk_paths.user_config_path(user)
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
