"""The demo's traffic: exact counts per topic, hour and host, the schema switch and the malformed messages,
both as generated and as they land on a real broker through the Producer."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.demo_traffic import (
    HOUR_MS,
    HostShare,
    TrafficProducer,
    TrafficSpec,
    generate_hour,
)
from schemas.client import SchemaRegistryClient
from schemas.errors import SchemaError
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.broker.client.helpers import read_records
from tests.support.broker_cluster import servers
from tests.support.load_job import BASE_MS
from tests.support.registry import RegistryProcess

#: per topic, per host: the counts of hours 0, 1, 2 (rate * share % * hour factor %, factors 100, 150, 100)
EXPECTED = {
    "page_view": {"web-a": [40, 60, 40], "web-b": [20, 30, 20]},
    "click": {"web-a": [20, 30, 20], "web-b": [10, 15, 10]},
    "search": {"web-a": [10, 15, 10], "web-b": [5, 7, 5]},
}


def small_spec(prefix: str = "", seed: int = 7) -> TrafficSpec:
    return TrafficSpec(
        start_ms=BASE_MS,
        hours=3,
        hosts=(HostShare("web-a", 100), HostShare("web-b", 50, slowness_pct=200)),
        per_host_hour=(("page_view", 40), ("click", 20), ("search", 10)),
        hour_factors_pct=(100, 150),
        malformed=4,
        malformed_host="web-b",
        seed=seed,
        topic_prefix=prefix,
    )


def test_counts_per_topic_hour_and_host_are_exact() -> None:
    spec = small_spec()
    counted: Counter[tuple[str, str, int]] = Counter()
    malformed: list[Any] = []
    for index in range(3):
        events = generate_hour(spec, index)
        assert [e.timestamp_ms for e in events] == sorted(e.timestamp_ms for e in events)
        for event in events:
            assert BASE_MS + index * HOUR_MS <= event.timestamp_ms < BASE_MS + (index + 1) * HOUR_MS
            assert event.record["timestamp_ms"] == event.timestamp_ms
            assert event.record["host"] == event.host
            assert event.key == event.record["session_id"].encode()
            if event.malformed:
                malformed.append((index, event.host, event.topic, event.malformed))
            else:
                counted[(event.topic, event.host, index)] += 1
    assert counted == {
        (topic, host, index): count
        for topic, hosts in EXPECTED.items()
        for host, counts in hosts.items()
        for index, count in enumerate(counts)
    }
    assert malformed == [
        (1, "web-b", "page_view", kind)
        for kind in ("bad_magic_byte", "unknown_schema_id", "truncated_avro", "json_not_avro")
    ]
    assert spec.total() == 210 + 105 + 52 + 4


def test_page_views_switch_to_version_2_half_way() -> None:
    spec = small_spec()
    assert spec.evolution_ms == BASE_MS + 90 * 60_000
    schemas: Counter[tuple[int, str, str]] = Counter()
    for index in range(3):
        for event in generate_hour(spec, index):
            if event.topic != "page_view" or event.malformed:
                continue
            before = event.timestamp_ms < spec.evolution_ms
            assert event.schema == ("page_view" if before else "page_view_v2")
            assert ("load_time_ms" in event.record) is not before
            schemas[(index, event.host, event.schema)] += 1
    assert schemas == {
        (0, "web-a", "page_view"): 40,
        (0, "web-b", "page_view"): 20,
        (1, "web-a", "page_view"): 30,
        (1, "web-a", "page_view_v2"): 30,
        (1, "web-b", "page_view"): 15,
        (1, "web-b", "page_view_v2"): 15,
        (2, "web-a", "page_view_v2"): 40,
        (2, "web-b", "page_view_v2"): 20,
    }


def test_the_traffic_is_a_function_of_the_spec() -> None:
    assert generate_hour(small_spec(), 1) == generate_hour(small_spec(), 1)
    other = generate_hour(small_spec(seed=8), 1)
    assert [e.record["event_id"] for e in other] != [
        e.record["event_id"] for e in generate_hour(small_spec(), 1)
    ]
    with pytest.raises(ValueError, match="outside"):
        generate_hour(small_spec(), 3)
    with pytest.raises(ValueError, match="not the start of an hour"):
        TrafficSpec(start_ms=BASE_MS + 1)


def test_through_the_producers_the_broker_holds_exactly_the_spec(
    start_cluster: Any, load_registry: RegistryProcess
) -> None:
    cluster = start_cluster(1)
    spec = small_spec(prefix=f"t{uuid.uuid4().hex[:8]}_")
    topics = {name: spec.topic_name(name) for name in ("page_view", "click", "search")}
    for topic in topics.values():
        cluster.create_topic(topic, 2)
    registry = SchemaRegistryClient(load_registry.url)
    ids = {
        name: registry.register(f"{topic}-value", shipped_schema_text(name)) for name, topic in topics.items()
    }
    registered_v2: list[int] = []

    def register_v2() -> int:
        registered_v2.append(
            registry.register(f"{topics['page_view']}-value", shipped_schema_text("page_view_v2"))
        )
        return registered_v2[-1]

    producers = {
        host.name: Producer(
            ProducerConfig(bootstrap_servers=servers(cluster), host_name=host.name, linger_ms=5, acks="all")
        )
        for host in spec.hosts
    }
    try:
        sender = TrafficProducer(spec, producers, AvroSerde(registry), ids, register_v2)
        handed: list[list[int]] = [[] for _ in range(spec.hours)]
        sent = [sender.send_hour(index, on_sent=handed[index].append) for index in range(spec.hours)]
    finally:
        for producer in producers.values():
            producer.close()
    assert len(registered_v2) == 1
    assert [s.malformed for s in sent] == [0, 4, 0]
    # on_sent saw every message handed over, counted from 1 in each hour (the demo's kill -9 trigger)
    assert handed == [list(range(1, s.total + 1)) for s in sent]

    partitions = [TopicPartition(topic, p) for topic in topics.values() for p in range(2)]
    consumer = Consumer(
        ConsumerConfig(
            bootstrap_servers=servers(cluster), auto_offset_reset="earliest", fetch_max_wait_ms=100
        ),
        partitions=partitions,
    )
    try:
        records = read_records(consumer, spec.total())
        assert consumer.poll(timeout_ms=300) == []
    finally:
        consumer.close()
    serde = AvroSerde(registry)
    landed: Counter[tuple[str, str, int]] = Counter()
    versions: Counter[tuple[int, int]] = Counter()
    broken: Counter[str] = Counter()
    for record in records:
        name = record.topic.removeprefix(spec.topic_prefix)
        host = (record.header("host") or b"").decode()
        hour = (record.timestamp_ms - BASE_MS) // HOUR_MS
        assert record.value is not None
        try:
            decoded = serde.decode(record.value)
        except SchemaError as exc:
            broken[type(exc).__name__] += 1
            assert (name, host, hour) == ("page_view", "web-b", 1)
            continue
        assert decoded["host"] == host
        assert decoded["timestamp_ms"] == record.timestamp_ms
        landed[(name, host, hour)] += 1
        if name == "page_view":
            versions[(hour, int.from_bytes(record.value[1:5], "big"))] += 1
    assert landed == {
        (topic, host, index): count
        for topic, hosts in EXPECTED.items()
        for host, counts in hosts.items()
        for index, count in enumerate(counts)
    }
    v1, v2 = ids["page_view"], registered_v2[0]
    assert versions == {(0, v1): 60, (1, v1): 45, (1, v2): 45, (2, v2): 60}
    assert sum(broken.values()) == 4
    registry.close()
