"""Topic administration against a real ZooKeeper (broker/cluster/topic_admin.py)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from broker.cluster.broker_info import BrokerInfo
from broker.cluster.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    NoLiveBrokersError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
)
from broker.cluster.partition_state import PartitionState
from broker.cluster.topic_admin import MAX_PARTITIONS, TopicAdmin
from broker.record.errors import InvalidTopicError
from broker.record.topic_partition import TopicPartition
from broker.server.error_codes import error_code_of
from tests.broker.cluster.helpers import add_broker
from tests.support.zookeeper import new_client


def test_create_list_describe_delete_round_trip(zk: Any) -> None:
    for broker_id in (1, 2, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    admin = TopicAdmin(zk)
    assert admin.live_brokers() == {
        1: BrokerInfo(1, "127.0.0.1", 9091),
        2: BrokerInfo(2, "127.0.0.1", 9092),
        3: BrokerInfo(3, "127.0.0.1", 9093),
    }
    assert admin.list_topics() == []

    created = admin.create_topic("explicit", 3, assignment={0: [2], 1: [3], 2: [1]})
    assert created == {0: (2,), 1: (3,), 2: (1,)}
    data, stat = zk.get("/brokers/topics/explicit")
    assert data == b'{"partitions":{"0":[2],"1":[3],"2":[1]},"version":1}'
    assert stat.ephemeralOwner == 0  # persistent

    spread = admin.create_topic("spread", 12)
    assert sorted(spread) == list(range(12))
    assert Counter(r[0] for r in spread.values()) == {1: 4, 2: 4, 3: 4}
    assert all(spread[p] == spread[p % 3] for p in range(12))  # round robin: the pattern repeats
    assert admin.describe_topic("spread") == spread

    assert admin.list_topics() == ["explicit", "spread"]
    assert admin.describe_topic("explicit") == {0: (2,), 1: (3,), 2: (1,)}

    admin.delete_topic("explicit")
    assert zk.exists("/brokers/topics/explicit") is None
    assert admin.list_topics() == ["spread"]
    with pytest.raises(UnknownTopicError, match="topic 'explicit' does not exist") as info:
        admin.describe_topic("explicit")
    assert error_code_of(info.value) == 3
    with pytest.raises(UnknownTopicError, match="topic 'explicit' does not exist"):
        admin.delete_topic("explicit")


def test_create_existing_topic(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    admin = TopicAdmin(zk)
    admin.create_topic("once", 1)
    with pytest.raises(TopicExistsError, match=r"^topic 'once' already exists$") as info:
        admin.create_topic("once", 5)
    assert error_code_of(info.value) == 36
    assert admin.describe_topic("once") == {0: (1,)}


def test_exactly_one_of_five_concurrent_creators_wins(zk: Any, zk_connect: str) -> None:
    for broker_id in (1, 2):
        add_broker(zk, broker_id, 9090 + broker_id)
    clients = [new_client(zk_connect) for _ in range(5)]
    barrier = threading.Barrier(5)
    won: list[dict[int, tuple[int, ...]]] = []
    lost: list[TopicExistsError] = []
    other: list[BaseException] = []

    def create(client: Any, partitions: int) -> None:
        admin = TopicAdmin(client)
        barrier.wait()
        try:
            won.append(admin.create_topic("race", partitions))
        except TopicExistsError as exc:
            lost.append(exc)
        except BaseException as exc:
            other.append(exc)

    threads = [threading.Thread(target=create, args=(c, n + 1)) for n, c in enumerate(clients)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        for c in clients:
            c.stop()
            c.close()
    assert other == []
    assert len(won) == 1
    assert len(lost) == 4
    assert {str(e) for e in lost} == {"topic 'race' already exists"}
    assert TopicAdmin(zk).describe_topic("race") == won[0]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a b", "topic name 'a b' contains ' '"),
        ("", "topic name is empty"),
        (".", "topic name cannot be '.'"),
        ("..", "topic name cannot be '..'"),
        ("a/b", "topic name 'a/b' contains '/'"),
        ("x" * 250, "topic name is 250 characters long, at most 249 are allowed"),
    ],
)
def test_invalid_topic_names(zk: Any, name: str, message: str) -> None:
    add_broker(zk, 1, 9091)
    admin = TopicAdmin(zk)
    with pytest.raises(InvalidTopicError) as info:
        admin.create_topic(name, 1)
    assert str(info.value).startswith(message)
    assert error_code_of(info.value) == 17
    with pytest.raises(InvalidTopicError):
        admin.delete_topic(name)
    with pytest.raises(InvalidTopicError):
        admin.describe_topic(name)
    assert zk.exists("/brokers/topics") is None


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        (0, "topic 't': 0 partitions is outside [1, 10000]"),
        (-3, "topic 't': -3 partitions is outside [1, 10000]"),
        (MAX_PARTITIONS + 1, "topic 't': 10001 partitions is outside [1, 10000]"),
        (True, "topic 't': the partition count must be an integer, got True"),
    ],
)
def test_invalid_partition_counts(zk: Any, partitions: Any, message: str) -> None:
    add_broker(zk, 1, 9091)
    with pytest.raises(InvalidPartitionsError) as info:
        TopicAdmin(zk).create_topic("t", partitions)
    assert str(info.value) == message
    assert error_code_of(info.value) == 37
    assert zk.exists("/brokers/topics/t") is None


@pytest.mark.parametrize(
    ("partitions", "assignment", "message"),
    [
        (3, {0: [1], 2: [1]}, "topic 't': assignment names partitions [0, 2], expected 0 to 2"),
        (2, {0: [1], 1: [1], 2: [1]}, "topic 't': assignment names partitions [0, 1, 2], expected 0 to 1"),
        (
            2,
            {0: [1], 1: [7]},
            "topic 't': assignment places partition 1 on broker 7, which is not live (live brokers: [1, 2])",
        ),
        (1, {0: [1, 1]}, "topic 't': assignment gives partition 0 the replicas [1, 1]: a broker twice"),
        (
            2,
            {0: [1, 2], 1: [1]},
            "topic 't': assignment gives partition 1 1 replicas [1], expected 2 as partition 0",
        ),
        (1, {0: []}, "topic 't': assignment gives partition 0 no replicas"),
    ],
)
def test_invalid_explicit_assignments(zk: Any, partitions: int, assignment: Any, message: str) -> None:
    add_broker(zk, 1, 9091)
    add_broker(zk, 2, 9092)
    with pytest.raises(InvalidReplicaAssignmentError) as info:
        TopicAdmin(zk).create_topic("t", partitions, assignment=assignment)
    assert str(info.value) == message
    assert error_code_of(info.value) == 39
    assert isinstance(info.value, InvalidPartitionsError)
    assert zk.exists("/brokers/topics/t") is None


def test_no_live_brokers(zk: Any) -> None:
    admin = TopicAdmin(zk)
    assert admin.live_brokers() == {}
    with pytest.raises(NoLiveBrokersError) as info:
        admin.create_topic("lonely", 3)
    assert str(info.value) == "cannot create topic 'lonely': no live brokers are registered in /brokers/ids"
    assert error_code_of(info.value) == 38
    assert admin.list_topics() == []


def test_unreadable_nodes_are_skipped_or_reported(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    zk.create("/brokers/ids/2", b"not json", ephemeral=True)
    zk.create("/brokers/ids/not-an-id", b"{}", ephemeral=True)
    zk.create("/brokers/topics/broken", b'{"version":1,"partitions":{"1":[1]}}', makepath=True)
    zk.create("/brokers/topics/bad name", b"{}")
    admin = TopicAdmin(zk)
    assert admin.live_brokers() == {1: BrokerInfo(1, "127.0.0.1", 9091)}
    assert admin.list_topics() == ["broken"]
    with pytest.raises(ZooKeeperError) as info:
        admin.describe_topic("broken")
    assert str(info.value).startswith("zookeeper: cannot decode /brokers/topics/broken: ZkDataError(")
    assert "assigns partitions [1], expected 0 to 0" in str(info.value)
    assert info.value.path == "/brokers/topics/broken"
    assert info.value.retriable is False


def test_zookeeper_failures_are_mapped(zk_connect: str) -> None:
    client = new_client(zk_connect)
    client.stop()
    client.close()
    with pytest.raises(ZooKeeperError) as info:
        TopicAdmin(client).list_topics()
    assert str(info.value).startswith(
        "zookeeper: cannot list the topics in /brokers/topics: ConnectionClosedError("
    )
    assert info.value.retriable is True
    assert error_code_of(info.value) == 7
    assert isinstance(info.value.__cause__, Exception)


# ------------------------------------------------------------------------------------------- replication


def test_create_writes_topic_config_and_states_in_one_transaction(zk: Any) -> None:
    for broker_id in (1, 2, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    zk.create("/controller_epoch", b"4")
    admin = TopicAdmin(zk)
    created = admin.create_topic(
        "rep",
        2,
        assignment={0: [2, 3, 1], 1: [3, 1, 2]},
        configs={"min.insync.replicas": "2"},
    )
    assert created == {0: (2, 3, 1), 1: (3, 1, 2)}
    assert zk.get("/brokers/topics/rep")[0] == b'{"partitions":{"0":[2,3,1],"1":[3,1,2]},"version":1}'
    assert zk.get("/config/topics/rep")[0] == b'{"config":{"min.insync.replicas":"2"},"version":1}'
    assert zk.get("/brokers/topics/rep/partitions")[0] == b""
    data, stat = zk.get("/brokers/topics/rep/partitions/0/state")
    assert data == b'{"controller_epoch":4,"isr":[2,3,1],"leader":2,"leader_epoch":0,"version":1}'
    assert stat.version == 0
    assert zk.get("/brokers/topics/rep/partitions/1/state")[0] == (
        b'{"controller_epoch":4,"isr":[3,1,2],"leader":3,"leader_epoch":0,"version":1}'
    )
    # all made by one multi: one transaction id
    zxids = {
        zk.exists(p).czxid
        for p in ("/brokers/topics/rep", "/config/topics/rep", "/brokers/topics/rep/partitions/1/state")
    }
    assert len(zxids) == 1
    assert admin.describe_states("rep") == {
        0: PartitionState(2, 0, (2, 3, 1), 4, 0),
        1: PartitionState(3, 0, (3, 1, 2), 4, 0),
    }
    assert admin.topic_config("rep") == {"min.insync.replicas": "2"}

    admin.delete_topic("rep")
    assert zk.exists("/brokers/topics/rep") is None
    assert zk.exists("/config/topics/rep") is None
    assert zk.get_children("/brokers/topics") == []


def test_create_with_replication_factor_and_no_controller_epoch(zk: Any) -> None:
    for broker_id in (1, 2, 3):
        add_broker(zk, broker_id, 9090 + broker_id)
    admin = TopicAdmin(zk)
    created = admin.create_topic("spread3", 6, replication_factor=3)
    assert all(len(set(r)) == 3 for r in created.values())
    assert Counter(r[0] for r in created.values()) == {1: 2, 2: 2, 3: 2}
    states = admin.describe_states("spread3")
    assert states == {p: PartitionState(r[0], 0, r, 0, 0) for p, r in created.items()}
    assert admin.topic_config("spread3") == {}
    assert zk.exists("/config/topics/spread3") is None


def test_replication_factor_above_live_brokers_is_refused(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    add_broker(zk, 2, 9092)
    with pytest.raises(InvalidReplicationFactorError) as info:
        TopicAdmin(zk).create_topic("big", 3, replication_factor=3)
    assert (
        str(info.value)
        == "topic 'big': replication factor 3 is invalid: it exceeds the 2 live brokers [1, 2]"
    )
    assert zk.exists("/brokers/topics/big") is None


def test_a_failed_transaction_leaves_nothing(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    # a stale config node makes the multi fail on its second operation: the topic node must not stay
    zk.create("/config/topics/stale", b'{"config":{},"version":1}', makepath=True)
    with pytest.raises(ZooKeeperError) as info:
        TopicAdmin(zk).create_topic("stale", 2, configs={"min.insync.replicas": "1"})
    assert str(info.value) == (
        "zookeeper: cannot create topic 'stale': /config/topics/stale exists without its topic; delete it"
    )
    assert zk.exists("/brokers/topics/stale") is None
    assert zk.get_children("/brokers/topics") == []


def test_delete_of_an_old_topic_without_states(zk: Any) -> None:
    zk.create("/brokers/topics/old", b'{"version":1,"partitions":{"0":[1]}}', makepath=True)
    admin = TopicAdmin(zk)
    assert admin.describe_states("old") == {}
    admin.delete_topic("old")
    assert zk.exists("/brokers/topics/old") is None


def test_preferred_election_request(zk: Any) -> None:
    add_broker(zk, 1, 9091)
    add_broker(zk, 2, 9092)
    admin = TopicAdmin(zk)
    admin.create_topic("b", 2, replication_factor=2)
    admin.create_topic("a", 1, replication_factor=2)
    assert admin.request_preferred_election([TopicPartition("b", 1)]) == [TopicPartition("b", 1)]
    assert zk.get("/admin/preferred_replica_election")[0] == (
        b'{"partitions":[{"partition":1,"topic":"b"}],"version":1}'
    )
    with pytest.raises(ZooKeeperError, match="a preferred replica election is already pending") as info:
        admin.request_preferred_election(None)
    assert info.value.retriable is True
    zk.delete("/admin/preferred_replica_election")  # what the controller does when done
    assert admin.request_preferred_election(None) == [
        TopicPartition("a", 0),
        TopicPartition("b", 0),
        TopicPartition("b", 1),
    ]
    assert zk.get("/admin/preferred_replica_election")[0] == (
        b'{"partitions":[{"partition":0,"topic":"a"},{"partition":0,"topic":"b"},'
        b'{"partition":1,"topic":"b"}],"version":1}'
    )
