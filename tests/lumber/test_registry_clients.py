"""Lumber's clients of a registry whose every request must authenticate (issue 37): the audit and the console.

A real ``lumber schemas serve`` over HTTPS with an ``admin`` and a ``readonly`` user
(:func:`tests.support.registry.launch_secure_registry`), a real broker, and ``[registry]`` naming the
readonly user, its password file and the CA file. The operator (``admin``) registers the ``page_view``
schema and the audit's; then, as the readonly user:

* an audited producer (:func:`audit.audited_producer.audited_producer` with ``[registry]``) encodes 12
  views with a serde of ``[registry]`` and publishes its counts through the audit's codec (a lookup of the
  audit schema, which a readonly user may do); the load's counts are published by hand through the codec;
* ``lumber audit verify`` reads and decodes every event through the registry: the hour is COMPLETE, 12
  expected and 12 loaded;
* ``lumber console`` (a process) shows the subject's versions and the topic's records decoded.

With a wrong password, and with no credentials, ``lumber audit verify`` fails with one line naming the
registry's URL and the 401, and the console's pages answer 503 with that line; no password in any output.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from audit.audit_codec import AuditEventCodec
from audit.audit_event import AUDIT_TOPIC, AuditEvent, load_event_id
from audit.audited_producer import audited_producer
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.cli import main as lumber
from lumber.dev.process import free_port, start_and_wait, stop
from lumber.dev.zookeeper_server import ZooKeeperServer
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema, shipped_schema_text
from tests.support.broker_cluster import BrokerCluster, fixture_broker_settings
from tests.support.load_job import page_view
from tests.support.registry import ADMIN_PASSWORD, READER_PASSWORD, SecureRegistry, launch_secure_registry
from tests.support.zookeeper import make_chroot

pytestmark = pytest.mark.zookeeper

TOPIC = "pv"
W = 600_000
T0 = 1_795_334_400_000  # 2026-11-22T08:00Z, a window start
VIEWS = 12
WINDOW = ["--since", "2026-11-22T08", "--until", "2026-11-22T09", "--now", "2026-11-22T12"]


@dataclass
class AuthStack:
    registry: SecureRegistry
    cluster: BrokerCluster
    base: Path
    schema_id: int
    #: partition -> the views produced to it, in offset order
    views: dict[int, list[dict[str, Any]]]

    def config(self, name: str, password_file: Path | None = None, *, credentials: bool = True) -> Path:
        """A ``lumber.toml`` whose ``[registry]`` is the readonly user's (or ``password_file``'s, or none)."""
        registry = (
            self.registry.client_toml("reader", password_file)
            if credentials
            else f'url = "{self.registry.url}"\nssl_cafile = "{self.registry.cafile}"\n'
        )
        path = self.base / f"{name}.toml"
        path.write_text(
            f'[zookeeper]\nconnect = "{self.cluster.zk_connect}"\n\n[registry]\n{registry}\n'
            f'[consumer]\nbootstrap_servers = ["{self.cluster.bootstrap_servers}"]\nfetch_max_wait_ms = 100\n'
            "request_timeout_ms = 5000\n"
        )
        return path

    def wrong_password_file(self) -> Path:
        path = self.base / "wrong.password"
        path.write_text("not-the-password\n")
        return path


def reader_settings(registry: SecureRegistry) -> RegistryConfig:
    return RegistryConfig(
        url=registry.url,
        basic_auth_username="reader",
        basic_auth_password_file=str(registry.password_files["reader"]),
        ssl_cafile=str(registry.cafile),
    )


@pytest.fixture(scope="module")
def auth_stack(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AuthStack]:
    base = tmp_path_factory.mktemp("registry-clients")
    registry = launch_secure_registry(
        make_chroot(zookeeper_server.connect, "registry_clients_registry"), base / "registry"
    )
    cluster = BrokerCluster(make_chroot(zookeeper_server.connect, "registry_clients"), base / "brokers")
    try:
        cluster.add_broker(fixture_broker_settings())
        cluster.create_topic(TOPIC, 2)
        cluster.create_topic(AUDIT_TOPIC, 1)
        with registry.admin() as admin:
            schema_id = admin.register(f"{TOPIC}-value", shipped_schema_text("page_view"))
            admin.register(f"{AUDIT_TOPIC}-value", shipped_schema("audit_event"))
        reader = reader_settings(registry)
        servers = cluster.bootstrap_servers.split(",")
        producer = audited_producer(
            ProducerConfig(
                bootstrap_servers=servers,
                host_name="web-1",
                acks="all",
                linger_ms=0,
                max_block_ms=10_000,
                audit_interval_ms=3_600_000,  # close() emits
                audit_registry_url=registry.url,
            ),
            registry=reader,
        )
        views: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
        with AvroSerde.from_config(reader) as serde:
            futures = []
            for n in range(VIEWS):
                view = page_view(n, T0 + 1000 * n, v2=False)
                views[n % 2].append(view)
                payload = serde.encode(schema_id, view)
                futures.append(producer.send(TOPIC, payload, partition=n % 2, timestamp_ms=T0 + 1000 * n))
            for future in futures:
                future.result(10)
            producer.close()
            # the load's counts of the window, as a load publishes them, through the codec of [registry]
            codec = AuditEventCodec(serde.client)
            loaded = AuditEvent(
                TOPIC, "load", "etl", T0, W, VIEWS, 0, 0, 0,
                load_event_id("hourly", "r1", TOPIC, 0, T0, W), T0 + 3_600_000, partition=0, counter="r1",
                job="hourly",
            )  # fmt: skip
            with Producer(ProducerConfig(bootstrap_servers=servers, acks="all")) as publisher:
                publisher.send(AUDIT_TOPIC, codec.encode(loaded), key=codec.key(loaded)).result(10)
        yield AuthStack(registry, cluster, base, schema_id, views)
    finally:
        cluster.stop()
        registry.stop()


def no_password_in(*texts: str) -> None:
    for text in texts:
        assert READER_PASSWORD not in text
        assert ADMIN_PASSWORD not in text


def refusal(stack: AuthStack, path: str, who: str = "user 'reader'") -> str:
    """The one line a client says when the registry answers ``GET path`` with 401."""
    return (
        f"GET {stack.registry.url}{path}: HTTP 401 Unauthorized: the schema registry refused {who} "
        "([registry] basic_auth_username and its password)"
    )


def test_the_audit_reconciles_through_the_registry_and_names_a_refusal(
    auth_stack: AuthStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = auth_stack
    verify = ["audit", "verify", "--topic", TOPIC, "--window", "10m", *WINDOW, "--json"]
    capsys.readouterr()
    assert lumber(["--config", str(stack.config("reader")), *verify]) == 0
    out, err = capsys.readouterr()
    found = json.loads(out)
    windows = [
        (w["window_start"], w["expected"], w["loaded"], w["missing"], w["status"]) for w in found["windows"]
    ]
    assert windows == [("2026-11-22 08:00", VIEWS, VIEWS, 0, "COMPLETE")]
    assert found["events"]["unreadable"] == 0
    no_password_in(out, err)

    # a reader decodes each event by its schema id: the first request of a refused reader asks for it
    with stack.registry.admin() as admin:
        audit_id = admin.lookup(f"{AUDIT_TOPIC}-value", shipped_schema("audit_event")).schema_id
    for config, who in (
        (stack.config("wrong", stack.wrong_password_file()), "user 'reader'"),
        (stack.config("anonymous", credentials=False), "no credentials"),
    ):
        assert lumber(["--config", str(config), *verify]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err == f"lumber: error: {refusal(stack, f'/schemas/ids/{audit_id}', who)}\n"
        no_password_in(out, err)


@pytest.fixture(scope="module")
def consoles(auth_stack: AuthStack) -> Iterator[dict[str, str]]:
    """``lumber console`` processes: ``reader`` with the readonly user's credentials, ``wrong`` with a wrong
    password; name -> base URL."""
    stack = auth_stack
    started = []
    urls = {}
    try:
        for name, password_file in (("reader", None), ("wrong", stack.wrong_password_file())):
            port = free_port()
            config = stack.config(f"console-{name}", password_file)
            config.write_text(config.read_text() + f"\n[console]\nport = {port}\n")
            url = urls[name] = f"http://127.0.0.1:{port}"
            argv = [sys.executable, "-m", "lumber", "--config", str(config), "console"]

            def answers(url: str = url) -> bool:
                try:
                    return httpx.get(url + "/", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            started.append(
                start_and_wait(
                    f"console-{name}", argv, stack.base / f"console-{name}.log", answers, timeout_s=60
                )
            )
        yield urls
    finally:
        for handle, popen in started:
            stop(handle, popen=popen)
            popen.wait(timeout=30)


def test_the_console_shows_schemas_and_decoded_records_and_names_a_refusal(
    auth_stack: AuthStack, consoles: dict[str, str]
) -> None:
    stack = auth_stack
    reader = consoles["reader"]
    subject = httpx.get(f"{reader}/schemas/{TOPIC}-value", params={"format": "json"}, timeout=30)
    assert subject.status_code == 200, subject.text
    assert [(v["version"], v["id"]) for v in subject.json()["versions"]] == [(1, stack.schema_id)]
    for partition, views in stack.views.items():
        page = httpx.get(
            f"{reader}/topics/{TOPIC}",
            params={"partition": partition, "offset": 0, "format": "json"},
            timeout=30,
        )
        assert page.status_code == 200, page.text
        records = page.json()["page"]["records"]
        assert [
            (r["offset"], r["schema_id"], r["subject"], r["version"], r["decode_error"]) for r in records
        ] == [(offset, stack.schema_id, f"{TOPIC}-value", 1, None) for offset in range(len(views))]
        assert [r["value"] for r in records] == views
        html = httpx.get(f"{reader}/topics/{TOPIC}", params={"partition": partition, "offset": 0}, timeout=30)
        assert html.status_code == 200
        assert views[0]["event_id"] in html.text

    wrong = consoles["wrong"]
    refused = httpx.get(f"{wrong}/schemas/{TOPIC}-value", params={"format": "json"}, timeout=30)
    assert refused.status_code == 503
    assert refused.json()["message"] == "schema registry: " + refusal(
        stack, f"/subjects/{TOPIC}-value/versions"
    )
    page = httpx.get(
        f"{wrong}/topics/{TOPIC}", params={"partition": 0, "offset": 0, "format": "json"}, timeout=30
    )
    assert page.status_code == 200, page.text
    errors = {r["decode_error"] for r in page.json()["page"]["records"]}
    assert errors == {
        f"not decodable: schema id {stack.schema_id}: {refusal(stack, f'/schemas/ids/{stack.schema_id}')}"
    }
    no_password_in(page.text)
    for name in consoles:
        no_password_in((stack.base / f"console-{name}.log").read_text())
