"""bench/paper_kafka_clients.py against a real Lumber broker: a consume phase of several passes reads the
topic's every record once per pass, from offset 0 each time, and nothing more."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.paper_kafka_clients import ConfluentProducer, confluent_consume, connected_consumer
from tests.support.broker_cluster import BrokerCluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

RECORDS = 600


def test_a_consume_of_three_passes_reads_every_record_three_times(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1)
    cluster.create_topic("passes", 1)
    bootstrap = cluster.bootstrap_servers
    ConfluentProducer(bootstrap, "passes", 50, "1").send([b"%05d" % i for i in range(RECORDS)], 0)
    consumer = connected_consumer(bootstrap, "passes", RECORDS)
    try:
        assert confluent_consume(consumer, "passes", 1, RECORDS, 3) == 3 * RECORDS
        # the third pass ended exactly at the topic's end: the consumer's position is its last offset + 1
        (position,) = consumer.position(consumer.assignment())
        assert position.offset == RECORDS
        # the same consumer, assigned again, starts from offset 0 once more
        assert confluent_consume(consumer, "passes", 1, RECORDS) == RECORDS
    finally:
        consumer.close()
