"""``lumber acls zookeeper --secure|--unsecure`` (lumber/cli/zookeeper_acls.py) as a subprocess against a
real ZooKeeper: the open znodes of a cluster that ran without ``[zookeeper] auth_user`` (the registry's and
the ETL's included) are secured, a client without the credentials then cannot write them, the password is
in no output; without ``auth_user`` the command is refused with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

pytestmark = pytest.mark.zookeeper

PASSWORD = "zk-Secret-5d2e88"  # grepped for in every output


@pytest.fixture
def stranger(zk: KazooClient) -> KazooClient:
    """A client without the credentials, on the test's chroot, which it fills with open znodes."""
    for path in ("/brokers/topics/t", "/schema_registry/config", "/etl/jobs/hourly", "/lag-history/g"):
        zk.create(path, b"v", makepath=True)
    return zk


def lumber(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_secure_then_unsecure_the_znodes_of_a_cluster_that_ran_open(
    zk_connect: str, stranger: KazooClient, tmp_path: Path
) -> None:
    password_file = tmp_path / "zk-password"
    password_file.write_text(PASSWORD + "\n")
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = {json.dumps(zk_connect)}\nauth_user = "lumber"\n'
        f"auth_password_file = {json.dumps(str(password_file))}\n"
    )
    dry = lumber(config, "acls", "zookeeper", "--secure", "--dry-run")
    assert (dry.returncode, dry.stderr) == (0, "")
    # the chroot's znode, /brokers, /brokers/topics, /brokers/topics/t, /schema_registry and its config,
    # /etl, /etl/jobs, /etl/jobs/hourly, /lag-history, /lag-history/g
    assert dry.stdout == "secured: would change the ACL of 11 znode(s), 0 had it already\n"
    stranger.set("/etl/jobs/hourly", b"still open")

    done = lumber(config, "acls", "zookeeper", "--secure", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["acl"], answer["changed"], answer["unchanged"]) == ("secure", 11, 0)
    for path in ("/brokers/topics/t", "/schema_registry/config", "/etl/jobs/hourly", "/lag-history/g"):
        assert stranger.get(path)[0] in (b"v", b"still open")
        with pytest.raises(NoAuthError):
            stranger.set(path, b"forged")

    opened = lumber(config, "acls", "zookeeper", "--unsecure")
    assert opened.stdout == "opened: changed the ACL of 11 znode(s), 0 had it already\n"
    stranger.set("/brokers/topics/t", b"open again")
    for output in (dry, done, opened):
        assert PASSWORD not in output.stdout + output.stderr


def test_without_an_auth_user_it_is_refused(zk_connect: str, tmp_path: Path) -> None:
    config = tmp_path / "lumber.toml"
    config.write_text(f"[zookeeper]\nconnect = {json.dumps(zk_connect)}\n")
    refused = lumber(config, "acls", "zookeeper", "--secure")
    assert refused.returncode == 2
    assert refused.stderr.startswith("lumber: error: [zookeeper] auth_user is not set: ")
