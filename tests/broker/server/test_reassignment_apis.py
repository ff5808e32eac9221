"""AlterPartitionReassignments and ListPartitionReassignments driven by kafka-python's admin client against
real brokers on a real ZooKeeper: moves, refusals (nothing changes), listing a move in progress and
cancelling it."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_errors
    from kafka import TopicPartition as KafkaPartition
    from kafka.admin import KafkaAdminClient

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def test_kafka_python_moves_refuses_lists_and_cancels(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(3, replica_lag_time_max_ms=3000)
    cluster.create_topic("placed", 2, {0: [0], 1: [0]})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30_000)
    p0, p1, p7 = KafkaPartition("placed", 0), KafkaPartition("placed", 1), KafkaPartition("placed", 7)
    try:
        refused = admin.alter_partition_reassignments(
            {p0: [1, 9], p1: [2, 2], p7: [1], KafkaPartition("nowhere", 0): [1]}
        )
        assert refused == {
            p0: kafka_errors.InvalidReplicationAssignmentError,
            p1: kafka_errors.InvalidReplicationAssignmentError,
            p7: kafka_errors.UnknownTopicOrPartitionError,
            KafkaPartition("nowhere", 0): kafka_errors.UnknownTopicOrPartitionError,
        }
        assert admin.alter_partition_reassignments({p0: None}) == {
            p0: kafka_errors.NoReassignmentInProgressError
        }
        assert cluster.admin.describe_topic("placed") == {0: (0,), 1: (0,)}
        assert admin.list_partition_reassignments() == {}

        assert admin.alter_partition_reassignments({p0: [1, 2]}) == {p0: None}
        wait_for(lambda: cluster.admin.describe_topic("placed")[0] == (1, 2), 60, "placed-0 on [1, 2]")
        wait_for(lambda: admin.list_partition_reassignments() == {}, 30, "no move listed")
        assert cluster.state_of("placed", 0).leader == 1

        # broker 2 killed: its session still registers it for a few seconds, so the move is accepted, and
        # stays in progress (it never catches up) until cancelled
        cluster.broker(2).kill()
        assert admin.alter_partition_reassignments({p1: [2, 0]}) == {p1: None}
        moving = {p1: {"replicas": [2, 0], "adding_replicas": [2], "removing_replicas": []}}
        wait_for(lambda: admin.list_partition_reassignments() == moving, 30, "placed-1's move listed")
        assert admin.alter_partition_reassignments({p1: None}) == {p1: None}
        wait_for(lambda: admin.list_partition_reassignments() == {}, 30, "the cancel")
        assert cluster.admin.describe_topic("placed") == {0: (1, 2), 1: (0,)}
        assert cluster.state_of("placed", 1).isr == (0,)
        cluster.broker(2).restart()
        wait_for(
            lambda: not (cluster.broker(2).log_dir / "placed-1").exists(),
            30,
            "broker 2 to delete the cancelled replica at start-up",
        )
    finally:
        admin.close()
