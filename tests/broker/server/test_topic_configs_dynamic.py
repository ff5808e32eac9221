"""Topic configs applied by every broker while it runs (and by a broker restarted later): two real broker
processes replicating one partition, configs changed with confluent-kafka's IncrementalAlterConfigs, the
effect read from the replicas' segment files (``compression.type``: the codec of each stored batch, and the
follower's bytes equal to the leader's)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from broker.record.batch_scan import scan_batches
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

TOPIC = "dyn"
TIMEOUT_S = 30
#: Every message the same size, so every batch is: a segment of S bytes holds S // batch size batches.
VALUE = b"v" * 900


def segments(broker: BrokerProcess) -> list[tuple[int, int]]:
    """``(base offset, size)`` of each segment file of the partition on ``broker``; a file that retention
    deletes between the listing and its ``stat`` is left out (it is gone, as the next look will say)."""
    folder = broker.log_dir / f"{TOPIC}-0"
    found = []
    for path in folder.glob("*.log"):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        found.append((int(path.name[: -len(".log")]), size))
    return sorted(found)


def bases(broker: BrokerProcess) -> list[int]:
    return [base for base, _ in segments(broker)]


def wait_for_bases(broker: BrokerProcess, wanted: list[int]) -> None:
    wait_for(
        lambda: bases(broker) == wanted, TIMEOUT_S, f"broker {broker.broker_id}'s segments to be {wanted}"
    )


def wait_for_line(broker: BrokerProcess, line: str) -> None:
    wait_for(lambda: line in broker.log(), TIMEOUT_S, f"broker {broker.broker_id} to log {line!r}")


class Cluster:
    """The two brokers, an admin client and an acks=all producer."""

    def __init__(self, cluster: BrokerCluster) -> None:
        self.cluster = cluster
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        self.producer = ConfluentProducer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0}
        )

    def alter(self, *changes: tuple[str, str | None, AlterConfigOpType], expect: dict[str, str]) -> None:
        """Change the topic's configs and wait until every running broker logs that its logs run with
        ``expect``."""
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            TOPIC,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in changes],
        )
        self.admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(
            TIMEOUT_S
        )
        line = f"topic {TOPIC}: 1 local logs now run with the topic's configs {expect!r}"
        for broker in self.cluster.brokers:
            if broker.running:
                wait_for_line(broker, line)

    def produce(self, count: int, value: bytes = VALUE) -> None:
        """``count`` messages, one batch each, each acknowledged by both replicas before the next."""
        for _ in range(count):
            assert self.produce_one(value) is None

    def produce_one(self, value: bytes = VALUE) -> KafkaError | None:
        """One message, flushed; its delivery error (None: stored)."""
        errors: list[KafkaError | None] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            errors.append(err)

        self.producer.produce(TOPIC, value, partition=0, on_delivery=delivered)
        assert self.producer.flush(TIMEOUT_S) == 0
        assert len(errors) == 1
        return errors[0]


def rolled(bases_now: list[int], end: int, count: int, batch: int, segment_bytes: int) -> list[int]:
    """The segment base offsets after ``count`` more batches of ``batch`` bytes, from a log whose segments
    start at ``bases_now`` and end at offset ``end``, by the roll rule (broker/log/segment.py): a non-empty
    segment rolls when the next batch would take it past ``segment_bytes``."""
    result = list(bases_now)
    in_active = end - result[-1]
    for offset in range(end, end + count):
        if in_active and (in_active + 1) * batch > segment_bytes:
            result.append(offset)
            in_active = 0
        in_active += 1
    return result


def expected_after_retention_bytes(layout: list[tuple[int, int]], retention_bytes: int) -> int:
    """The first base offset left once retention.bytes deleted what it deletes (Kafka's rule, as
    broker/log/retention.py words it: delete the oldest while the rest is still at least the limit)."""
    total = sum(size for _, size in layout)
    for base, size in layout[:-1]:
        if total - size < retention_bytes:
            return base
        total -= size
    return layout[-1][0]


def test_topic_configs_change_the_running_replicas_and_a_restarted_one(start_cluster: Any) -> None:
    cluster: BrokerCluster = start_cluster(
        2, retention_check_interval_ms=200, replica_fetch_wait_max_ms=100, replica_lag_time_max_ms=3000
    )
    cluster.create_topic(TOPIC, 1, {0: [0, 1]})
    leader, follower = cluster.brokers
    c = Cluster(cluster)

    c.produce(5)
    assert bases(leader) == bases(follower) == [0]
    first_size = segments(leader)[0][1]
    batch = first_size // 5
    assert batch * 5 == first_size  # every batch is the same size

    # 1. segment.bytes on the running topic: both replicas roll at the new size, no restart
    c.alter(("segment.bytes", "4096", AlterConfigOpType.SET), expect={"segment.bytes": "4096"})
    c.produce(20)
    expected = rolled([0], 5, 20, batch, 4096)
    assert len(expected) >= 5
    assert bases(leader) == expected
    wait_for(lambda: bases(follower) == expected, TIMEOUT_S, f"the follower's segments to be {expected}")
    assert [size for _, size in segments(leader)[1:-1]] == [4096 // batch * batch] * (len(expected) - 2)
    assert segments(follower) == segments(leader)

    # 2. changed while a replica is down: the restarted broker gives its existing log the topic's config.
    # (kill -9, not SIGTERM: after a follower's controlled shutdown the leader's next acks=all append
    # waits for the gone follower while it counts as caught up, a replication issue of its own.)
    follower.kill()
    cluster.wait_for_isr(TOPIC, 0, [0])
    c.alter(("segment.bytes", "2048", AlterConfigOpType.SET), expect={"segment.bytes": "2048"})
    c.produce(10)
    follower.start()
    cluster.wait_for_isr(TOPIC, 0, [0, 1])
    line = f"topic {TOPIC}: 1 local logs now run with the topic's configs {{'segment.bytes': '2048'}}"
    assert line in follower.log()
    expected = rolled(expected, 25, 10, batch, 2048)
    assert len(expected) >= 10
    assert bases(leader) == expected
    wait_for(lambda: segments(follower) == segments(leader), TIMEOUT_S, "the follower to copy the leader")

    # 3. max.message.bytes lowered: a larger batch is refused, nothing appended
    c.alter(
        ("max.message.bytes", str(batch - 1), AlterConfigOpType.SET),
        expect={"max.message.bytes": str(batch - 1), "segment.bytes": "2048"},
    )
    refused = c.produce_one()
    assert refused is not None
    assert refused.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert cluster.high_watermark(TOPIC, 0) == 35
    c.alter(
        ("max.message.bytes", None, AlterConfigOpType.DELETE),
        expect={"segment.bytes": "2048"},
    )

    # 4. retention.bytes, then retention.ms: both replicas delete their old segments
    layout = segments(leader)
    retention_bytes = 3 * 2048
    first = expected_after_retention_bytes(layout, retention_bytes)
    assert 0 < first < layout[-1][0]
    c.alter(
        ("retention.bytes", str(retention_bytes), AlterConfigOpType.SET),
        expect={"retention.bytes": str(retention_bytes), "segment.bytes": "2048"},
    )
    for broker in (leader, follower):
        wait_for_bases(broker, [base for base, _ in layout if base >= first])
    c.alter(
        ("retention.ms", "1", AlterConfigOpType.SET),
        expect={"retention.bytes": str(retention_bytes), "retention.ms": "1", "segment.bytes": "2048"},
    )
    for broker in (leader, follower):
        wait_for_bases(broker, [layout[-1][0]])
    assert cluster.high_watermark(TOPIC, 0) == 35


def stored_codecs(broker: BrokerProcess) -> list[int]:
    """The codec of every batch in the partition's segment files on ``broker``, in offset order."""
    return [codec for codec, _ in stored_batches(broker)]


def stored_batches(broker: BrokerProcess) -> list[tuple[int, int]]:
    """``(codec, size in bytes)`` of every batch in the partition's segment files on ``broker``, in offset
    order."""
    folder = broker.log_dir / f"{TOPIC}-0"
    data = b"".join(path.read_bytes() for path in sorted(folder.glob("*.log")))
    batches = scan_batches(data).batches
    for batch in batches:
        batch.validate()
    return [(int(batch.compression), batch.size_bytes) for batch in batches]


def test_compression_type_recompresses_on_the_leader_and_the_follower_copies_it(start_cluster: Any) -> None:
    cluster: BrokerCluster = start_cluster(2, replica_fetch_wait_max_ms=100, replica_lag_time_max_ms=3000)
    cluster.create_topic(TOPIC, 1, {0: [0, 1]}, configs={"compression.type": "gzip"})
    leader, follower = cluster.brokers
    c = Cluster(cluster)
    c.producer = ConfluentProducer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
            "compression.type": "lz4",
        }
    )
    c.produce(3)  # lz4 batches, stored gzip (1)
    c.alter(("compression.type", "producer", AlterConfigOpType.SET), expect={"compression.type": "producer"})
    c.produce(2)  # stored as sent: lz4 (3)
    c.alter(
        ("compression.type", "uncompressed", AlterConfigOpType.SET),
        expect={"compression.type": "uncompressed"},
    )
    c.produce(2)  # stored plain (0)
    assert stored_codecs(leader) == [1, 1, 1, 3, 3, 0, 0]
    wait_for(lambda: segments(follower) == segments(leader), TIMEOUT_S, "the follower to copy the leader")
    folder = f"{TOPIC}-0/00000000000000000000.log"
    assert (follower.log_dir / folder).read_bytes() == (leader.log_dir / folder).read_bytes()


def test_a_topics_level_changes_the_next_recompression_and_the_follower_copies_it(start_cluster: Any) -> None:
    """compression.zstd.level (KIP-390) altered on a running replicated zstd topic: the same lz4 message is
    stored smaller at 19 than at 1 (the leader's recompression reads the level the moment it is applied),
    and the follower's segment is the leader's bytes."""
    cluster: BrokerCluster = start_cluster(2, replica_fetch_wait_max_ms=100, replica_lag_time_max_ms=3000)
    cluster.create_topic(
        TOPIC, 1, {0: [0, 1]}, configs={"compression.type": "zstd", "compression.zstd.level": "1"}
    )
    leader, follower = cluster.brokers
    c = Cluster(cluster)
    c.producer = ConfluentProducer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
            "compression.type": "lz4",
        }
    )
    value = b"".join(b"GET /items/%d 200 user=%d ok\n" % (i, i % 7) for i in range(36))  # 998 bytes
    c.produce(2, value)
    c.alter(
        ("compression.zstd.level", "19", AlterConfigOpType.SET),
        expect={"compression.type": "zstd", "compression.zstd.level": "19"},
    )
    c.produce(2, value)
    at_1, at_19 = stored_batches(leader)[0][1], stored_batches(leader)[2][1]
    assert stored_batches(leader) == [(4, at_1), (4, at_1), (4, at_19), (4, at_19)]
    assert at_19 < at_1
    wait_for(lambda: segments(follower) == segments(leader), TIMEOUT_S, "the follower to copy the leader")
    folder = f"{TOPIC}-0/00000000000000000000.log"
    assert (follower.log_dir / folder).read_bytes() == (leader.log_dir / folder).read_bytes()
