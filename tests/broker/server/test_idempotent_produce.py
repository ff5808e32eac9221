"""The idempotent producer's broker side on the wire, against real broker processes and ZooKeeper:
InitProducerId ids unique across brokers and restarts, and Produce answers (duplicate, gap, fenced epoch)
that survive a kill -9 of the broker (the state is rebuilt from the snapshot and the log)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from broker.protocol import ErrorCode
from broker.protocol.messages.init_producer_id import InitProducerIdRequest
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.server.helpers import BASE_TS, connect, fetch, offsets_in, produce
from tests.support.broker_cluster import BrokerCluster


def init_producer_id(cluster: BrokerCluster, broker_id: int, **request: Any) -> tuple[int, int, int]:
    conn = connect(cluster.broker(broker_id))
    try:
        response = conn.request(InitProducerIdRequest(transaction_timeout_ms=-1, **request))
    finally:
        conn.close()
    return response.error_code, response.producer_id, response.producer_epoch


def idempotent_batch(producer_id: int, epoch: int, sequence: int, count: int) -> bytes:
    builder = RecordBatchBuilder(
        CompressionType.NONE, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    for i in range(count):
        builder.append(BASE_TS + sequence + i, None, (b"s%06d" % (sequence + i)).ljust(300, b"."))
    return builder.build()


def test_producer_ids_are_unique_across_brokers_and_restarts(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2)
    ids = [init_producer_id(cluster, b) for b in (0, 1, 0, 1)]
    assert [(code, epoch) for code, _, epoch in ids] == [(0, 0)] * 4
    assert [pid for _, pid, _ in ids] == [0, 1000, 1, 1001]  # each broker claimed a block of 1000
    cluster.broker(0).kill()
    cluster.broker(0).start()
    cluster.broker(1).restart()
    after = [init_producer_id(cluster, b)[1] for b in (0, 1)]
    assert after == [2000, 3000]  # new blocks: the unused ids of the old ones are never handed out
    # a non-transactional producer that asks with its id and epoch gets a fresh id, as from Kafka
    assert init_producer_id(cluster, 0, producer_id=after[0], producer_epoch=0) == (0, 2001, 0)
    # transactions are not part of Lumber
    assert init_producer_id(cluster, 0, transactional_id="tx")[0] == int(
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def test_a_retry_after_kill_9_gets_its_original_offsets(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(1, segment_bytes=4096)  # ~4 batches per segment: rolls write snapshots
    cluster.create_topic("idem", 1)
    broker = cluster.broker(0)
    _, pid, epoch = init_producer_id(cluster, 0)
    conn = connect(broker)
    sent: list[tuple[bytes, int]] = []
    for i in range(40):
        data = idempotent_batch(pid, epoch, 3 * i, 3)
        answer = produce(conn, "idem", 0, data, acks=-1)
        assert (answer.error_code, answer.base_offset) == (0, 3 * i)
        sent.append((data, answer.base_offset))
    conn.close()
    log_dir = broker.log_dir / "idem-0"
    assert len(list(log_dir.glob("*.snapshot"))) >= 3
    broker.kill()
    broker.start()
    assert "rebuilt the state of 1 producers from the snapshot at offset" in broker.log()
    conn = connect(broker)
    try:
        # the restarted broker answers NOT_LEADER_OR_FOLLOWER (retriable) until its view names it leader
        deadline = time.monotonic() + 15
        while (
            produce(conn, "idem", 0, b"", acks=-1).error_code == int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        # the last five batches are retries: the original offsets, error NONE, nothing appended; as
        # Kafka, the answer's log_append_time is the original batch's max timestamp (a CreateTime topic)
        for data, base_offset in sent[-5:]:
            answer = produce(conn, "idem", 0, data, acks=-1)
            assert (answer.error_code, answer.base_offset) == (0, base_offset)
            assert answer.log_append_time_ms == BASE_TS + base_offset + 2
        # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER, with the partition's log start offset as Kafka answers it
        gap = produce(conn, "idem", 0, idempotent_batch(pid, epoch, 121, 1), acks=-1)
        assert gap.error_code == int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert (gap.base_offset, gap.log_start_offset) == (-1, 0)
        assert "out of order sequence number 121, expected 120" in gap.error_message
        # the next batch in sequence goes on at the log end
        assert produce(conn, "idem", 0, idempotent_batch(pid, epoch, 120, 2), acks=-1).base_offset == 120
        # a newer epoch fences the older one
        assert produce(conn, "idem", 0, idempotent_batch(pid, epoch + 1, 0, 1), acks=-1).base_offset == 122
        fenced = produce(conn, "idem", 0, idempotent_batch(pid, epoch, 122, 1), acks=-1)
        assert (fenced.error_code, fenced.log_start_offset) == (int(ErrorCode.INVALID_PRODUCER_EPOCH), 0)
        parts = fetch(conn, [("idem", 0, 0, 1 << 22)], max_bytes=1 << 22)
    finally:
        conn.close()
    assert offsets_in(parts[("idem", 0)].records)[0] == 0
    assert parts[("idem", 0)].high_watermark == 123
