"""Replication when a leader dies, on three-broker clusters of each (:mod:`.cluster_target`): Kafka's node 1
is a combined controller and broker and its nodes 2 and 3 brokers only, so the quorum survives both of
them; three Lumber brokers share the suite's ZooKeeper.

* ``leader_killed_mid_produce``: a 1-partition topic created by confluent-kafka's AdminClient on brokers
  1, 2, 0 in that order (broker 1 leads) with ``min.insync.replicas`` 2. An idempotent confluent-kafka
  producer (acks=all) writes 3,000 records at a steady pace; when it has been handed half of them and
  acknowledged a quarter, broker 1 is killed with SIGKILL (batches of the first half acknowledged, in
  flight, or not yet sent); it writes the rest during the failover and flushes. The transcript holds what
  was acknowledged (every delivery report), what confluent-kafka reads back from offset 0 to the end
  (nothing acknowledged lost, nothing twice, the order kept, each record at the offset its report gave),
  the partition's state before and after (Metadata v9: leader, leader epoch, ISR) and the leader epochs
  of the batches in the log. Then OffsetForLeaderEpoch v4, as a consumer asks it (replica id -1), to the
  new leader: the old epoch (it ends where the new one's first batch starts), the new epoch (the log
  end), an epoch past it (undefined), with a current leader epoch that is old (FENCED_LEADER_EPOCH) or
  newer than the leader's (UNKNOWN_LEADER_EPOCH), and the old epoch asked of the follower
  (NOT_LEADER_OR_FOLLOWER). Last, broker 2 is killed too: once broker 0 alone is in sync, kafka-python's
  Produce v9 of one record with acks=all (NOT_ENOUGH_REPLICAS, nothing appended) and acks=1 (appended at
  the log end). Where the failover lands in the log depends on timing, so the transcript holds those
  offsets as relations (where the new epoch starts, the log end), never as numbers.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.conformance.clients import consume_to_end, wait_for_leaders
from tests.conformance.cluster_target import (
    ClusterTarget,
    kafka_cluster_target,
    lumber_cluster_target,
    started_together,
)
from tests.conformance.conformance import Transcript, conform
from tests.conformance.raw_requests import (
    batch_epochs,
    exchange,
    offset_for_leader_epoch_answer,
    offset_for_leader_epoch_frame,
    partition_state,
    produce_answer,
    produce_frame,
)
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

#: slow: two clusters of three brokers started, a leader's death noticed on each (well over 40 s in all)
pytestmark = [pytest.mark.interop, pytest.mark.zookeeper, pytest.mark.slow]

RECORDS = 3000
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@pytest.fixture(scope="module")
def three_brokers(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTarget, ClusterTarget]]:
    """Kafka (node 1 combined, nodes 2 and 3 brokers only), then Lumber: three brokers each."""
    with started_together(
        kafka_cluster_target(tmp_path_factory.mktemp("kafka-three"), 3, controllers=1),
        lumber_cluster_target(
            make_chroot(zookeeper_server.connect, "conformance-replication"),
            tmp_path_factory.mktemp("lumber-three"),
            3,
        ),
    ) as (kafka, lumber):
        yield kafka, lumber


def _state(target: ClusterTarget, address: str, topic: str) -> dict[str, Any]:
    """The partition's state as broker ``address`` answers Metadata, in broker indexes."""
    found = partition_state(address, topic, 0)
    return {
        **found,
        "leader": target.index_of(found["leader"]),
        "replicas": sorted(target.index_of(r) for r in found["replicas"]),
        "isr": sorted(target.index_of(r) for r in found["isr"]),
    }


def _produce_through_a_kill(
    target: ClusterTarget, topic: str, leader: int
) -> tuple[list[dict[str, Any]], int]:
    """The records ``v0`` to ``v2999`` written by one idempotent producer at a steady pace; when ``v1500``
    has been handed to it and a quarter of the records are acknowledged, the leader is killed (batches of
    the first half are then acknowledged, in flight, or still lingering). Every delivery report, and how
    many had come before the kill."""
    reports: list[dict[str, Any]] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        reports.append({"error": err.name() if err else None, "value": msg.value(), "offset": msg.offset()})

    producer = Producer(
        {
            **target.client_config,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 50,
        }
    )
    before_kill = -1
    for i in range(RECORDS):
        producer.produce(topic, b"v%d" % i, partition=0, on_delivery=delivered)
        if i == RECORDS // 2:
            deadline = time.monotonic() + 30
            while len(reports) < RECORDS // 4 and time.monotonic() < deadline:
                producer.poll(0.005)
            before_kill = len(reports)
            target.kill(leader)
        if i % 10 == 9:
            producer.poll(0)
            time.sleep(0.002)
    remaining = producer.flush(120)
    if remaining:
        raise AssertionError(f"{remaining} records to {topic} neither delivered nor failed after 120 s")
    return reports, before_kill


def _offset_for_leader_epoch(address: str, topic: str, epoch: int, current: int) -> list[int]:
    [answer] = exchange(address, [offset_for_leader_epoch_frame(topic, 0, epoch, current, 61)])
    if answer is None:
        raise AssertionError(f"{address} did not answer OffsetForLeaderEpoch for {topic}")
    return offset_for_leader_epoch_answer(answer)


def _create_placed(target: ClusterTarget, topic: str) -> None:
    """The topic's one partition on brokers 1, 2, 0 in that order (1 leads first), min.insync.replicas 2."""
    new = NewTopic(
        topic,
        num_partitions=1,
        replica_assignment=[[target.broker_ids[i] for i in (1, 2, 0)]],
        config={"min.insync.replicas": "2"},
    )
    admin = AdminClient(target.client_config)
    admin.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
    wait_for_leaders(target, topic, 1)


def _wait_for_state(
    target: ClusterTarget,
    address: str,
    topic: str,
    leaders: tuple[int, ...],
    isr: list[int],
    timeout_s: float = 40.0,
) -> dict[str, Any]:
    """The partition's state once ``address`` answers one of ``leaders`` and ``isr`` (or after
    ``timeout_s``: the transcript then shows what it answered)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = _state(target, address, topic)
        if (state["leader"] in leaders and state["isr"] == isr) or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


def _produce_once_leading(address: str, topic: str, timeout_s: float = 15.0) -> list[bytes | None]:
    """An acks=all then an acks=1 Produce to ``address``, sent again while the broker answers
    NOT_LEADER_OR_FOLLOWER (retriable, nothing appended; what every producer does), for at most
    ``timeout_s``: a broker that Metadata names leader may still be taking the leadership over. On a busy
    CI machine Lumber's broker 0 once answered it to both right after its Metadata named it leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        answers = exchange(address, [produce_frame(topic, 0, -1, 71), produce_frame(topic, 0, 1, 72)])
        codes = {a["error_code"] for answer in answers if answer is not None for a in produce_answer(answer)}
        if NOT_LEADER_OR_FOLLOWER not in codes or time.monotonic() > deadline:
            return answers
        time.sleep(0.2)


def leader_killed_mid_produce(target: ClusterTarget, topic: str) -> Transcript:
    _create_placed(target, topic)
    before = _wait_for_state(target, target.addresses[0], topic, (1,), [0, 1, 2])
    reports, before_kill = _produce_through_a_kill(target, topic, 1)
    acked = {r["value"].decode(): r["offset"] for r in reports if r["error"] is None}
    after = _wait_for_state(target, target.addresses[0], topic, (0, 2), [0, 2])
    read = consume_to_end(target, topic, 0, timeout_s=60)
    values = [r["value"] for r in read["records"]]
    read_offsets = {r["value"]: r["offset"] for r in read["records"]}
    end = read["records"][-1]["offset"] + 1 if read["records"] else 0
    leader = target.addresses[after["leader"]]
    follower = target.addresses[next(i for i in (0, 2) if i != after["leader"])]
    batches = batch_epochs(leader, topic, 0, end)
    old, new = before["leader_epoch"], after["leader_epoch"]
    new_epoch_starts = min((base for base, _, epoch in batches if epoch == new), default=None)
    old_epoch = _offset_for_leader_epoch(leader, topic, old, -1)
    new_epoch = _offset_for_leader_epoch(leader, topic, new, new)
    answers = {
        "old_epoch": [
            old_epoch[0],
            old_epoch[1],
            "where the new epoch starts" if old_epoch[2] == new_epoch_starts else old_epoch[2],
        ],
        "new_epoch": [
            new_epoch[0],
            new_epoch[1],
            "the log end" if new_epoch[2] == end else new_epoch[2],
        ],
        "past_the_new_epoch": _offset_for_leader_epoch(leader, topic, new + 1, -1),
        "current_epoch_old": _offset_for_leader_epoch(leader, topic, old, old)[0],
        "current_epoch_newer": _offset_for_leader_epoch(leader, topic, new, new + 1)[0],
        "to_the_follower": _offset_for_leader_epoch(follower, topic, old, -1)[0],
    }
    # the other follower killed too: one replica in sync, below min.insync.replicas
    target.kill(2)
    alone = _wait_for_state(target, target.addresses[0], topic, (0,), [0])
    acks_all, acks_1 = _produce_once_leading(target.addresses[0], topic)
    return {
        "before": before,
        "reports": {
            "count": len(reports),
            "errors": sorted({str(r["error"]) for r in reports}),
            "acknowledged": len(acked),
            "before_the_kill": "some, not all" if 0 < before_kill <= RECORDS // 2 else before_kill,
        },
        "read": {"count": len(values), "errors": read["errors"], "reached_end": read["reached_end"]},
        "acknowledged_lost": sorted(set(acked) - set(values)),
        "read_twice": sorted({v for v in values if values.count(v) > 1}),
        "in_order": values == [f"v{i}" for i in range(len(values))],
        "offsets_as_reported": all(read_offsets.get(v) == o for v, o in acked.items()),
        "after": after,
        "log_epochs": sorted({epoch for _, _, epoch in batches}),
        "offset_for_leader_epoch": answers,
        "one_in_sync": alone,
        "produce_acks_all": produce_answer(acks_all) if acks_all is not None else None,
        "produce_acks_1": [
            {**a, "base_offset": "the log end" if a["base_offset"] == end else a["base_offset"]}
            for a in (produce_answer(acks_1) if acks_1 is not None else [])
        ],
    }


def test_leader_killed_mid_produce(three_brokers: tuple[ClusterTarget, ClusterTarget]) -> None:
    transcript = conform(leader_killed_mid_produce, three_brokers)
    assert (transcript["before"]["leader"], transcript["before"]["isr"]) == (1, [0, 1, 2])
    assert transcript["reports"] == {
        "count": RECORDS,
        "errors": ["None"],
        "acknowledged": RECORDS,
        "before_the_kill": "some, not all",
    }
    assert transcript["read"] == {"count": RECORDS, "errors": [], "reached_end": True}
    assert transcript["acknowledged_lost"] == []
    assert transcript["read_twice"] == []
    assert transcript["in_order"] is True
    assert transcript["offsets_as_reported"] is True
    assert transcript["after"]["leader"] in (0, 2)
    assert transcript["after"]["isr"] == [0, 2]
    answers = transcript["offset_for_leader_epoch"]
    assert answers["old_epoch"][2] == "where the new epoch starts"
    assert answers["new_epoch"][2] == "the log end"
    assert answers["current_epoch_old"] == FENCED_LEADER_EPOCH
    assert answers["current_epoch_newer"] == UNKNOWN_LEADER_EPOCH
    assert answers["to_the_follower"] == NOT_LEADER_OR_FOLLOWER
    assert (transcript["one_in_sync"]["leader"], transcript["one_in_sync"]["isr"]) == (0, [0])
    [refused] = transcript["produce_acks_all"]
    assert (refused["error_code"], refused["base_offset"]) == (NOT_ENOUGH_REPLICAS, -1)
    [accepted] = transcript["produce_acks_1"]
    assert (accepted["error_code"], accepted["base_offset"]) == (0, "the log end")
