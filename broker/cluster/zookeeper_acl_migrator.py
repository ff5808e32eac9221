"""Setting the ACLs of a tree that already exists (Kafka's ``ZkSecurityMigrator``, the
``zookeeper-security-migration.sh --zookeeper.acl secure|unsecure`` tool).

``[zookeeper] auth_user`` (:mod:`broker.cluster.zookeeper_auth`) gives its ACL to the znodes created once it
is set; those created before stay open to the world. :meth:`ZooKeeperAclMigrator.migrate` walks each root
given (each znode below it, children before nothing else: a breadth-first walk) and sets every znode's ACL
to the one it would have been created with:

* ``secure``: ALL for the digest user and world READ, or ALL for the user alone under the sensitive paths
  (:data:`~broker.cluster.zookeeper_auth.SENSITIVE_ROOT_PATHS`, the SCRAM credentials);
* ``unsecure``: ``world:anyone`` ALL (kazoo's ``OPEN_ACL_UNSAFE``), to turn ``auth_user`` off again.

A znode whose ACL already is the one wanted is left alone (the walk can be run again, and a dry run
counts what it would change). The roots are Lumber's (:data:`BROKER_ROOT_PATHS` plus those of the
registry, the ETL and the lag exporter, which the caller adds), never the whole ZooKeeper: other
applications' znodes beside a Lumber cluster without a chroot are not touched. With a chroot the chroot's
own znode is set too (Kafka's brokers create it with their ACL), not what lies beside it. A znode deleted
during the walk is skipped; a znode this session may not re-ACL (another identity's) stops the walk with
:class:`~broker.cluster.errors.ClusterError` naming it, having changed what it had already changed.

The session must be allowed to change each znode's ACL (ZooKeeper's ADMIN permission): an open znode allows
anyone, a secured one only the digest user, so the client is made with the identity (both directions).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from broker.cluster import zk_paths
from broker.cluster.acl_store import (
    LITERAL_ACL_PATH,
    LITERAL_CHANGES_PATH,
    PREFIXED_ACL_PATH,
    PREFIXED_CHANGES_PATH,
)
from broker.cluster.errors import ClusterError
from broker.cluster.zookeeper_auth import SENSITIVE_ROOT_PATHS, ZooKeeperAuth

#: The brokers' top-level znodes (:mod:`broker.cluster.zk_paths`, :mod:`broker.cluster.acl_store`; Kafka's
#: ``ZkData.SecureRootPaths``), and the ZooKeeper groups' ``/consumers``, which Lumber protects too.
BROKER_ROOT_PATHS: tuple[str, ...] = tuple(
    sorted(
        {
            zk_paths.ADMIN_PATH,
            zk_paths.BROKERS_PATH,
            zk_paths.CLUSTER_ID_PATH.rsplit("/", 1)[0],
            "/config",
            zk_paths.CONSUMERS_PATH,
            zk_paths.CONTROLLER_PATH,
            zk_paths.CONTROLLER_EPOCH_PATH,
            zk_paths.PRODUCER_ID_BLOCK_PATH,
            LITERAL_ACL_PATH,
            PREFIXED_ACL_PATH.rsplit("/", 1)[0],
            LITERAL_CHANGES_PATH,
            PREFIXED_CHANGES_PATH,
        }
    )
)


@dataclass(frozen=True)
class AclMigration:
    """What a walk did (or, dry, would do)."""

    #: znodes whose ACL was set (or would be)
    changed: int
    #: znodes that had the wanted ACL already
    unchanged: int
    #: roots given that do not exist (nothing below them to set)
    missing_roots: tuple[str, ...]


class ZooKeeperAclMigrator:
    """Sets the ACLs of existing znodes through ``client`` (started, made with ``auth``; see the module)."""

    def __init__(self, client: KazooClient, auth: ZooKeeperAuth) -> None:
        self._client = client
        self._auth = auth

    def migrate(self, roots: Iterable[str], *, secure: bool, dry_run: bool = False) -> AclMigration:
        """Set the ACL of every znode below each of ``roots`` (and of the chroot's znode) to the one wanted
        (see the module docstring); ``dry_run``: count, change nothing."""
        changed = unchanged = 0
        missing: list[str] = []
        if self._client.chroot:
            changed, unchanged = self._walk("/", secure=secure, dry_run=dry_run, recursive=False)
        for root in sorted(set(roots)):
            if self._client.exists(root) is None:
                missing.append(root)
                continue
            more, same = self._walk(root, secure=secure, dry_run=dry_run, recursive=True)
            changed, unchanged = changed + more, unchanged + same
        return AclMigration(changed, unchanged, tuple(missing))

    def wanted(self, path: str, *, secure: bool) -> list[ACL]:
        """The ACL ``path`` is given (see the module docstring)."""
        if not secure:
            return list(OPEN_ACL_UNSAFE)
        if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS):
            return self._auth.sensitive_acl()
        return self._auth.default_acl()

    def _walk(self, start: str, *, secure: bool, dry_run: bool, recursive: bool) -> tuple[int, int]:
        changed = unchanged = 0
        queue = deque([start])
        client = self._client
        while queue:
            path = queue.popleft()
            wanted = self.wanted(path, secure=secure)
            try:
                current, stat = client.get_acls(path)
                if _acl_set(current) == _acl_set(wanted):
                    unchanged += 1
                else:
                    if not dry_run:
                        client.set_acls(path, wanted, version=stat.aversion)
                    changed += 1
                if recursive:
                    queue.extend(f"{path.rstrip('/')}/{child}" for child in sorted(client.get_children(path)))
            except NoNodeError:
                continue  # deleted meanwhile (an ephemeral broker or owner node): nothing to set
            except NoAuthError as exc:
                raise ClusterError(
                    f"ZooKeeper refuses to set the ACL of {path}: it is neither open nor owned by digest "
                    f"user {self._auth.user!r} ({type(exc).__name__})"
                ) from exc
            except KazooException as exc:
                raise ClusterError(f"ZooKeeper: setting the ACL of {path}: {exc!r}") from exc
        return changed, unchanged


def _acl_set(acls: Iterable[ACL]) -> set[tuple[int, str, str]]:
    return {(a.perms, a.id.scheme, a.id.id) for a in acls}
