"""Shared fixtures and helpers of the load job's tests (``tests/pipeline`` and ``tests/jobs``).

* ``load_registry``: one real schema registry process (``lumber schemas serve``) on its own ZooKeeper
  chroot for the session; tests register under subjects of their own topics (:func:`unique_topic`).

Import the fixtures into a ``conftest.py`` to use them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from lumber.config import LumberConfig, config_from_mapping, dump_config
from lumber.dev.zookeeper_server import ZooKeeperServer
from schemas.client import SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import servers
from tests.support.registry import RegistryProcess, launch_registry
from tests.support.zookeeper import make_chroot


def unique_topic(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def load_registry(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryProcess]:
    connect = make_chroot(zookeeper_server.connect, "load_registry")
    process = launch_registry(connect, tmp_path_factory.mktemp("load-registry"))
    yield process
    process.stop()


# ---------------------------------------------------------------------------------------------- data

HOUR_MS = 3_600_000
#: ``[audit] topic``: where the load publishes its counts (created by the stack, as ``lumber dev up`` does)
AUDIT_TOPIC = "_audit"
#: 2026-11-22T08:00:00Z: event times in the tests are hours from here.
BASE_MS = 1_795_334_400_000
#: ``[completeness] lookback_ms`` of the tests' loads: the default week, reaching back to ``BASE_MS`` however
#: long after it the tests run (with the default, the hours of ``BASE_MS`` left the window a week later, on
#: 2026-11-29, and no load decided them any more).
LOOKBACK_MS = max(7 * 24 * HOUR_MS, int(time.time() * 1000) - BASE_MS + 7 * 24 * HOUR_MS)

#: The loaded table of page views (v1 and v2 in one), as Spark reads it back with its dt/hr folders.
PAGE_VIEW_DDL = (
    "event_id string, timestamp_ms bigint, host string, member_id bigint, session_id string, "
    "page_key string, page_url string, referrer_url string, user_agent string, ip_address string, "
    "load_time_ms int, _topic string, _partition int, _offset bigint, _timestamp bigint, _schema_id int, "
    "_host string, dt date, hr int"
)
PAYLOAD_COLUMNS = (
    "event_id",
    "timestamp_ms",
    "host",
    "member_id",
    "session_id",
    "page_key",
    "page_url",
    "referrer_url",
    "user_agent",
    "ip_address",
    "load_time_ms",
)


def page_view(n: int, ts_ms: int, v2: bool) -> dict[str, Any]:
    """Page view number ``n`` (a v1 record, or v2 with ``load_time_ms``)."""
    record: dict[str, Any] = {
        "event_id": f"ev-{n}",
        "timestamp_ms": ts_ms,
        "host": f"web{n % 3}",
        "member_id": None if n % 4 == 0 else 1000 + n,
        "session_id": f"s{n // 5}",
        "page_key": ("feed", "profile_view", "job_search")[n % 3],
        "page_url": f"https://example.org/p/{n}",
        "referrer_url": None if n % 2 else f"https://example.org/r/{n}",
        "user_agent": "Mozilla/5.0",
        "ip_address": f"10.0.{n % 256}.{n % 7}",
    }
    if v2:
        record["load_time_ms"] = None if n % 5 == 0 else n % 900
    return record


@dataclass
class Produced:
    """What a test produced: every loaded row as Spark reads it back, and every malformed record."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    #: (topic, partition, offset, reason, raw value)
    errors: list[tuple[str, int, int, str, bytes | None]] = field(default_factory=list)

    def row_tuples(self) -> list[tuple[Any, ...]]:
        return sorted(
            tuple(row.get(c) for c in (*PAYLOAD_COLUMNS, "_partition", "_offset")) for row in self.rows
        )

    def end_offsets(self, partitions: Iterable[tuple[str, int]] = ()) -> dict[tuple[str, int], int]:
        """The next offset of each partition written to (and 0 for the other ``partitions``)."""
        ends: dict[tuple[str, int], int] = dict.fromkeys(partitions, 0)
        for row in self.rows:
            key = (row["_topic"], row["_partition"])
            ends[key] = max(ends.get(key, 0), row["_offset"] + 1)
        for topic, partition, offset, _, _ in self.errors:
            ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
        return ends


class ViewProducer:
    """Produces page views (and malformed records) with exact timestamps and hosts, recording them."""

    def __init__(self, producer: Producer, serde: AvroSerde, topic: str, v1_id: int, v2_id: int) -> None:
        self.producer = producer
        self.serde = serde
        self.topic = topic
        self.ids = {False: v1_id, True: v2_id}
        self.produced = Produced()
        self._n = 0

    def views(self, partition: int, count: int, first_ts_ms: int, step_ms: int, *, v2: bool) -> None:
        futures = []
        for i in range(count):
            n = self._n
            self._n += 1
            ts = first_ts_ms + i * step_ms
            record = page_view(n, ts, v2)
            value = self.serde.encode(self.ids[v2], record)
            host = f"producer-{n % 2}"
            future = self.producer.send(
                self.topic, value, partition=partition, timestamp_ms=ts, headers=[("host", host.encode())]
            )
            futures.append((future, record, ts, host, v2))
        self.producer.flush()
        for future, record, ts, host, v2_record in futures:
            meta = future.result()
            moment = dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC)
            self.produced.rows.append(
                {
                    **record,
                    "load_time_ms": record.get("load_time_ms"),
                    "_topic": self.topic,
                    "_partition": partition,
                    "_offset": meta.offset,
                    "_timestamp": ts,
                    "_schema_id": self.ids[v2_record],
                    "_host": host,
                    "dt": moment.date(),
                    "hr": moment.hour,
                }
            )

    def malformed(self, partition: int, ts_ms: int) -> None:
        """One record of each undecodable kind."""
        good = self.serde.encode(self.ids[False], page_view(0, ts_ms, False))
        cases: list[tuple[bytes | None, str]] = [
            (b"\x07" + good[1:], "bad_framing"),
            (struct.pack(">bI", 0, 987_654) + good[5:], "unknown_schema_id"),
            (good[:5] + b"\xff" * 9, "corrupt_bytes"),
            (None, "null_value"),
        ]
        futures = [
            (self.producer.send(self.topic, value, partition=partition, timestamp_ms=ts_ms), value, reason)
            for value, reason in cases
        ]
        self.producer.flush()
        for future, value, reason in futures:
            self.produced.errors.append((self.topic, partition, future.result().offset, reason, value))


def load_config(
    *,
    zk_connect: str,
    registry_url: str,
    bootstrap_servers: list[str],
    warehouse: Path | str,
    job: str,
    topics: list[str],
    **load: Any,
) -> LumberConfig:
    """A config for a test's load: its own job, warehouse and topics; quick consumer timeouts."""
    return config_from_mapping(
        {
            "zookeeper": {"connect": zk_connect, "session_timeout_ms": 6000},
            "registry": {"url": registry_url},
            "consumer": {"fetch_max_wait_ms": 100, "request_timeout_ms": 10_000},
            "completeness": {"lookback_ms": LOOKBACK_MS},
            "load": {
                "job": job,
                "warehouse_url": str(warehouse),
                "topics_allow": [re.escape(t) for t in topics],
                "topics_deny": [],
                "bootstrap_servers": bootstrap_servers,
                "min_partitions": 2,
                **load,
            },
        },
        where="test config",
    )


def loaded_rows(warehouse: Path, topic: str) -> list[tuple[Any, ...]]:
    """The loaded rows of ``topic`` read with pyarrow, in the shape of :meth:`Produced.row_tuples`."""
    import pyarrow.dataset as ds  # noqa: PLC0415

    root = warehouse / topic
    if not root.exists():
        return []
    table = ds.dataset(str(root), format="parquet", partitioning="hive").to_table()
    columns = [table.column(c).to_pylist() for c in (*PAYLOAD_COLUMNS, "_partition", "_offset")]
    return sorted(zip(*columns, strict=True))


def committed_offsets(warehouse: Path, job: str) -> dict[tuple[str, int], int]:
    """The offsets of the latest manifest, read straight from the files (not through the library)."""
    manifests = sorted((warehouse / "_lumber" / job / "manifests").glob("*.json"))
    if not manifests:
        return {}
    offsets = json.loads(manifests[-1].read_text())["offsets"]
    return {(t, int(p)): o for t, parts in offsets.items() for p, o in parts.items()}


@dataclass
class LoadStack:
    """A test's load: a 2-partition ``page_view`` topic with schemas v1 and v2 registered, a producer of
    views, its own job name, and a folder (``tmp``) for the warehouse and anything else."""

    cluster: Any
    registry: RegistryProcess
    tmp: Path
    topic: str
    job: str
    views: ViewProducer

    @property
    def warehouse(self) -> Path:
        return self.tmp / "warehouse"

    def config(
        self, job: str | None = None, warehouse: Path | str | None = None, **load: Any
    ) -> LumberConfig:
        return load_config(
            zk_connect=self.cluster.zk_connect,
            registry_url=self.registry.url,
            bootstrap_servers=servers(self.cluster),
            warehouse=warehouse or self.warehouse,
            job=job or self.job,
            topics=[self.topic],
            **load,
        )

    def config_file(self, config: LumberConfig, name: str = "lumber.toml") -> Path:
        """``config`` written to ``tmp/name``, with the dev state under ``tmp/state``."""
        path = self.tmp / name
        text = dump_config(config).replace(
            '[dev]\nstate_dir = ".lumber"', f'[dev]\nstate_dir = "{self.tmp / "state"}"'
        )
        path.write_text(text)
        return path

    def assert_rows_and_offsets(self, warehouse: Path | None = None, job: str | None = None) -> None:
        """The warehouse holds exactly the produced rows, and the job committed every partition's end."""
        produced = self.views.produced
        assert loaded_rows(warehouse or self.warehouse, self.topic) == produced.row_tuples()
        everything = [(self.topic, p) for p in range(2)]  # an empty partition is committed at 0
        assert committed_offsets(warehouse or self.warehouse, job or self.job) == produced.end_offsets(
            everything
        )


@contextlib.contextmanager
def load_stack(
    cluster: Any,
    registry: RegistryProcess,
    tmp: Path,
    partitions: int = 2,
    *,
    replication_factor: int = 1,
    client: SchemaRegistryClient | None = None,
    **producer: Any,
) -> Iterator[LoadStack]:
    """A :class:`LoadStack` on ``cluster`` (its topics with ``replication_factor`` replicas); ``producer``
    settings override linger 5 ms, acks all; ``client`` registers the schemas (default: one of
    ``registry.url`` without credentials)."""
    topic = unique_topic("page_view")
    cluster.create_topic(topic, partitions, replication_factor=replication_factor)
    if (
        AUDIT_TOPIC not in cluster.admin.list_topics()
    ):  # the load publishes its counts; brokers create no topics
        cluster.create_topic(AUDIT_TOPIC, 1, replication_factor=replication_factor)
    client = client if client is not None else SchemaRegistryClient(registry.url)
    v1 = client.register(f"{topic}-value", shipped_schema_text("page_view"))
    v2 = client.register(f"{topic}-value", shipped_schema_text("page_view_v2"))
    settings = {"linger_ms": 5, "acks": "all", "max_block_ms": 10_000, **producer}
    views_producer = Producer(ProducerConfig(bootstrap_servers=servers(cluster), **settings))
    try:
        views = ViewProducer(views_producer, AvroSerde(client), topic, v1, v2)
        yield LoadStack(cluster, registry, tmp, topic, unique_topic("job"), views)
    finally:
        views_producer.close()
        client.close()
