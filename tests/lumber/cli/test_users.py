"""``lumber users add|delete|list`` against a real ZooKeeper (lumber/cli/users.py): the real CLI process,
the password given through a file or the environment and never shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from broker.cluster import zk_paths
from broker.network.scram_credential import ScramCredential, ScramMechanism

SECRET = "users-cli-Secr3t-value"


def lumber(
    zk_connect: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "users", *args, "--zookeeper", zk_connect],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_add_list_and_delete_users_keeping_only_salted_credentials(
    zk_connect: str, zk: Any, tmp_path: Path
) -> None:
    password_file = tmp_path / "alice.pass"
    password_file.write_text(SECRET + "\nignored second line\n")
    added = lumber(zk_connect, "add", "alice", "--password-file", str(password_file), "--iterations", "4096")
    assert added.returncode == 0, added.stderr
    assert added.stdout == "user 'alice': credentials for SCRAM-SHA-256, SCRAM-SHA-512 (4096 iterations)\n"
    added = lumber(
        zk_connect, "add", "bob", "--password-env", "BOB_PW", "--mechanism", "SCRAM-SHA-512", "--json",
        env={"BOB_PW": SECRET},
    )  # fmt: skip
    assert json.loads(added.stdout) == {"user": "bob", "mechanisms": ["SCRAM-SHA-512"], "iterations": 8192}

    data, _ = zk.get(zk_paths.user_config_path("alice"))
    assert SECRET.encode() not in data
    stored = zk_paths.decode_user_config("/config/users/alice", data)
    assert sorted(stored) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    credential = ScramCredential.from_text(stored["SCRAM-SHA-512"])
    assert credential.iterations == 4096
    assert credential.matches_password(SECRET, ScramMechanism.SCRAM_SHA_512)
    assert not credential.matches_password("ignored second line", ScramMechanism.SCRAM_SHA_512)

    listed = lumber(zk_connect, "list", "--json")
    assert json.loads(listed.stdout) == [
        {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
        {"user": "bob", "mechanisms": ["SCRAM-SHA-512"]},
    ]
    deleted = lumber(zk_connect, "delete", "alice", "--mechanism", "SCRAM-SHA-256")
    assert deleted.stdout == "user 'alice': deleted the credentials for SCRAM-SHA-256\n"
    assert (
        lumber(zk_connect, "delete", "bob").stdout
        == "user 'bob': deleted the credentials for SCRAM-SHA-512\n"
    )
    assert zk.exists(zk_paths.user_config_path("bob")) is None
    assert (
        lumber(zk_connect, "delete", "carol").stdout
        == "user 'carol' has no such credentials; nothing deleted\n"
    )
    assert lumber(zk_connect, "list").stdout == "alice\tSCRAM-SHA-512\n"
    for done in (added, listed, deleted):
        assert SECRET not in done.stdout + done.stderr


def test_bad_input_is_refused_with_exit_code_2(zk_connect: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.pass"
    empty.write_text("")
    cases = [
        (["add", "alice", "--password-file", str(tmp_path / "missing")], "cannot read the password file"),
        (
            ["add", "alice", "--password-file", str(empty)],
            f"the password from the first line of {empty} is empty",
        ),
        (["add", "alice", "--password-env", "NO_SUCH_VARIABLE_37"], "is empty"),
        (["add", "alice"], "give the password with --password-file PATH or --password-env VAR"),
        (["add", "a/b", "--password-env", "PW"], "not a user name: 'a/b'"),
        (["add", "alice", "--password-env", "PW", "--iterations", "100"], "--iterations 100: at least 4096"),
    ]
    for args, message in cases:
        done = lumber(zk_connect, *args, env={"PW": SECRET})
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert SECRET not in done.stderr
