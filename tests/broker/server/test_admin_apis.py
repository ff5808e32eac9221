"""ElectLeaders (broker/server/admin_apis.py) on real brokers and a real ZooKeeper, driven by
confluent-kafka's AdminClient: a preferred election refused while the first replica is down, then run once
it is back in the ISR (leadership moves to it), and nothing to do after. The single-broker answers are
compared with Kafka's in tests/conformance/test_admin_apis.py."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from tests.support.broker_cluster import BrokerCluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def elect(bootstrap: str, partitions: list[TopicPartition]) -> dict[int, str | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answers = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=60)
    return {tp.partition: None if error is None else str(error.name()) for tp, error in answers.items()}


def test_a_preferred_election_moves_leadership_back_to_the_first_replica(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2, auto_leader_rebalance=False, replica_lag_time_max_ms=3000)
    cluster.create_topic("elect", 2, {0: [0, 1], 1: [1, 0]})
    cluster.wait_for_isr("elect", 0, [0, 1])
    cluster.wait_for_isr("elect", 1, [0, 1])
    partitions = [TopicPartition("elect", 0), TopicPartition("elect", 1)]
    first = cluster.broker(0)
    first.stop()
    cluster.wait_for_leader("elect", 0, lambda s: s.leader == 1)
    survivor = cluster.broker(1).address
    assert elect(survivor, partitions) == {0: "PREFERRED_LEADER_NOT_AVAILABLE", 1: "ELECTION_NOT_NEEDED"}
    assert cluster.state_of("elect", 0).leader == 1
    first.start()
    cluster.wait_for_isr("elect", 0, [0, 1])
    before = cluster.state_of("elect", 0)
    assert before.leader == 1  # no automatic rebalance: only the request moves it
    assert elect(cluster.bootstrap_servers, partitions) == {0: None, 1: "ELECTION_NOT_NEEDED"}
    after = cluster.state_of("elect", 0)
    assert (after.leader, after.leader_epoch) == (0, before.leader_epoch + 1)
    assert elect(cluster.bootstrap_servers, partitions) == {
        0: "ELECTION_NOT_NEEDED",
        1: "ELECTION_NOT_NEEDED",
    }
