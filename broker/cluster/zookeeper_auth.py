"""A Lumber process's ZooKeeper identity (``[zookeeper] auth_user`` and its password) and the ACLs of the
znodes it creates: Kafka's ``zookeeper.set.acl=true`` with a digest user instead of a SASL login.

Every kazoo client of Lumber is made by :func:`new_zookeeper_client`. Without an identity it is a plain
``KazooClient`` (znodes created open to the world, as before). With one it

- authenticates its session as ``digest`` ``user:password`` (``auth_data``), and
- creates every znode with :meth:`ZooKeeperAuth.default_acl`: ALL for the digest user, READ for the world
  (Kafka's ``CREATOR_ALL_ACL`` + ``READ_ACL_UNSAFE``), so that anyone may read the cluster's state but
  only Lumber's processes may change partition state, topics, offsets or configs;
- except the sensitive paths (:data:`SENSITIVE_ROOT_PATHS`, Kafka's ``ZkData.sensitivePath``: the SCRAM
  credentials under ``/config/users``), which take :func:`sensitive_acl`: the digest user only, not even
  world READ.

The identity is per process, as Kafka's is (the JAAS ``Client`` section is the JVM's): the CLI installs
the one its config names once at start (:meth:`ZooKeeperAuth.install`, its password read when the first
client is made), and a client made without an explicit ``auth`` takes it; a broker passes its own
explicitly. The password is held with ``repr=False`` and never formatted into a message.

Thread-safety: :meth:`ZooKeeperAuth.install` is meant for start-up. Two threads making their first clients
at once may both read the password (the same value): harmless.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kazoo.client import KazooClient
from kazoo.security import ACL, make_acl, make_digest_acl

from broker.cluster import zk_paths

#: Znodes (and all below them) that get the digest user's ACL only (Kafka: /config/users, /config/brokers,
#: /delegation_token; Lumber keeps no secrets in the other two).
SENSITIVE_ROOT_PATHS = (zk_paths.CONFIG_USERS_PATH,)


@dataclass(frozen=True)
class ZooKeeperAuth:
    """A digest user and its password (see the module docstring)."""

    user: str
    password: str = field(repr=False)

    _installed: ClassVar[ZooKeeperAuth | Callable[[], ZooKeeperAuth | None] | None] = None

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user:
            raise ValueError(f"zookeeper.auth_user: {self.user!r} must be non-empty and without ':'")
        if not self.password:
            raise ValueError("zookeeper auth: the password is empty")

    @classmethod
    def read(cls, user: str, password_file: str, password_env: str) -> ZooKeeperAuth:
        """``user`` with the first line of ``password_file``, else the variable ``password_env``; a
        ValueError naming the key and the file or variable (never the value) when it cannot be read."""
        if password_file:
            try:
                lines = Path(password_file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise ValueError(
                    f"zookeeper.auth_password_file: cannot read {password_file!r}: {reason}"
                ) from None
            if not lines or not lines[0]:
                raise ValueError(
                    f"zookeeper.auth_password_file: the first line of {password_file!r} is empty"
                )
            return cls(user, lines[0])
        password = os.environ.get(password_env, "")
        if not password:
            raise ValueError(
                f"zookeeper.auth_password_env: the environment variable {password_env} is not set or empty"
            )
        return cls(user, password)

    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: the session's ``digest`` credentials."""
        return [("digest", f"{self.user}:{self.password}")]

    def default_acl(self) -> list[ACL]:
        """The ACL of every znode a client with this identity creates: ALL for the user, world READ."""
        return [*self.sensitive_acl(), make_acl("world", "anyone", read=True)]

    def sensitive_acl(self) -> list[ACL]:
        """The ACL of a sensitive znode: ALL for the user, nothing for anyone else."""
        return [make_digest_acl(self.user, self.password, all=True)]

    @classmethod
    def install(cls, auth: ZooKeeperAuth | Callable[[], ZooKeeperAuth | None] | None) -> None:
        """Make ``auth`` this process's identity (None: none) for clients made without an explicit one; a
        callable is called when the first client is made (so that a command that never reaches ZooKeeper
        never reads the password), and its error raised there."""
        cls._installed = auth

    @classmethod
    def installed(cls) -> ZooKeeperAuth | None:
        """The process's identity, or None."""
        installed = cls._installed
        if callable(installed):
            installed = cls._installed = installed()
        return installed


def new_zookeeper_client(
    hosts: str, timeout: float, auth: ZooKeeperAuth | None = None, **kwargs: Any
) -> KazooClient:
    """A kazoo client (not started) for ``hosts`` with ``auth``, or else the process's installed identity,
    or else none. Further keyword arguments go to ``KazooClient``."""
    identity = auth or ZooKeeperAuth.installed()
    if identity is not None:
        kwargs.update(auth_data=identity.auth_data(), default_acl=identity.default_acl())
    return KazooClient(hosts=hosts, timeout=timeout, **kwargs)


def sensitive_acl(client: KazooClient) -> list[ACL] | None:
    """The ACL for a sensitive znode created through ``client``: its default ACL without the world's READ;
    None (kazoo's default: open) for a client without an identity."""
    default: list[ACL] | None = client.default_acl
    if not default:
        return None
    return [acl for acl in default if acl.id.scheme != "world"]


def ensure_sensitive_path(client: KazooClient, path: str) -> list[ACL] | None:
    """Make sure the sensitive ``path`` exists, its parents with the client's default ACL and ``path`` with
    :func:`sensitive_acl` (kazoo's ``ensure_path`` would give the parents the same ACL); that ACL returned
    for the nodes to create below it."""
    acl = sensitive_acl(client)
    if acl is not None:
        client.ensure_path(path.rsplit("/", 1)[0] or "/")
    client.ensure_path(path, acl=acl)
    return acl
