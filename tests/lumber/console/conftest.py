"""One real stack for the console's tests, shared by the package: a broker, the registry, a Spark load,
audited producers, a live consumer group, and ``lumber console`` itself as a process; and Debian's
Chromium, headless, driven by Playwright (``browser``, ``visit``).

The stack is built once per pytest process (session scope, though only this package sees it): as a
package fixture it was torn down and built again, Spark load and all, whenever pytest-xdist gave a worker
another package's file between two of the console's.

The story (times are 2026-11-22, three days before this repository's clock, so every window has ended):

1. topic T (2 partitions), schemas v1 and v2 under ``T-value``; host ``web-1`` (audited) produces 6 v1
   views to partition 0 and 4 v2 views to partition 1 in hour 08, and one record that is not Avro
   (``NOT_AVRO``) to partition 0 (offset 6);
2. the load job runs once in the session's Spark: 10 rows and 1 quarantined record, committed; its counts go
   to the audit topic: hour 08 is COMPLETE (11 expected, 10 loaded, 1 malformed);
3. host ``web-2`` (audited) produces 3 v1 views to partition 1 in hour 09 and nothing loads them: hour 09 is
   INCOMPLETE (3 expected, 0 loaded, 3 missing);
4. group G's member reads everything and commits partition 0 at 5 and partition 1 at 7 (lag 2 and 0); it
   stays in the group while the tests run;
5. kafka group K: a confluent-kafka consumer (client id ``console-k``) reads everything and commits
   partition 0 at 3 and partition 1 at 7 (lag 4 and 0); it stays in the group while the tests run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from audit.audited_producer import audited_producer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.config import ConsoleConfig, LumberConfig, dump_config
from lumber.dev.process import free_port, start_and_wait, stop
from lumber.dev.zookeeper_server import ZooKeeperServer
from pipeline.load_job import run_load
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import BrokerCluster, fixture_broker_settings, wait_for
from tests.support.confluent_group import confluent_group_member
from tests.support.load_job import BASE_MS, HOUR_MS, load_config, page_view, unique_topic
from tests.support.registry import RegistryProcess
from tests.support.zookeeper import make_chroot

NOT_AVRO = b"\x07this is not Avro"
HOUR_08 = BASE_MS
HOUR_09 = BASE_MS + HOUR_MS


@dataclass
class ConsoleStack:
    url: str
    topic: str
    group: str
    kafka_group: str
    job: str
    warehouse: Path
    registry: RegistryProcess
    cluster: BrokerCluster
    #: the console's config (``lumber.toml``), for another console or command on the same stack
    config: LumberConfig = field(default_factory=LumberConfig)
    #: partition -> the values produced, in offset order (dicts; NOT_AVRO for the bad record)
    values: dict[int, list[Any]] = field(default_factory=dict)
    schema_ids: dict[str, int] = field(default_factory=dict)
    #: topics the package's tests created on the stack (:meth:`create_topic`), beside :attr:`topic`: the
    #: cluster page lists exactly these, whichever of those tests ran before it on the worker
    other_topics: set[str] = field(default_factory=set)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` on the stack's cluster for one test, and remember it in :attr:`other_topics`."""
        self.other_topics.add(topic)
        self.cluster.create_topic(topic, partitions)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params or None, timeout=30)  # {} would drop ?query


def _producer(cluster: BrokerCluster, registry: RegistryProcess, host: str) -> Producer:
    return audited_producer(
        ProducerConfig(
            bootstrap_servers=cluster.bootstrap_servers.split(","),
            host_name=host,
            acks="all",
            linger_ms=0,
            max_block_ms=10_000,
            audit_interval_ms=3_600_000,  # only close() emits
            audit_registry_url=registry.url,
        ),
        registry=RegistryConfig(url=registry.url),
    )


def _send(
    stack: ConsoleStack, producer: Producer, partition: int, values: list[Any], ts_ms: int, raw: list[bytes]
) -> None:
    futures = [
        producer.send(
            stack.topic,
            value,
            key=f"key-{partition}-{i}".encode(),
            partition=partition,
            timestamp_ms=ts_ms + 1000 * i,
            headers=[("host", b"console-test")],
        )
        for i, value in enumerate(raw)
    ]
    producer.flush()
    for future in futures:
        future.result(0)
    stack.values.setdefault(partition, []).extend(values)


@pytest.fixture(scope="session")
def console_stack(
    zookeeper_server: ZooKeeperServer,
    load_registry: RegistryProcess,
    spark: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConsoleStack]:
    base = tmp_path_factory.mktemp("console-stack")
    cluster = BrokerCluster(make_chroot(zookeeper_server.connect, "console_stack"), base / "brokers")
    members: list[GroupConsumer] = []
    console = None
    kafka_members = ExitStack()
    try:
        cluster.add_broker(fixture_broker_settings())
        topic = unique_topic("page_view")
        cluster.create_topic(topic, 2)
        registry = SchemaRegistryClient(load_registry.url)
        v1 = registry.register(f"{topic}-value", shipped_schema_text("page_view"))
        v2 = registry.register(f"{topic}-value", shipped_schema_text("page_view_v2"))
        serde = AvroSerde(registry)
        stack = ConsoleStack(
            "",
            topic,
            unique_topic("group"),
            unique_topic("kgroup"),
            unique_topic("job"),
            base / "warehouse",
            load_registry,
            cluster,
        )
        stack.schema_ids = {"v1": v1, "v2": v2}

        # 1. hour 08: 6 v1 views to partition 0, 4 v2 views to partition 1, one record that is not Avro
        web1 = _producer(cluster, load_registry, "web-1")
        p0 = [page_view(n, HOUR_08 + 1000 * n, v2=False) for n in range(6)]
        p1 = [page_view(n, HOUR_08 + 1000 * (n - 6), v2=True) for n in range(6, 10)]
        _send(stack, web1, 0, p0, HOUR_08, [serde.encode(v1, v) for v in p0])
        _send(stack, web1, 1, p1, HOUR_08, [serde.encode(v2, v) for v in p1])
        _send(stack, web1, 0, [NOT_AVRO], HOUR_08 + 10_000, [NOT_AVRO])
        web1.close()

        # 2. the load, once
        config = load_config(
            zk_connect=cluster.zk_connect,
            registry_url=load_registry.url,
            bootstrap_servers=cluster.bootstrap_servers.split(","),
            warehouse=stack.warehouse,
            job=stack.job,
            topics=[topic],
        )
        outcome = run_load(spark, config, progress=lambda _line: None)
        assert (outcome.record.outcome, outcome.record.rows, outcome.record.quarantined) == (
            "committed",
            10,
            1,
        )

        # 3. hour 09: 3 views nobody loads
        web2 = _producer(cluster, load_registry, "web-2")
        p1_late = [page_view(n, HOUR_09 + 1000 * (n - 10), v2=False) for n in range(10, 13)]
        _send(stack, web2, 1, p1_late, HOUR_09, [serde.encode(v1, v) for v in p1_late])
        web2.close()
        registry.close()

        # 4. the group: read everything, commit partition 0 at 5 and partition 1 at 7
        member = GroupConsumer(
            stack.group,
            zookeeper_connect=cluster.zk_connect,
            config=GroupConfig(auto_commit_enable=False),
            consumer_config=ConsumerConfig(
                bootstrap_servers=cluster.bootstrap_servers.split(","),
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
            ),
        )
        members.append(member)
        member.subscribe([topic])
        seen: list[Any] = []

        def read_all() -> bool:
            seen.extend(member.poll(timeout_ms=200))
            return len(seen) >= 14

        wait_for(read_all, 60, "the group to read the 14 records")
        member.commit({TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 7})

        # 5. the kafka group: read everything, commit partition 0 at 3 and partition 1 at 7
        kafka_members.enter_context(
            confluent_group_member(
                cluster.bootstrap_servers.split(","), stack.kafka_group, topic, 14, {0: 3, 1: 7}, "console-k"
            )
        )

        # the console, as `lumber console` runs it
        port = free_port()
        console_config = config.replace(console=ConsoleConfig(port=port))
        stack.config = console_config
        config_path = base / "console.toml"
        config_path.write_text(dump_config(console_config))
        stack.url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "lumber", "--config", str(config_path), "console"]

        def answers() -> bool:
            try:
                return httpx.get(stack.url + "/loads", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        console = start_and_wait("console", argv, base / "console.log", answers, timeout_s=60)
        yield stack
    finally:
        if console is not None:
            stop(console[0], popen=console[1])
        for m in members:
            m.close()
        kafka_members.close()
        cluster.stop()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"the console's browser tests need Debian's Chromium at {CHROMIUM}: apt-get install chromium"
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Visit:
    """Opens pages in one tab, failing on any console error or uncaught page error."""

    def __init__(self, page: Page, base_url: str, shots: Path) -> None:
        self.page = page
        self.base_url = base_url
        self.shots = shots
        self.errors: list[str] = []
        page.on(
            "console",
            lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def open(self, path: str, shot: str, status: int = 200) -> Page:
        response = self.page.goto(self.base_url + path)
        assert response is not None
        assert response.status == status, f"{path}: {response.status}: {self.page.inner_text('main')}"
        self.page.screenshot(path=str(self.shots / f"{shot}.png"), full_page=True)
        assert self.errors == [], f"{path}: {self.errors}"
        return self.page


@pytest.fixture
def visit(browser: Browser, console_stack: ConsoleStack, tmp_path: Path) -> Iterator[Visit]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    yield Visit(page, console_stack.url, tmp_path)
    page.close()


def json_of(stack: ConsoleStack, path: str, **params: Any) -> Any:
    response = stack.get(path, format="json", **params)
    assert response.status_code == 200, response.text
    return response.json()
