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
* ``follower_truncated_to_leader_epoch`` (KIP-101, KIP-279: a log that diverged is truncated to the new
  leader's epoch boundary): a 1-partition topic on brokers 1, 2 (broker 1 leads) with
  ``min.insync.replicas`` 1. confluent-kafka writes ``a0``-``a99`` with acks=all (both replicas have
  them). Broker 2 is paused with SIGSTOP, every thread stopped (still in the ISR: both sides fence it only
  after 4 s) and, once its fetch in flight has been answered (1 s, twice the followers' fetch wait), five
  Produce v9 requests with acks=1 (``i0``-``i4``, one record each) are answered by broker 1 alone, which
  is then killed with SIGKILL and broker 2 resumed: it becomes the leader in a new epoch without
  ``i0``-``i4`` and takes ``b0``-``b49`` (acks=all). Broker 1 is started again: it must truncate
  ``i0``-``i4`` (OffsetForLeaderEpoch: its epoch ends at 100 on the new leader) and follow; once it is
  back in the ISR a preferred leader election (confluent-kafka's ``elect_leaders``) makes it leader again,
  and the log is read through it: by confluent-kafka and kafka-python (values and offsets), by a raw Fetch
  (the high watermark, the log start, the offset ranges of each leader epoch), by OffsetForLeaderEpoch for
  every epoch (the current one's end is the log end). Every acks=all record survives; the five acks=1
  records are lost, the same five on both. The scenario leaves all three brokers running, so the module's
  clusters serve the next scenario.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.conformance.clients import consume_to_end, kafka_python_read_all, wait_for_leaders
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
    fetch_positions,
    offset_for_leader_epoch_answer,
    offset_for_leader_epoch_frame,
    one_record,
    partition_state,
    produce_answer,
    produce_frame,
)
from tests.support.sigstop import paused
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

#: slow: two clusters of three brokers started, a leader's death noticed on each (well over 40 s in all)
pytestmark = [pytest.mark.interop, pytest.mark.zookeeper, pytest.mark.slow]

RECORDS = 3000
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
#: records written with acks=all before the leader is isolated, and to the new leader after it died
REPLICATED, TO_THE_NEW_LEADER = 100, 50
#: acks=1 records only the isolated leader appends (each its own Produce)
ISOLATED = 5


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


def _create_placed(
    target: ClusterTarget, topic: str, brokers: tuple[int, ...] = (1, 2, 0), min_insync: int = 2
) -> None:
    """The topic's one partition on ``brokers`` in that order (the first leads), ``min.insync.replicas``."""
    new = NewTopic(
        topic,
        num_partitions=1,
        replica_assignment=[[target.broker_ids[i] for i in brokers]],
        config={"min.insync.replicas": str(min_insync)},
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


def _produce_once_leading(
    address: str, topic: str, timeout_s: float = 15.0
) -> tuple[list[bytes | None], int]:
    """An acks=all then an acks=1 Produce to ``address``, sent again while the broker answers
    NOT_LEADER_OR_FOLLOWER (retriable, nothing appended; what every producer does), for at most
    ``timeout_s``: a broker that Metadata names leader may still be taking the leadership over. On a busy
    CI machine Lumber's broker 0 once answered it to both right after its Metadata named it leader.

    Returns the last attempt's answers and the records the attempts before it appended: the leadership can
    arrive between the two requests of an attempt (Kafka's broker once answered the acks=all request
    NOT_LEADER_OR_FOLLOWER and appended the acks=1 record behind it), so the last acks=1 record then lands
    one past the log end the scenario read."""
    deadline = time.monotonic() + timeout_s
    appended = 0
    while True:
        answers = exchange(address, [produce_frame(topic, 0, -1, 71), produce_frame(topic, 0, 1, 72)])
        codes = [a["error_code"] for answer in answers if answer is not None for a in produce_answer(answer)]
        if NOT_LEADER_OR_FOLLOWER not in codes or time.monotonic() > deadline:
            return answers, appended
        appended += codes.count(0)  # one record a request
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
    (acks_all, acks_1), retried = _produce_once_leading(target.addresses[0], topic)
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
            {**a, "base_offset": "the log end" if a["base_offset"] == end + retried else a["base_offset"]}
            for a in (produce_answer(acks_1) if acks_1 is not None else [])
        ],
    }


def _produce_acknowledged(bootstrap: str, topic: str, values: list[str]) -> list[dict[str, Any]]:
    """``values`` written by confluent-kafka with acks=all, flushed; every delivery report."""
    reports: list[dict[str, Any]] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        reports.append(
            {"error": err.name() if err else None, "value": msg.value().decode(), "offset": msg.offset()}
        )

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value.encode(), partition=0, on_delivery=delivered)
    remaining = producer.flush(60)
    if remaining:
        raise AssertionError(f"{remaining} records to {topic} neither delivered nor failed after 60 s")
    return reports


def _append_isolated(target: ClusterTarget, topic: str, leader: int, follower: int) -> list[dict[str, Any]]:
    """``i0``-``i4`` written with acks=1 to ``leader`` while ``follower`` is paused, then ``leader`` killed
    before ``follower`` resumes: the answers to the five Produce requests."""
    with paused(target.pid(follower)):
        # the paused follower's fetch in flight is answered (empty) within the fetch wait (500 ms on both)
        # before the leader appends, so the follower finds none of the records in its socket when resumed
        time.sleep(1.0)
        frames = [
            produce_frame(topic, 0, 1, 80 + i, records=one_record(b"i", b"i%d" % i)) for i in range(ISOLATED)
        ]
        answers = exchange(target.addresses[leader], frames)
        target.kill(leader)
    return [a for answer in answers if answer is not None for a in produce_answer(answer)]


def _report_shape(reports: list[dict[str, Any]]) -> list[list[Any]]:
    """Each distinct (error, offset of ``x<n>`` minus ``n``) of delivery reports: ``[["None", k]]`` when
    every record was acknowledged and ``x<n>`` written at offset ``k + n``."""
    return [list(t) for t in sorted({(str(r["error"]), r["offset"] - int(r["value"][1:])) for r in reports})]


def _epoch_ranges(batches: list[tuple[int, int, int]]) -> list[list[int]]:
    """``[leader epoch, first offset, last offset]`` for each run of batches of one epoch, in log order
    (the producer's batching differs between runs; where each epoch starts and ends does not)."""
    ranges: list[list[int]] = []
    for base, last, epoch in batches:
        if ranges and ranges[-1][0] == epoch and ranges[-1][2] == base - 1:
            ranges[-1][2] = last
        else:
            ranges.append([epoch, base, last])
    return ranges


def _elect_preferred(target: ClusterTarget, topic: str) -> str | None:
    """A preferred leader election of ``topic-0`` by confluent-kafka's AdminClient: its error, if any."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    # no timeouts given: confluent-kafka 2.16's elect_leaders fails on any keyword argument (SystemError)
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    results = future.result(timeout=60)
    errors = [str(e) for e in results.values() if e is not None]
    return errors[0] if errors else None


def follower_truncated_to_leader_epoch(target: ClusterTarget, topic: str) -> Transcript:
    _create_placed(target, topic, (1, 2), min_insync=1)
    before = _wait_for_state(target, target.addresses[0], topic, (1,), [1, 2])
    replicated = _produce_acknowledged(target.bootstrap, topic, [f"a{i}" for i in range(REPLICATED)])
    isolated = _append_isolated(target, topic, 1, 2)
    failed_over = _wait_for_state(target, target.addresses[0], topic, (2,), [2], timeout_s=60)
    to_new_leader = _produce_acknowledged(
        target.bootstrap, topic, [f"b{i}" for i in range(TO_THE_NEW_LEADER)]
    )
    target.start(1)
    rejoined = _wait_for_state(target, target.addresses[0], topic, (2,), [1, 2], timeout_s=60)
    election_error = _elect_preferred(target, topic)
    leading_again = _wait_for_state(target, target.addresses[0], topic, (1,), [1, 2])
    old_leader = target.addresses[1]
    positions = _wait_for_positions(old_leader, topic)
    through_old_leader = replace(target, bootstrap=old_leader)
    read = consume_to_end(through_old_leader, topic, 0, timeout_s=60)
    kafka_python = kafka_python_read_all(through_old_leader, topic, 0)
    batches = batch_epochs(old_leader, topic, 0, positions["high_watermark"])
    epochs = sorted({before["leader_epoch"], failed_over["leader_epoch"], leading_again["leader_epoch"]})
    current = leading_again["leader_epoch"]
    acknowledged = [r["value"] for r in replicated + to_new_leader if r["error"] is None]
    values = [r["value"] for r in read["records"]]
    return {
        "before": before,
        "replicated": _report_shape(replicated),
        "isolated_answers": [[a["error_code"], a["base_offset"]] for a in isolated],
        "failed_over": failed_over,
        "to_the_new_leader": _report_shape(to_new_leader),
        "rejoined": rejoined,
        "election_error": election_error,
        "leading_again": leading_again,
        "positions": positions,
        "read": [[r["offset"], r["value"]] for r in read["records"]],
        "read_errors": read["errors"],
        "reached_end": read["reached_end"],
        "kafka_python": [[r["offset"], r["value"]] for r in kafka_python["records"]],
        "kafka_python_error": kafka_python["error"],
        "acknowledged_lost": sorted(set(acknowledged) - set(values)),
        "isolated_lost": sorted({f"i{i}" for i in range(ISOLATED)} - set(values)),
        "epoch_ranges": _epoch_ranges(batches),
        "offset_for_leader_epoch": {
            str(epoch): _offset_for_leader_epoch(old_leader, topic, epoch, current) for epoch in epochs
        },
        "past_the_current_epoch": _offset_for_leader_epoch(old_leader, topic, current + 1, current),
    }


def _wait_for_positions(address: str, topic: str, timeout_s: float = 30.0) -> dict[str, int]:
    """A raw Fetch's positions of ``topic-0`` at ``address`` once it answers without an error and its high
    watermark stops moving (the new leader learns the followers' positions on their next fetch)."""
    deadline = time.monotonic() + timeout_s
    last = fetch_positions(address, topic, 0)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = fetch_positions(address, topic, 0)
        if now == last and now["error_code"] == 0:
            return now
        last = now
    return last


def test_follower_truncated_to_leader_epoch(three_brokers: tuple[ClusterTarget, ClusterTarget]) -> None:
    transcript = conform(follower_truncated_to_leader_epoch, three_brokers)
    end = REPLICATED + TO_THE_NEW_LEADER
    assert (transcript["before"]["leader"], transcript["before"]["isr"]) == (1, [1, 2])
    assert transcript["replicated"] == [["None", 0]]
    assert transcript["isolated_answers"] == [[0, REPLICATED + i] for i in range(ISOLATED)]
    assert (transcript["failed_over"]["leader"], transcript["failed_over"]["isr"]) == (2, [2])
    assert transcript["to_the_new_leader"] == [["None", REPLICATED]]
    assert (transcript["leading_again"]["leader"], transcript["leading_again"]["isr"]) == (1, [1, 2])
    expected = [[i, f"a{i}"] for i in range(REPLICATED)] + [
        [REPLICATED + i, f"b{i}"] for i in range(TO_THE_NEW_LEADER)
    ]
    assert transcript["read"] == expected
    assert transcript["kafka_python"] == expected
    assert transcript["acknowledged_lost"] == []
    assert transcript["isolated_lost"] == [f"i{i}" for i in range(ISOLATED)]
    assert transcript["positions"]["high_watermark"] == end
    first, failover, again = (
        transcript["before"]["leader_epoch"],
        transcript["failed_over"]["leader_epoch"],
        transcript["leading_again"]["leader_epoch"],
    )
    assert [r[1:] for r in transcript["epoch_ranges"]] == [[0, REPLICATED - 1], [REPLICATED, end - 1]]
    assert transcript["offset_for_leader_epoch"][str(first)] == [0, first, REPLICATED]
    assert transcript["offset_for_leader_epoch"][str(again)] == [0, again, end]
    assert failover > first
    assert again > failover


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
