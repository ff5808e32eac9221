"""A broker's metrics endpoint secured ([broker] metrics_users_file, metrics_ssl_certfile,
metrics_ssl_keyfile; broker/server/broker_server.py through broker/web): real broker processes. Over HTTPS
with a CA made in the test, a scrape without credentials or with a wrong password is 401 (logged with the
address and user, never the password) and a user of the file reads the metrics. A broker whose host reaches
beyond 127.0.0.1 with metrics on and no users refuses to start, naming [broker]
metrics_allow_unauthenticated (exit 2, before it connects anywhere); with it, the broker starts and
warns."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from broker.web.password_hash import PasswordHash
from broker.web.users_file import Role, User, write_users
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from tests.support.broker_cluster import BrokerCluster

PASSWORD = "metrics-Secret-5150"
WRONG = "metrics-Guess-0451"


def test_metrics_over_https_need_a_user_of_the_file(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    issued = CertificateAuthority(tmp_path / "ca").issue("broker-metrics")
    users = tmp_path / "http-users"
    write_users(users, {"prometheus": User("prometheus", Role.READ, PasswordHash.make(PASSWORD))})
    port = free_port()
    cluster = start_cluster(
        1,
        metrics_port=port,
        metrics_users_file=str(users),
        metrics_ssl_certfile=str(issued.certfile),
        metrics_ssl_keyfile=str(issued.keyfile),
    )
    url = f"https://localhost:{port}/metrics"
    with httpx.Client(
        verify=ssl.create_default_context(cafile=str(tmp_path / "ca" / "ca.pem")), timeout=10
    ) as c:
        bare = c.get(url)
        wrong = c.get(url, auth=("prometheus", WRONG))
        good = c.get(url, auth=("prometheus", PASSWORD))
    assert (bare.status_code, wrong.status_code, good.status_code) == (401, 401, 200)
    assert bare.headers["www-authenticate"] == 'Basic realm="Lumber", charset="UTF-8"'
    assert "kafka_server_replicamanager_partitioncount" not in bare.text
    assert "kafka_server_replicamanager_partitioncount 0.0" in good.text.splitlines()
    log = cluster.broker(0).log_path.read_text()
    failed = [line for line in log.splitlines() if "authentication failed" in line]
    assert len(failed) == 1
    assert failed[0].endswith(
        "broker 0's metrics: authentication failed from 127.0.0.1 as user 'prometheus': wrong password"
    )
    assert WRONG not in log
    assert PASSWORD not in log
    assert f"broker 0: metrics on https://127.0.0.1:{port}/metrics" in log


def test_beyond_loopback_without_users_the_broker_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "lumber.toml"
    config.write_text(
        '[zookeeper]\nconnect = "127.0.0.1:1"\n'
        f'[broker]\nhost = "0.0.0.0"\nport = {free_port()}\nmetrics_port = {free_port()}\n'
        f'[log]\nlog_dirs = ["{tmp_path / "logs"}"]\n'
    )
    refused = subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), "broker", "start"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == (
        "lumber: error: broker 0's metrics: [broker] host = '0.0.0.0' reaches beyond 127.0.0.1 and "
        "[broker] metrics_users_file is not set: give it users (lumber http-users add) or set [broker] "
        "metrics_allow_unauthenticated = true"
    )
    assert not (tmp_path / "logs").exists()  # refused before anything was opened


def test_allowed_unauthenticated_the_broker_starts_and_warns(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    port = free_port()
    cluster = start_cluster(
        1,
        host="0.0.0.0",
        advertised_host="127.0.0.1",
        metrics_port=port,
        metrics_allow_unauthenticated=True,
    )
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scraped.status_code == 200
    warnings = [line for line in cluster.broker(0).log_path.read_text().splitlines() if "WARNING" in line]
    expected = (
        "broker 0's metrics: serving '0.0.0.0' WITHOUT authentication ([broker] "
        "metrics_allow_unauthenticated = true): anyone who reaches it is served"
    )
    assert [w.split(": ", 1)[1] for w in warnings if "WITHOUT authentication" in w] == [expected]
