"""The console secured ([console] users_file, ssl_certfile, ssl_keyfile; lumber/console/console_auth.py):
HTTPS with a CA made in the test, users added with the real ``lumber http-users``, ``lumber console`` as a
process and Debian's Chromium. Without credentials 401 with ``WWW-Authenticate: Basic``; a wrong password
401 and logged with the client's address and the user name, never the password; a read-only user sees the
group and the reset's moves but no button, and a POST of theirs is 403 with the group's offsets in
ZooKeeper untouched (data and versions); an admin resets from the page and the offsets are exactly the log
starts. Bound beyond 127.0.0.1 without users the console refuses to start, naming the key; with
allow_unauthenticated it starts and warns. ``lumber config show`` prints paths, never a password or a
hash."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient
from playwright.sync_api import Browser

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.zookeeper.group_admin import GroupAdmin
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from lumber.config import ConsoleConfig, LumberConfig, dump_config
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port, start_and_wait, stop
from tests.lumber.console.conftest import Visit
from tests.support.broker_cluster import BrokerCluster, servers, wait_for

pytestmark = pytest.mark.zookeeper

ADMIN_PASSWORD = "adm-Secret-4471"
READ_PASSWORD = "read-Secret-8812"
WRONG_PASSWORD = "guess-Secret-0000"
GROUP = "readers"
TOPIC = "events"


@dataclass
class SecureConsole:
    url: str
    cafile: Path
    log: Path
    config_path: Path
    users_file: Path
    cluster: BrokerCluster

    def client(self) -> httpx.Client:
        return httpx.Client(verify=ssl.create_default_context(cafile=str(self.cafile)), timeout=30)


def _lumber(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _config(cluster: BrokerCluster, console: ConsoleConfig) -> LumberConfig:
    config = LumberConfig().replace(console=console)
    config = config.replace(zookeeper=config.zookeeper.replace(connect=cluster.zk_connect))
    return config.replace(
        consumer=config.consumer.replace(bootstrap_servers=servers(cluster), auto_offset_reset="earliest")
    )


def _zookeeper_group(cluster: BrokerCluster) -> None:
    """Group GROUP reads the 10 records of TOPIC (5 per partition) and leaves: its close commits what was
    handed out, 5 and 5, which stay in ZooKeeper."""
    cluster.create_topic(TOPIC, 2)
    with Producer(ProducerConfig(bootstrap_servers=servers(cluster), acks="all")) as producer:
        for i in range(10):
            producer.send(TOPIC, b"v%d" % i, partition=i % 2).result(10)
    member = GroupConsumer(
        GROUP,
        zookeeper_connect=cluster.zk_connect,
        config=GroupConfig(auto_commit_enable=False),
        consumer_config=ConsumerConfig(
            bootstrap_servers=servers(cluster), auto_offset_reset="earliest", fetch_max_wait_ms=100
        ),
    )
    try:
        member.subscribe([TOPIC])
        seen: list[Any] = []

        def read_all() -> bool:
            seen.extend(member.poll(timeout_ms=200))
            return len(seen) >= 10

        wait_for(read_all, 60, "the group to read the 10 records")
    finally:
        member.close()


def _offsets_in_zookeeper(zk: KazooClient) -> dict[str, tuple[bytes, int]]:
    """Every znode under the group's offsets: path -> (data, version)."""
    found: dict[str, tuple[bytes, int]] = {}
    base = zk_paths.group_offsets_path(GROUP)
    for topic in zk.get_children(base):
        for partition in zk.get_children(f"{base}/{topic}"):
            path = f"{base}/{topic}/{partition}"
            data, stat = zk.get(path)
            found[path] = (data, stat.version)
    return found


@pytest.fixture
def secure_console(start_cluster: Callable[..., BrokerCluster], tmp_path: Path) -> Iterator[SecureConsole]:
    cluster = start_cluster(1)
    _zookeeper_group(cluster)
    issued = CertificateAuthority(tmp_path / "ca").issue("console")
    users = tmp_path / "http-users"
    for name, role, password in (("ann", "admin", ADMIN_PASSWORD), ("rob", "read", READ_PASSWORD)):
        added = _lumber(
            "http-users",
            "add",
            name,
            "--role",
            role,
            "--password-env",
            "PW",
            "--users-file",
            str(users),
            env={"PW": password},
        )
        assert (added.returncode, added.stdout) == (0, f"user {name!r}: role {role}, in {users}\n")
    console = ConsoleConfig(
        port=free_port(),
        users_file=str(users),
        ssl_certfile=str(issued.certfile),
        ssl_keyfile=str(issued.keyfile),
    )
    path = tmp_path / "console.toml"
    path.write_text(dump_config(_config(cluster, console)))
    secured = SecureConsole(
        f"https://localhost:{console.port}",
        tmp_path / "ca" / "ca.pem",
        tmp_path / "console.log",
        path,
        users,
        cluster,
    )

    def answers() -> bool:
        try:
            with secured.client() as client:
                return client.get(secured.url + "/").status_code == 401
        except httpx.HTTPError:
            return False

    argv = [sys.executable, "-m", "lumber", "--config", str(path), "console"]
    process = start_and_wait("console", argv, secured.log, answers, timeout_s=60)
    try:
        yield secured
    finally:
        stop(process[0], popen=process[1])


def test_credentials_are_required_and_a_failure_is_logged_without_the_password(
    secure_console: SecureConsole,
) -> None:
    with secure_console.client() as client:
        bare = client.get(secure_console.url + "/groups")
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"] == 'Basic realm="Lumber", charset="UTF-8"'
        assert GROUP not in bare.text
        wrong = client.get(secure_console.url + "/groups", auth=("rob", WRONG_PASSWORD))
        assert wrong.status_code == 401
        seen = client.get(
            secure_console.url + "/groups", params={"format": "json"}, auth=("rob", READ_PASSWORD)
        )
        assert seen.status_code == 200
        assert [g["group"] for g in seen.json()["groups"]] == [GROUP]
    log = secure_console.log.read_text()
    failures = [line for line in log.splitlines() if "authentication failed" in line]
    assert len(failures) == 1, log
    assert failures[0].endswith(
        "lumber console: authentication failed from 127.0.0.1 as user 'rob': wrong password"
    )
    for secret in (WRONG_PASSWORD, READ_PASSWORD, ADMIN_PASSWORD):
        assert secret not in log
    # TLS: a client that does not trust the test's CA is refused
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(secure_console.url + "/groups", auth=("rob", READ_PASSWORD), timeout=10)


def _browser_visit(browser: Browser, console: SecureConsole, user: str, password: str, shots: Path) -> Visit:
    # Chromium keeps its own trust store: the certificate is checked by httpx against the CA (above), the
    # browser is told to accept it
    context = browser.new_context(
        http_credentials={"username": user, "password": password},
        ignore_https_errors=True,
        viewport={"width": 1400, "height": 900},
    )
    return Visit(context.new_page(), console.url, shots)


def test_a_read_only_user_sees_the_moves_but_may_not_reset(
    secure_console: SecureConsole, browser: Browser, tmp_path: Path
) -> None:
    zk = secure_console.cluster.zk
    before = _offsets_in_zookeeper(zk)
    assert len(before) == 2
    visit = _browser_visit(browser, secure_console, "rob", READ_PASSWORD, tmp_path)
    try:
        page = visit.open(f"/groups/{GROUP}", "read-only-group")
        assert page.locator("#read-only").inner_text() == "Resetting offsets needs the admin role."
        assert page.locator('button:has-text("Show the moves")').count() == 0
        page = visit.open(f"/groups/{GROUP}/reset?topic={TOPIC}&to=earliest", "read-only-moves")
        moves = [r.locator("td").all_inner_texts() for r in page.locator("main table tr").all()[1:]]
        assert moves == [["0", "5", "0"], ["1", "5", "0"]]
        assert page.locator("#confirm").count() == 0
        assert page.locator("#read-only").count() == 1
    finally:
        visit.page.context.close()
    with secure_console.client() as client:
        refused = client.post(
            f"{secure_console.url}/groups/{GROUP}/reset",
            params={"topic": TOPIC, "to": "earliest", "kind": "zookeeper", "confirm": "yes"},
            auth=("rob", READ_PASSWORD),
        )
        assert refused.status_code == 403
        assert "needs the admin role; this user has role read" in refused.text
        data = client.get(
            f"{secure_console.url}/groups/{GROUP}/reset",
            params={"topic": TOPIC, "to": "earliest", "format": "json"},
            auth=("rob", READ_PASSWORD),
        ).json()
        assert data["allowed"] is False
    assert _offsets_in_zookeeper(zk) == before


def test_an_admin_resets_from_the_page(
    secure_console: SecureConsole, browser: Browser, tmp_path: Path
) -> None:
    zk = secure_console.cluster.zk
    before = _offsets_in_zookeeper(zk)
    visit = _browser_visit(browser, secure_console, "ann", ADMIN_PASSWORD, tmp_path)
    try:
        page = visit.open(f"/groups/{GROUP}", "admin-group")
        assert page.locator("#read-only").count() == 0
        page.fill('input[name="topic"]', TOPIC)
        page.click('button:has-text("Show the moves")')
        page.wait_for_url(f"**/groups/{GROUP}/reset?topic={TOPIC}&to=earliest&kind=zookeeper")
        page.click("#confirm")
        page.wait_for_selector("#done")
        assert visit.errors == []
    finally:
        visit.page.context.close()
    after = _offsets_in_zookeeper(zk)
    assert sorted(after) == sorted(before)
    committed = GroupAdmin(zk).committed(GROUP, [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    assert committed == {TopicPartition(TOPIC, 0): 0, TopicPartition(TOPIC, 1): 0}
    assert all(after[path][1] > before[path][1] for path in before)


def test_config_show_prints_paths_and_no_secret(secure_console: SecureConsole) -> None:
    shown = _lumber("--config", str(secure_console.config_path), "config", "show")
    assert shown.returncode == 0, shown.stderr
    assert f'users_file = "{secure_console.users_file}"' in shown.stdout
    hashes = [line.split(":", 2)[2] for line in secure_console.users_file.read_text().splitlines()[1:]]
    assert len(hashes) == 2
    for secret in (ADMIN_PASSWORD, READ_PASSWORD, *hashes):
        assert secret not in shown.stdout
    listed = _lumber("http-users", "list", "--users-file", str(secure_console.users_file))
    assert listed.stdout == "ann\tadmin\nrob\tread\n"


def test_beyond_loopback_without_users_the_console_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "console.toml"
    path.write_text(
        dump_config(LumberConfig().replace(console=ConsoleConfig(host="0.0.0.0", port=free_port())))
    )
    refused = _lumber("--config", str(path), "console")
    assert refused.returncode == 2
    assert refused.stderr == (
        "lumber: error: lumber console: [console] host = '0.0.0.0' reaches beyond 127.0.0.1 and [console] "
        "users_file is not set: give it users (lumber http-users add) or set [console] allow_unauthenticated "
        "= true\n"
    )


def test_allowed_unauthenticated_the_console_starts_and_warns(tmp_path: Path) -> None:
    port = free_port()
    console = ConsoleConfig(host="0.0.0.0", port=port, allow_unauthenticated=True)
    path = tmp_path / "console.toml"
    path.write_text(dump_config(LumberConfig().replace(console=console)))

    def answers() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/no-such-page", timeout=2).status_code == 404
        except httpx.HTTPError:
            return False

    argv = [sys.executable, "-m", "lumber", "--config", str(path), "console"]
    process = start_and_wait("console", argv, tmp_path / "console.log", answers, timeout_s=60)
    stop(process[0], popen=process[1])
    warnings = [line for line in (tmp_path / "console.log").read_text().splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "lumber console: serving '0.0.0.0' WITHOUT authentication ([console] allow_unauthenticated = true): "
        "anyone who reaches it is served"
    )
