"""Setting the ACLs of znodes that exist (broker/cluster/zookeeper_acl_migrator.py) on a real ZooKeeper: a
tree created open (a topic, a partition state, a group's offset, a SCRAM credential) is secured, a client
without the credentials then reads but cannot write and cannot read the credential; a second run changes
nothing; a dry run counts and changes nothing; znodes outside Lumber's roots are left alone; unsecure opens
them again; a znode another identity owns stops the walk with its path named."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, make_acl, make_digest_acl

from broker.cluster import zk_paths
from broker.cluster.errors import ClusterError
from broker.cluster.zookeeper_acl_migrator import BROKER_ROOT_PATHS, ZooKeeperAclMigrator
from broker.cluster.zookeeper_auth import ZooKeeperAuth, new_zookeeper_client

pytestmark = pytest.mark.zookeeper

AUTH = ZooKeeperAuth("lumber", "zk-Secret-0c41")
OWNER_ALL = make_digest_acl(AUTH.user, AUTH.password, all=True)
WORLD_READ = make_acl("world", "anyone", read=True)
#: an open tree as a cluster run before auth_user leaves it (paths below the chroot)
OPEN_TREE = (
    "/brokers/topics/t/partitions/0/state",
    "/consumers/g/offsets/t/0",
    "/config/users/alice",
    "/config/topics/t",
    "/schema_registry/ids/1",
)


def _acl_set(acls: list[ACL]) -> set[tuple[int, str, str]]:
    return {(a.perms, a.id.scheme, a.id.id) for a in acls}


@pytest.fixture
def stranger(zk: KazooClient) -> KazooClient:
    """A client without the credentials, on the test's chroot, which it fills with an open tree."""
    for path in (*OPEN_TREE, "/other-app/data"):
        zk.create(path, b"v", makepath=True)
    return zk


@pytest.fixture
def owner(zk_connect: str, stranger: KazooClient) -> Iterator[KazooClient]:
    client = new_zookeeper_client(zk_connect, 10.0, auth=AUTH)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def test_an_open_tree_is_secured_once_and_opened_again(owner: KazooClient, stranger: KazooClient) -> None:
    migrator = ZooKeeperAclMigrator(owner, AUTH)
    roots = [*BROKER_ROOT_PATHS, "/schema_registry"]
    # the chroot's own znode, and every znode of the tree below the roots that exist
    nodes = 1 + sum(1 for _ in _all_nodes(owner, ["/brokers", "/consumers", "/config", "/schema_registry"]))
    dry = migrator.migrate(roots, secure=True, dry_run=True)
    assert (dry.changed, dry.unchanged) == (nodes, 0)
    assert _acl_set(stranger.get_acls("/brokers/topics/t")[0]) == _acl_set(OPEN_ACL_UNSAFE)

    done = migrator.migrate(roots, secure=True)
    assert (done.changed, done.unchanged) == (nodes, 0)
    assert "/controller" in done.missing_roots
    assert _acl_set(owner.get_acls("/brokers/topics/t/partitions/0/state")[0]) == _acl_set(
        [OWNER_ALL, WORLD_READ]
    )
    assert _acl_set(owner.get_acls("/")[0]) == _acl_set([OWNER_ALL, WORLD_READ])  # the chroot's own znode
    assert _acl_set(owner.get_acls(zk_paths.user_config_path("alice"))[0]) == _acl_set([OWNER_ALL])
    assert stranger.get("/brokers/topics/t/partitions/0/state")[0] == b"v"
    for path in (
        "/brokers/topics/t/partitions/0/state",
        "/consumers/g/offsets/t/0",
        "/schema_registry/ids/1",
    ):
        with pytest.raises(NoAuthError):
            stranger.set(path, b"forged")
    with pytest.raises(NoAuthError):
        stranger.get(zk_paths.user_config_path("alice"))
    with pytest.raises(NoAuthError):
        stranger.create("/brokers/topics/forged", b"{}")
    # what is not Lumber's is left as it was
    assert _acl_set(stranger.get_acls("/other-app/data")[0]) == _acl_set(OPEN_ACL_UNSAFE)
    stranger.set("/other-app/data", b"still mine")

    again = migrator.migrate(roots, secure=True)
    assert (again.changed, again.unchanged) == (0, nodes)

    opened = migrator.migrate(roots, secure=False)
    assert (opened.changed, opened.unchanged) == (nodes, 0)
    stranger.set("/consumers/g/offsets/t/0", b"42")
    assert stranger.get(zk_paths.user_config_path("alice"))[0] == b"v"


def test_a_znode_of_another_identity_stops_the_walk_naming_it(
    zk_connect: str, owner: KazooClient, stranger: KazooClient
) -> None:
    stranger.ensure_path("/brokers/ids")
    other = ZooKeeperAuth("someone-else", "other-Secret-11")
    client = new_zookeeper_client(zk_connect, 10.0, auth=other)
    client.start(timeout=30)
    try:
        client.create("/brokers/ids/7", b"{}", acl=other.sensitive_acl(), makepath=True)
    finally:
        client.stop()
        client.close()
    refused = r"refuses to set the ACL of /brokers/ids/7: .* digest user 'lumber'"
    with pytest.raises(ClusterError, match=refused):
        ZooKeeperAclMigrator(owner, AUTH).migrate(["/brokers"], secure=True)


def _all_nodes(client: KazooClient, roots: list[str]) -> Iterator[str]:
    for root in roots:
        yield root
        yield from _all_nodes(client, [f"{root}/{child}" for child in client.get_children(root)])
