"""What one console request reads from: ZooKeeper, the brokers and the schema registry, opened on first use.

A :class:`Sources` lives for one request (the application's dependency opens it and closes it once the
page is rendered): a kazoo session to ``[zookeeper] connect``, a
:class:`~broker.client.consumer.consumer.Consumer` of no partitions bootstrapped from ``[consumer]
bootstrap_servers`` (else the brokers registered in ZooKeeper), a
:class:`~broker.client.groups.kafka.kafka_group_admin.KafkaGroupAdmin` for the Kafka-protocol groups
(bootstrapped the same way), and a :class:`~schemas.client.SchemaRegistryClient` of ``[registry]`` (its URL,
user and password, CA file).
Nothing is shared between requests, so the console holds no state that could go stale; each source is opened
only if the page needs it. Every wait is bounded by ``[console] request_timeout_ms``; a source that does not
answer raises :class:`~lumber.console.errors.SourceUnavailableError` naming it.

Not thread-safe: one request, one thread.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import ClientError
from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from broker.cluster import zk_reads
from broker.cluster.zookeeper_auth import new_zookeeper_client
from lumber.config import LumberConfig
from lumber.console.errors import SourceUnavailableError
from schemas.client import SchemaRegistryClient


class Sources:
    """ZooKeeper, brokers and registry for one request (see the module docstring)."""

    def __init__(self, config: LumberConfig) -> None:
        self.config = config
        self.timeout_ms = config.console.request_timeout_ms
        self._zk: KazooClient | None = None
        self._consumer: Consumer | None = None
        self._registry: SchemaRegistryClient | None = None
        self._kafka_groups: KafkaGroupAdmin | None = None

    @property
    def registry_url(self) -> str:
        return self.config.load.registry_url or self.config.registry.url

    @property
    def zk(self) -> KazooClient:
        """A started kazoo session (:class:`SourceUnavailableError` if ZooKeeper does not answer)."""
        if self._zk is None:
            connect = self.config.zookeeper.connect
            client = new_zookeeper_client(
                hosts=connect, timeout=self.config.zookeeper.session_timeout_ms / 1000
            )
            try:
                client.start(timeout=self.timeout_ms / 1000)
            except (KazooTimeoutError, KazooException) as exc:
                client.close()
                raise SourceUnavailableError(f"ZooKeeper {connect} does not answer: {exc!r}") from exc
            self._zk = client
        return self._zk

    def consumer_settings(self) -> ConsumerConfig:
        """``[consumer]`` bootstrapped from the brokers registered in ZooKeeper unless it names its own,
        with the console's timeouts."""
        servers = list(self.config.consumer.bootstrap_servers)
        if not servers:
            servers = [b.address for _, b in sorted(zk_reads.read_brokers(self.zk).items())]
        if not servers:
            raise SourceUnavailableError(
                f"no broker is registered in ZooKeeper {self.config.zookeeper.connect} (/brokers/ids)"
            )
        return self.config.consumer.replace(
            bootstrap_servers=servers,
            client_id="lumber-console",
            auto_offset_reset="none",
            request_timeout_ms=max(self.timeout_ms, self.config.consumer.fetch_max_wait_ms + 1),
            connect_timeout_ms=self.timeout_ms,
        )

    @property
    def consumer(self) -> Consumer:
        """A consumer of no partitions, for metadata, offsets and reads by explicit assignment."""
        if self._consumer is None:
            settings = self.consumer_settings()
            try:
                self._consumer = Consumer(settings)
            except ClientError as exc:
                raise SourceUnavailableError(
                    f"brokers {', '.join(settings.bootstrap_servers)}: {exc}"
                ) from exc
        return self._consumer

    @property
    def kafka_groups(self) -> KafkaGroupAdmin:
        """The brokers' group coordinators, for the Kafka-protocol groups."""
        if self._kafka_groups is None:
            settings = self.consumer_settings()
            try:
                self._kafka_groups = KafkaGroupAdmin(config=settings)
            except ClientError as exc:
                raise SourceUnavailableError(
                    f"brokers {', '.join(settings.bootstrap_servers)}: {exc}"
                ) from exc
        return self._kafka_groups

    def registry_client(self) -> SchemaRegistryClient:
        """A new client of ``[registry]`` (its credentials and CA file), with the console's timeout and no
        cache by subject (a page shows the registry as it is now); the caller closes it."""
        return SchemaRegistryClient.from_config(
            self.config.registry, self.registry_url, timeout_s=self.timeout_ms / 1000, subject_cache_ttl_s=0.0
        )

    @property
    def registry(self) -> SchemaRegistryClient:
        """This request's client of the registry (:meth:`registry_client`)."""
        if self._registry is None:
            self._registry = self.registry_client()
        return self._registry

    def close(self) -> None:
        if self._kafka_groups is not None:
            self._kafka_groups.close()
        if self._consumer is not None:
            self._consumer.close()
        if self._registry is not None:
            self._registry.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
        self._zk = self._consumer = self._registry = self._kafka_groups = None


def request_sources(request: Request) -> Iterator[Sources]:
    """The FastAPI dependency: a :class:`Sources` for this request, closed after the page is rendered."""
    sources = Sources(request.app.state.config)
    try:
        yield sources
    finally:
        sources.close()
