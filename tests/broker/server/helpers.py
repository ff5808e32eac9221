"""Helpers shared by the broker tests that talk to real broker processes: connections, batches, and the
Produce / Fetch / ListOffsets calls they make."""

from __future__ import annotations

import socket
from typing import Any

from broker.client.network.connection import BrokerConnection
from broker.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.batch_scan import scan_batches
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.support.broker_cluster import BrokerProcess, wait_for

BASE_TS = 1_700_000_000_000


def connect(broker: BrokerProcess, **settings: Any) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=broker.broker_id, **settings)
    conn.connect()
    return conn


def batch(first: int, count: int, size: int = 50, ts: int = BASE_TS) -> bytes:
    builder = RecordBatchBuilder()
    for i in range(count):
        builder.append(ts + first + i, b"k%06d" % (first + i), (b"v%06d" % (first + i)).ljust(size, b"."))
    return builder.build()


def produce(conn: BrokerConnection, topic: str, partition: int, records: bytes, acks: int = 1) -> Any:
    body = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, records)])],
    )
    if acks == 0:
        conn.send(body, expect_response=False).wait()
        return None
    return conn.request(body).responses[0].partition_responses[0]


def fetch(conn: BrokerConnection, parts: list[tuple[str, int, int, int]], **request: Any) -> dict[Any, Any]:
    """``parts``: (topic, partition, offset, partition_max_bytes) -> {(topic, p): PartitionData}."""
    topics: dict[str, list[FetchPartition]] = {}
    for topic, p, offset, max_bytes in parts:
        topics.setdefault(topic, []).append(
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=max_bytes)
        )
    request.setdefault("max_wait_ms", 0)
    request.setdefault("min_bytes", 0)
    response = conn.request(FetchRequest(topics=[FetchTopic(t, ps) for t, ps in topics.items()], **request))
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def session_fetch(
    conn: BrokerConnection,
    session_id: int,
    epoch: int,
    parts: dict[tuple[str, int], int] | None = None,
    forgotten: dict[str, list[int]] | None = None,
    *,
    replica_id: int = -1,
    version: int | None = None,
) -> FetchResponse:
    """A Fetch in session ``session_id`` at ``epoch`` naming ``parts`` ((topic, partition) -> offset)."""
    topics: dict[str, list[FetchPartition]] = {}
    for (topic, p), offset in (parts or {}).items():
        topics.setdefault(topic, []).append(
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
        )
    request = FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[FetchTopic(t, ps) for t, ps in topics.items()],
        forgotten_topics_data=[ForgottenTopic(t, ps) for t, ps in (forgotten or {}).items()],
    )
    response: FetchResponse = conn.request(request, version=version)
    return response


def answered(response: FetchResponse) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def wait_exposed(conn: BrokerConnection, topic: str, partition: int, offset: int) -> None:
    """acks=-1 is answered once appended; with ``expose = "flushed"`` consumers see the records once the
    next flush (``flush_ms`` 20 in the tests) moves the high watermark: wait for it."""

    def exposed() -> bool:
        response = conn.request(
            ListOffsetsRequest(
                topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(partition, timestamp=-1)])]
            )
        )
        found: int = response.topics[0].partitions[0].offset
        return found >= offset

    wait_for(exposed, 10, f"{topic}-{partition} to expose offsets below {offset}")


def offsets_in(records: Any) -> list[int]:
    scan = scan_batches(bytes(records), where="test")
    out: list[int] = []
    for b in scan.batches:
        out.extend(range(b.base_offset, b.next_offset))
    return out


def raw_socket(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
