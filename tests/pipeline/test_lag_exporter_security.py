"""The lag exporter secured (pipeline/lag_exporter.py through broker/web): HTTPS with a CA made in the test
and HTTP Basic users. Without credentials 401 with ``WWW-Authenticate: Basic``; a wrong password 401 and
logged with the address and the user name, never the password; a user of the file reads the metrics, which
Debian's ``promtool check metrics`` parses; and a real Prometheus scrapes them with ``basic_auth`` and
``tls_config``."""

from __future__ import annotations

import logging
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from broker.client.groups.lag_evaluation import LagWindow
from broker.record.topic_partition import TopicPartition
from broker.web.password_hash import PasswordHash
from broker.web.users_file import Role, User, write_users
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from pipeline.lag_exporter import start_lag_exporter
from pipeline.lag_exporter_config import LagExporterConfig
from pipeline.lag_metrics import LagCollector

TP = TopicPartition("events", 0)
PASSWORD = "scrape-me-7Qx"
WRONG = "not-the-password-9Zk"


@dataclass
class Exporter:
    url: str
    cafile: Path
    users_file: Path
    collector: LagCollector


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[Exporter]:
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("exporter")
    users = tmp_path / "http-users"
    write_users(users, {"prometheus": User("prometheus", Role.READ, PasswordHash.make(PASSWORD))})
    config = LagExporterConfig(
        users_file=str(users), ssl_certfile=str(issued.certfile), ssl_keyfile=str(issued.keyfile)
    )
    security = config.security()
    assert security.check() == []
    collector = LagCollector()
    window = LagWindow(window=2)
    for t, (committed, end) in enumerate([(3, 10), (5, 12), (9, 12)]):
        window.observe(1000 * t, {TP: (committed, 1000 * t)}, {TP: end})
    collector.update("audit", "zookeeper", window.evaluate(2500), window.samples())
    server = start_lag_exporter(collector, free_port(), security)
    try:
        yield Exporter(f"https://localhost:{server.port}", ca.cafile, users, collector)
    finally:
        server.stop()


def _client(exporter: Exporter) -> httpx.Client:
    return httpx.Client(verify=ssl.create_default_context(cafile=str(exporter.cafile)), timeout=10)


def test_credentials_are_required_and_failures_logged_without_the_password(
    exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(exporter) as client:
        bare = client.get(f"{exporter.url}/metrics")
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"].startswith('Basic realm="Lumber"')
        assert "kafka_consumergroup_lag" not in bare.text
        with caplog.at_level(logging.WARNING, logger="broker.web.basic_auth"):
            wrong = client.get(f"{exporter.url}/metrics", auth=("prometheus", WRONG))
            unknown = client.get(f"{exporter.url}/lag-history", auth=("mallory", PASSWORD))
        assert (wrong.status_code, unknown.status_code) == (401, 401)
        assert [r.getMessage() for r in caplog.records] == [
            "lumber lag exporter: authentication failed from 127.0.0.1 as user 'prometheus': wrong password",
            "lumber lag exporter: authentication failed from 127.0.0.1 as user 'mallory': unknown user",
        ]
        assert WRONG not in caplog.text
        assert PASSWORD not in caplog.text
        good = client.get(f"{exporter.url}/lag-history", auth=("prometheus", PASSWORD))
        assert good.status_code == 200
        assert [g["group"] for g in good.json()["groups"]] == ["audit"]
    # plain HTTP to the TLS port, and TLS without the CA: no answer
    with pytest.raises(httpx.HTTPError):
        httpx.get(exporter.url.replace("https", "http") + "/metrics", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{exporter.url}/metrics", auth=("prometheus", PASSWORD), timeout=5)


def test_promtool_accepts_the_metrics_read_over_https_with_basic_auth(exporter: Exporter) -> None:
    with _client(exporter) as client:
        text = client.get(f"{exporter.url}/metrics", auth=("prometheus", PASSWORD)).text
    assert (
        'kafka_consumergroup_lag{consumergroup="audit",kind="zookeeper",partition="0",topic="events"} 3.0'
        in text.splitlines()
    )
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    # parsed (a parse error is exit 1); its one lint (exit 3) is kafka_exporter's own name, kept on purpose
    assert (checked.returncode, checked.stderr.splitlines()) == (
        3,
        ['kafka_consumergroup_lag_sum non-histogram and non-summary metrics should not have "_sum" suffix'],
    ), checked.stdout + checked.stderr


def test_a_real_prometheus_scrapes_with_basic_auth_and_tls_config(exporter: Exporter, tmp_path: Path) -> None:
    password_file = tmp_path / "scrape.pass"
    password_file.write_text(PASSWORD + "\n")
    target = exporter.url.removeprefix("https://")
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: lag\n    scheme: https\n"
        f"    basic_auth:\n      username: prometheus\n      password_file: {password_file}\n"
        f"    tls_config:\n      ca_file: {exporter.cafile}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
        "  - job_name: lag-without-credentials\n    scheme: https\n"
        f"    tls_config:\n      ca_file: {exporter.cafile}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        api = f"http://127.0.0.1:{port}/api/v1"
        deadline = time.monotonic() + 60
        health: dict[str, tuple[str, str]] = {}
        lag: list[str] = []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:  # the query first: a lag found was scraped before the targets' health is read
                found = httpx.get(
                    f"{api}/query", params={"query": 'kafka_consumergroup_lag{job="lag"}'}, timeout=5
                ).json()["data"]["result"]
                targets = httpx.get(f"{api}/targets", timeout=5).json()["data"]["activeTargets"]
                health = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in targets}
            except (httpx.HTTPError, KeyError, ValueError):
                continue
            lag = [r["value"][1] for r in found]
            scraped = [health.get(job, ("unknown",))[0] for job in ("lag", "lag-without-credentials")]
            if lag and "unknown" not in scraped:
                break
        assert lag == ["3"], (health, (tmp_path / "prometheus.log").read_text()[-2000:])
        assert health["lag"] == ("up", "")
        assert health["lag-without-credentials"][0] == "down"
        assert "401" in health["lag-without-credentials"][1]
    finally:
        prometheus.terminate()
        prometheus.wait(30)
        log.close()
