"""ZooKeeper digest ACLs (broker/cluster/zookeeper_auth.py) on a real ZooKeeper and a real broker process:
with ``[zookeeper] auth_user``, the broker and the CLI work end to end, a client without the credentials
reads the cluster's state but cannot change it (partition state, a group's offsets) nor read SCRAM
credentials, and the password is in no log and no ``lumber config show``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, make_acl, make_digest_acl

from broker.cluster import zk_paths
from broker.cluster.user_credential_store import UserCredentialStore
from broker.cluster.zookeeper_auth import ZooKeeperAuth, new_zookeeper_client, sensitive_acl
from broker.network.scram_credential import ScramCredential, ScramMechanism
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from schemas.registry.config import RegistryConfig
from schemas.registry.server import connected_registry
from tests.support.broker_cluster import BrokerProcess
from tests.support.zookeeper import make_chroot, new_client

USER = "lumber"
PASSWORD = "zk-Secret-7f3a9c"  # grepped for in every output below
WORLD_READ = make_acl("world", "anyone", read=True)
OWNER_ALL = make_digest_acl(USER, PASSWORD, all=True)


def _acl_set(acls: list[ACL]) -> set[tuple[int, str, str]]:
    return {(a.perms, a.id.scheme, a.id.id) for a in acls}


@pytest.fixture
def chroot(zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    return make_chroot(zookeeper_server.connect, request.node.name)


@pytest.fixture
def stranger(chroot: str) -> Iterator[KazooClient]:
    """A client without the credentials."""
    client = new_client(chroot)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def owner(chroot: str) -> Iterator[KazooClient]:
    client = new_zookeeper_client(chroot, 10.0, auth=ZooKeeperAuth(USER, PASSWORD))
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def test_znodes_take_the_owner_all_and_world_read(owner: KazooClient, stranger: KazooClient) -> None:
    owner.create("/brokers/topics/t", b"{}", makepath=True)
    for path in ("/brokers", "/brokers/topics", "/brokers/topics/t"):
        acls, _ = owner.get_acls(path)
        assert _acl_set(acls) == _acl_set([OWNER_ALL, WORLD_READ]), path
    # ZooKeeper shows others the digest user but not its hash
    assert _acl_set(stranger.get_acls("/brokers")[0]) == {(31, "digest", f"{USER}:x"), (1, "world", "anyone")}
    assert stranger.get("/brokers/topics/t")[0] == b"{}"
    with pytest.raises(NoAuthError):
        stranger.set("/brokers/topics/t", b"{}")
    with pytest.raises(NoAuthError):
        stranger.create("/brokers/topics/t/partitions", b"")
    with pytest.raises(NoAuthError):
        stranger.delete("/brokers/topics/t")
    owner.set("/brokers/topics/t", b'{"v": 1}')  # the owner, from another session, still may
    assert stranger.get("/brokers/topics/t")[0] == b'{"v": 1}'


def test_scram_credentials_are_the_owners_only(owner: KazooClient, stranger: KazooClient) -> None:
    credential = ScramCredential.generate("pw-of-alice", ScramMechanism.SCRAM_SHA_512, iterations=4096)
    UserCredentialStore(owner).upsert("alice", {ScramMechanism.SCRAM_SHA_512: credential})
    assert _acl_set(owner.get_acls("/config")[0]) == _acl_set([OWNER_ALL, WORLD_READ])
    for path in (zk_paths.CONFIG_USERS_PATH, zk_paths.user_config_path("alice")):
        assert _acl_set(owner.get_acls(path)[0]) == _acl_set([OWNER_ALL]), path
    with pytest.raises(NoAuthError):
        stranger.get(zk_paths.user_config_path("alice"))
    with pytest.raises(NoAuthError):
        stranger.get_children(zk_paths.CONFIG_USERS_PATH)
    assert UserCredentialStore(owner).list_users() == {"alice": ["SCRAM-SHA-512"]}
    assert sensitive_acl(stranger) is None  # without an identity: kazoo's open ACL, as before


def test_without_an_identity_znodes_stay_open(chroot: str, stranger: KazooClient) -> None:
    client = new_zookeeper_client(chroot, 10.0)
    client.start(timeout=30)
    try:
        UserCredentialStore(client).upsert(
            "bob", {ScramMechanism.SCRAM_SHA_256: ScramCredential.generate("x", ScramMechanism.SCRAM_SHA_256)}
        )
    finally:
        client.stop()
        client.close()
    acls, _ = stranger.get_acls(zk_paths.user_config_path("bob"))
    assert _acl_set(acls) == {(31, "world", "anyone")}


def test_the_installed_identity_is_taken_by_clients_made_without_one(
    chroot: str, stranger: KazooClient
) -> None:
    ZooKeeperAuth.install(ZooKeeperAuth(USER, PASSWORD))
    try:
        client = new_zookeeper_client(chroot, 10.0)
    finally:
        ZooKeeperAuth.install(None)
    client.start(timeout=30)
    try:
        client.create("/x", b"1")
    finally:
        client.stop()
        client.close()
    assert _acl_set(stranger.get_acls("/x")[0]) == {(31, "digest", f"{USER}:x"), (1, "world", "anyone")}
    assert PASSWORD not in repr(ZooKeeperAuth(USER, PASSWORD))


def test_an_unreadable_password_fails_the_commands_that_reach_zookeeper_only(
    chroot: str, tmp_path: Path
) -> None:
    config = tmp_path / "lumber.toml"
    missing = tmp_path / "no-such-password"
    config.write_text(
        f"[zookeeper]\nconnect = {json.dumps(chroot)}\nauth_user = {json.dumps(USER)}\n"
        f"auth_password_file = {json.dumps(str(missing))}\n"
    )
    shown = _lumber(config, "config", "show")
    assert shown.returncode == 0, shown.stderr
    listed = _lumber(config, "topics", "list")
    assert listed.returncode == 2
    assert listed.stderr.strip() == (
        f"lumber: config error: zookeeper.auth_password_file: cannot read {str(missing)!r}: "
        "No such file or directory"
    )


def _lumber(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_a_broker_and_the_cli_with_zookeeper_auth(chroot: str, stranger: KazooClient, tmp_path: Path) -> None:
    password_file = tmp_path / "zk-password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    auth = {"auth_user": USER, "auth_password_file": str(password_file)}
    broker = BrokerProcess(
        0,
        free_port(),
        tmp_path / "broker-0",
        chroot,
        stranger,
        {"flush_on_ack": True, "offsets_topic_partitions": 1},
        auth,
    )
    broker.start()
    try:
        config = broker.config_path
        outputs: list[str] = []

        def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            done = _lumber(config, *args, stdin=stdin)
            outputs.extend((done.stdout, done.stderr))
            assert done.returncode == 0, f"lumber {' '.join(args)}: {done.stderr}"
            return done

        run("topics", "create", "orders", "--partitions", "2")
        run("produce", "orders", "--partition", "0", stdin="a\nb\nc\n")
        read = run(
            "consume", "orders", "--partition", "0", "--from-beginning", "--max", "3", "--timeout", "30s"
        )
        assert read.stdout.splitlines() == ["a", "b", "c"]
        run(
            "consume",
            "orders",
            "--group",
            "g1",
            "--kind",
            "zookeeper",
            "--from-beginning",
            "--max",
            "3",
            "--timeout",
            "30s",
        )
        (tmp_path / "alice").write_text("alice-pw\n")
        run("users", "add", "alice", "--password-file", str(tmp_path / "alice"))
        shown = run("config", "show")
        assert 'auth_user = "lumber"' in shown.stdout

        # a client without the credentials reads the topic ...
        assigned = json.loads(stranger.get(zk_paths.topic_path("orders"))[0])
        assert assigned["partitions"] == {"0": [0], "1": [0]}
        state_path = zk_paths.partition_state_path("orders", 0)
        state, _ = stranger.get(state_path)
        assert json.loads(state)["leader"] == 0
        # ... but cannot rewrite partition state, the assignment, a group's offsets, or read credentials
        with pytest.raises(NoAuthError):
            stranger.set(state_path, state)
        with pytest.raises(NoAuthError):
            stranger.set(zk_paths.topic_path("orders"), b"{}")
        offset_path = zk_paths.group_offset_path("g1", "orders", 0)
        committed, _ = stranger.get(offset_path)
        assert json.loads(committed)["offset"] == 3
        with pytest.raises(NoAuthError):
            stranger.set(offset_path, b"0")
        with pytest.raises(NoAuthError):
            stranger.delete(offset_path)
        with pytest.raises(NoAuthError):
            stranger.get(zk_paths.user_config_path("alice"))
        with pytest.raises(NoAuthError):
            stranger.set(zk_paths.broker_path(0), b"{}")
        with pytest.raises(NoAuthError):
            stranger.set(zk_paths.CONTROLLER_EPOCH_PATH, b"99")

        # the password was in no output and no log
        logs = broker.log()
        assert "orders" in logs  # the broker logged the topic's partitions
        for text in (*outputs, logs):
            assert PASSWORD not in text
    finally:
        broker.stop()


def test_the_registry_takes_the_installed_identity(chroot: str, stranger: KazooClient) -> None:
    schema = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'
    ZooKeeperAuth.install(ZooKeeperAuth(USER, PASSWORD))
    try:
        with connected_registry(RegistryConfig(), chroot) as registry:
            assert registry.register("orders-value", schema) == 1
    finally:
        ZooKeeperAuth.install(None)
    assert _acl_set(stranger.get_acls("/schema_registry")[0]) == {
        (31, "digest", f"{USER}:x"),
        (1, "world", "anyone"),
    }
    assert stranger.get_children("/schema_registry")  # readable
    with pytest.raises(NoAuthError):
        stranger.create("/schema_registry/ids/99", b"{}")
    with pytest.raises(NoAuthError):
        stranger.set("/schema_registry", b"")
