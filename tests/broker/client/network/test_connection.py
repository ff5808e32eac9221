"""The client's broker connection against a real broker process: a request that cannot be written fails
exactly once, whichever of the writer and the reader sees the connection end first; requests the caller
frames itself (send_unanswered_frames) are written in one go, at the negotiated version, with the
connection's client id and correlation ids."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.client.errors import BrokerConnectionError
from broker.client.network.pending_request import PendingRequest
from broker.protocol.codec import encode_request
from broker.protocol.errors import EncodeError
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.server.helpers import connect, fetch, offsets_in, wait_exposed
from tests.support.broker_cluster import BrokerCluster


def _produce_body(topic: str) -> ProduceRequest:
    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, b"k", b"v" * 100)
    return ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(0, builder.build())])],
    )


def test_a_write_the_reader_already_failed_is_failed_once_through_its_callback(
    broker_cluster: BrokerCluster,
) -> None:
    """kill -9 of the broker while a request is being written: the reader sees the connection end and fails
    the request through its callback; the write then fails too, and must not raise as well (the producer's
    sender retried such a batch twice, and died of the second requeue)."""
    broker_cluster.create_topic("conn", 1)
    broker = broker_cluster.brokers[0]
    conn = connect(broker)
    outcomes: list[BaseException | None] = []
    write = conn._sendall

    def write_after_the_reader_failed(data: Any) -> None:
        broker.kill()
        deadline = time.monotonic() + 10
        while not conn.closed and time.monotonic() < deadline:  # the reader sees the end of the stream
            time.sleep(0.01)
        assert conn.closed, "the reader did not see the killed broker's connection end within 10 s"
        write(data)  # the socket was shut down: raises OSError

    conn._sendall = write_after_the_reader_failed
    callback: Callable[[PendingRequest], None] = lambda pending: outcomes.append(pending.error)  # noqa: E731
    try:
        pending = conn.send(_produce_body("conn"), callback=callback)
    finally:
        conn.close()
    assert len(outcomes) == 1
    assert isinstance(outcomes[0], BrokerConnectionError)
    assert pending.error is outcomes[0]
    # a second request on the closed connection raises, and calls nothing back
    with pytest.raises(BrokerConnectionError):
        conn.send(_produce_body("conn"), callback=callback)
    assert len(outcomes) == 1


def test_a_write_that_fails_first_raises_and_calls_nothing_back(broker_cluster: BrokerCluster) -> None:
    """The other order: the write fails before the reader noticed anything; the request fails by raising,
    and its callback is never called."""
    broker_cluster.create_topic("conn", 1)
    conn = connect(broker_cluster.brokers[0])
    outcomes: list[BaseException | None] = []

    def refused(data: Any) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    conn._sendall = refused
    try:
        with pytest.raises(BrokerConnectionError):
            conn.send(_produce_body("conn"), callback=lambda pending: outcomes.append(pending.error))
        time.sleep(0.2)  # a callback, if any, would run in the reader thread by now
    finally:
        conn.close()
    assert outcomes == []


def test_frames_the_caller_encodes_are_written_in_order_at_the_negotiated_version(
    broker_cluster: BrokerCluster,
) -> None:
    broker_cluster.create_topic("frames", 1)
    conn = connect(broker_cluster.brokers[0], client_id="framer")
    asked: list[tuple[int, str | None]] = []
    writes: list[int] = []
    write = conn._sendall

    def counted(data: Any) -> None:
        writes.append(len(data))
        write(data)

    def encode(version: int, client_id: str | None, ids: Iterator[int]) -> list[bytes]:
        asked.append((version, client_id))
        body = ProduceRequest(**{**_produce_body("frames")._asdict(), "acks": 0})
        return [encode_request(version, next(ids) & 0x7FFFFFFF, client_id, body) for _ in range(3)]

    conn._sendall = counted
    try:
        conn.send_unanswered_frames(0, encode)
        conn.send_unanswered_frames(0, lambda version, client_id, ids: [])  # nothing: nothing written
        assert asked == [(9, "framer")]
        assert len(writes) == 1  # the three requests in one write
        wait_exposed(conn, "frames", 0, 3)  # a request after them is answered: the ids moved on
        parts = fetch(conn, [("frames", 0, 0, 1 << 20)])
        assert offsets_in(parts[("frames", 0)].records) == [0, 1, 2]
    finally:
        conn.close()


def test_frames_that_cannot_be_encoded_raise_a_connection_error(broker_cluster: BrokerCluster) -> None:
    conn = connect(broker_cluster.brokers[0])

    def refuse(version: int, client_id: str | None, ids: Iterator[int]) -> list[bytes]:
        raise EncodeError(f"Produce v{version}: no such field")

    try:
        with pytest.raises(
            BrokerConnectionError, match="cannot encode the request: Produce v9: no such field"
        ):
            conn.send_unanswered_frames(0, refuse)
    finally:
        conn.close()
