"""The broker's ``/metrics`` (broker/server/broker_metrics.py) on a real broker process, scraped and parsed
with prometheus_client's parser after a known workload: messages and bytes in and out per topic, requests
per API, the logs' sizes, segments and offsets; a restart counts only what arrives after it."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, servers, wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    answer = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert answer.status_code == 200
    found: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def produce_one_by_one(cluster: BrokerCluster, counts: dict[int, int], size: int = 100) -> None:
    """One Produce request per record (each waits for its acknowledgement)."""
    with Producer(ProducerConfig(bootstrap_servers=servers(cluster), acks="all", linger_ms=0)) as producer:
        for partition, count in counts.items():
            for i in range(count):
                producer.send("events", b"v" * size, key=b"k%d" % i, partition=partition).result(10)


def read_all(cluster: BrokerCluster, ends: dict[int, int]) -> int:
    settings = ConsumerConfig(
        bootstrap_servers=servers(cluster), auto_offset_reset="earliest", fetch_max_wait_ms=100
    )
    got = 0
    with Consumer(settings, partitions=[TopicPartition("events", p) for p in ends]) as consumer:
        for _record in consumer.messages(timeout_ms=2000):
            got += 1
            if got == sum(ends.values()):
                break
    return got


def topic(name: str) -> tuple[tuple[str, str], ...]:
    return (("topic", name),)


def partition(p: int) -> tuple[tuple[str, str], ...]:
    return (("partition", str(p)), ("topic", "events"))


def test_counters_after_a_known_workload(start_cluster: Callable[..., BrokerCluster]) -> None:
    port = free_port()
    cluster = start_cluster(1, metrics_port=port)
    broker = cluster.brokers[0]
    cluster.create_topic("events", 2)
    before = scrape(port)
    assert ("kafka_server_brokertopicmetrics_messagesin_total", topic("events")) not in before or before[
        ("kafka_server_brokertopicmetrics_messagesin_total", topic("events"))
    ] == 0
    produce_one_by_one(cluster, {0: 5, 1: 3})
    assert read_all(cluster, {0: 5, 1: 3}) == 8
    found = scrape(port)

    log_bytes = {
        p: sum(f.stat().st_size for f in (broker.log_dir / f"events-{p}").glob("*.log")) for p in (0, 1)
    }
    assert found[("kafka_server_brokertopicmetrics_messagesin_total", topic("events"))] == 8
    assert found[("kafka_server_brokertopicmetrics_bytesin_total", topic("events"))] == sum(
        log_bytes.values()
    )
    # the consumer read each batch once: every log byte went out once
    assert found[("kafka_server_brokertopicmetrics_bytesout_total", topic("events"))] == sum(
        log_bytes.values()
    )
    assert found[("kafka_network_requestmetrics_requests_total", (("request", "Produce"),))] == 8
    assert found[("kafka_network_requestmetrics_totaltime_seconds_count", (("request", "Produce"),))] == 8
    produce_inf = (("le", "+Inf"), ("request", "Produce"))
    assert found[("kafka_network_requestmetrics_totaltime_seconds_bucket", produce_inf)] == 8
    assert (
        0 < found[("kafka_network_requestmetrics_totaltime_seconds_sum", (("request", "Produce"),))] < 8 * 10
    )
    assert found[("kafka_network_requestmetrics_requests_total", (("request", "Fetch"),))] >= 1
    for p, end in ((0, 5), (1, 3)):
        assert found[("kafka_log_log_logendoffset", partition(p))] == end
        assert found[("kafka_log_log_highwatermark", partition(p))] == end
        assert found[("kafka_log_log_logstartoffset", partition(p))] == 0
        assert found[("kafka_log_log_numlogsegments", partition(p))] == 1
        assert found[("kafka_log_log_size", partition(p))] == log_bytes[p]
    # acks=all waited for each record's flush (every 20 ms here): the flusher flushed at least once per
    # partition, each flush timed
    flushes = found[("kafka_log_logflushstats_logflush_seconds_count", ())]
    assert 2 <= flushes <= 8
    assert 0 < found[("kafka_log_logflushstats_logflush_seconds_sum", ())] < flushes
    assert found[("kafka_server_replicamanager_partitioncount", ())] == 2
    assert found[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    # 8 acks=all produces and the fetches waited there; completed ones count until their deadline passes
    purgatory = ("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedOperation", "All"),))
    assert (
        0
        <= found[purgatory]
        <= 8 + found[("kafka_network_requestmetrics_requests_total", (("request", "Fetch"),))]
    )

    # after a restart, what was on disk is not "in": only the new messages count
    broker.restart()
    assert scrape(port).get(("kafka_server_brokertopicmetrics_messagesin_total", topic("events")), 0) == 0
    produce_one_by_one(cluster, {1: 2})
    after = scrape(port)
    assert after[("kafka_server_brokertopicmetrics_messagesin_total", topic("events"))] == 2
    grown = sum(f.stat().st_size for f in (broker.log_dir / "events-1").glob("*.log")) - log_bytes[1]
    assert after[("kafka_server_brokertopicmetrics_bytesin_total", topic("events"))] == grown
    assert after[("kafka_log_log_logendoffset", partition(1))] == 5


def test_metrics_port_zero_serves_nothing_and_a_taken_port_leaves_the_broker_up(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1)  # the fixture's default: metrics_port = 0
    assert "metrics on" not in cluster.brokers[0].log()
    taken = free_port()
    import socket  # noqa: PLC0415

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        second = start_cluster(1, metrics_port=taken)
        assert second.brokers[0].running
        assert f"cannot serve metrics on 127.0.0.1:{taken}" in second.brokers[0].log()


def value(samples: Samples, name: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
    return samples[(name, labels)]


def test_what_on_call_alerts_on_offline_under_min_isr_elections_and_replica_lag(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """Three brokers; a broker killed: the partition it alone held goes offline (counted by the controller),
    the one it led moves (one election), the one it followed falls under min.insync.replicas on its leader."""
    cluster = start_cluster(0)
    ports = [free_port() for _ in range(3)]
    for port in ports:
        cluster.add_broker(
            {"flush_on_ack": True, "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS, "metrics_port": port}
        )
    wait_for(lambda: cluster.controller_id() >= 0, 30, "a controller")
    controller = cluster.controller_id()
    victim, other = [b for b in range(3) if b != controller][:2]
    min_isr = {"min.insync.replicas": "2"}
    cluster.create_topic("events", 1, {0: [other, victim]}, configs=min_isr)  # led by `other`
    cluster.create_topic("moves", 1, {0: [victim, other]})  # led by the victim
    cluster.create_topic("solo", 1, {0: [victim]})  # only the victim holds it
    with Producer(ProducerConfig(bootstrap_servers=servers(cluster), acks="all", linger_ms=0)) as producer:
        for i in range(20):
            producer.send("events", b"v%d" % i, partition=0).result(10)
    cluster.wait_for_isr("events", 0, [other, victim])
    wait_for(
        lambda: value(scrape(ports[victim]), "kafka_log_log_logendoffset", partition(0)) == 20,
        30,
        "the follower to catch up",
    )

    def follower_caught_up() -> bool:
        return value(scrape(ports[victim]), "kafka_server_replicafetchermanager_maxlag", CLIENT_REPLICA) == 0

    wait_for(follower_caught_up, 30, "the follower's lag to be 0")
    before = scrape(ports[controller])
    assert value(before, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(scrape(ports[other]), "kafka_server_replicamanager_underminisrpartitioncount") == 0
    elections = value(before, "kafka_controller_controllerstats_leaderelections_total")
    for broker_id in (victim, other):  # only the controller counts
        not_controller = scrape(ports[broker_id])
        assert value(not_controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert value(not_controller, "kafka_controller_controllerstats_leaderelections_total") == 0

    cluster.brokers[victim].kill()
    cluster.wait_for_leader("moves", 0, lambda state: state.leader == other)
    cluster.wait_for_isr("events", 0, [other])
    offline = "kafka_controller_kafkacontroller_offlinepartitionscount"
    wait_for(lambda: value(scrape(ports[controller]), offline) == 1, 30, "solo-0 counted offline")
    after = scrape(ports[controller])
    assert value(after, "kafka_controller_controllerstats_leaderelections_total") == elections + 1
    wait_for(
        lambda: value(scrape(ports[other]), "kafka_server_replicamanager_underminisrpartitioncount") == 1,
        30,
        "events-0 under min ISR on its leader",
    )
    led = scrape(ports[other])
    assert value(led, "kafka_server_replicamanager_underreplicatedpartitions") == 2  # events-0, moves-0


CLIENT_REPLICA = (("clientId", "Replica"),)
