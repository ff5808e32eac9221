"""``lumber groups lag --watch --metrics-port`` secured by ``[lag_exporter]`` (lumber/cli/groups.py,
pipeline/lag_exporter_config.py), as a subprocess against a real broker: bound beyond 127.0.0.1 without
users it refuses to start naming the flag and the key; with users and TLS it serves HTTPS to a user of the
file only, and the console's reader (lumber/console/lag_exporter_reader.py) reaches it with
``[console] lag_exporter_username``, ``lag_exporter_password_file`` and ``lag_exporter_cafile``."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from broker.web.password_hash import PasswordHash
from broker.web.users_file import Role, User, write_users
from lumber.config import ConsoleConfig, LumberConfig
from lumber.console.lag_exporter_reader import read_exporter_statuses
from lumber.console.sources import Sources
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from tests.broker.client.groups.group_helpers import member, produce, wait_settled
from tests.lumber.cli.test_groups import drain
from tests.support.broker_cluster import servers

PASSWORD = "lag-Secret-2718"


def _config(tmp_path: Path, cluster: Any, lag_exporter: str = "") -> Path:
    config = tmp_path / "lumber.toml"
    config.write_text(
        f'[zookeeper]\nconnect = "{cluster.zk_connect}"\n\n'
        f"[consumer]\nbootstrap_servers = {json.dumps(servers(cluster))}\n\n"
        f"[lag_exporter]\n{lag_exporter}"
    )
    return config


def test_beyond_loopback_without_users_the_lag_exporter_refuses(start_cluster: Any, tmp_path: Path) -> None:
    cluster = start_cluster(1)
    config = _config(tmp_path, cluster)
    base = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag", "--all-groups"]
    refused = subprocess.run(
        [*base, "--watch", "--count", "1", "--metrics-port", str(free_port()), "--metrics-host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "lumber: error: lumber lag exporter: --metrics-host = '0.0.0.0' reaches beyond 127.0.0.1 and "
        "[lag_exporter] users_file is not set: give it users (lumber http-users add) or set [lag_exporter] "
        "allow_unauthenticated = true\n"
    )


def test_allowed_unauthenticated_the_lag_exporter_starts_and_warns(
    start_cluster: Any, tmp_path: Path
) -> None:
    cluster = start_cluster(1)
    config = _config(tmp_path, cluster, "allow_unauthenticated = true\n")
    argv = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag", "--all-groups"]
    argv += ["--watch", "--interval", "200ms", "--count", "2", "--metrics-port", str(free_port())]
    started = subprocess.run(
        [*argv, "--metrics-host", "0.0.0.0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert started.returncode == 0, started.stderr
    assert started.stderr.splitlines()[0] == (
        "lumber: warning: lumber lag exporter: serving '0.0.0.0' WITHOUT authentication "
        "([lag_exporter] allow_unauthenticated = true): anyone who reaches it is served"
    )


def test_a_secured_lag_exporter_and_the_console_reading_it(start_cluster: Any, tmp_path: Path) -> None:
    cluster = start_cluster(1)
    cluster.create_topic("events", 1)
    produce(cluster, "events", 1, 4)
    with member(cluster, "audit", auto_commit_enable=False) as m:  # its close commits the 4 handed out
        m.subscribe("events")
        wait_settled(cluster, "audit", "events", 1, [m], 15)
        drain(m, 4)
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("lag-exporter")
    users = tmp_path / "http-users"
    write_users(users, {"console": User("console", Role.READ, PasswordHash.make(PASSWORD))})
    config = _config(
        tmp_path,
        cluster,
        f'users_file = "{users}"\nssl_certfile = "{issued.certfile}"\nssl_keyfile = "{issued.keyfile}"\n',
    )
    port = free_port()
    argv = [sys.executable, "-m", "lumber", "--config", str(config), "groups", "lag", "--all-groups"]
    argv += ["--watch", "--interval", "200ms", "--count", "600", "--json", "--metrics-port", str(port)]
    url = f"https://localhost:{port}"
    verify = ssl.create_default_context(cafile=str(ca.cafile))
    log_path = tmp_path / "watch.log"
    with (
        log_path.open("w") as log,
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log) as watcher,
    ):
        try:
            deadline = time.monotonic() + 60
            good = None
            while time.monotonic() < deadline:
                try:
                    good = httpx.get(f"{url}/metrics", auth=("console", PASSWORD), verify=verify, timeout=5)
                    if 'consumergroup="audit"' in good.text:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            assert good is not None
            assert good.status_code == 200, log_path.read_text()
            assert "kafka_consumergroup_lag_sum" in good.text
            bare = httpx.get(f"{url}/metrics", verify=verify, timeout=5)
            assert bare.status_code == 401

            password_file = tmp_path / "console-lag.pass"
            password_file.write_text(PASSWORD + "\n")
            console = ConsoleConfig(
                lag_exporter_url=url,
                lag_exporter_username="console",
                lag_exporter_password_file=str(password_file),
                lag_exporter_cafile=str(ca.cafile),
            )
            statuses, note = read_exporter_statuses(
                Sources(LumberConfig().replace(console=console)), int(time.time() * 1000)
            )
            assert (list(statuses), note) == ([("audit", "zookeeper")], "")
            without = console.replace(lag_exporter_username="", lag_exporter_password_file="")
            statuses, note = read_exporter_statuses(
                Sources(LumberConfig().replace(console=without)), int(time.time() * 1000)
            )
            assert statuses == {}
            assert "401 Unauthorized" in note
        finally:
            watcher.terminate()
            watcher.wait(30)
