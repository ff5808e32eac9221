"""Requests framed and parsed with kafka-python's protocol classes, sent on a raw socket, so a scenario sees
exactly what the broker answers (and whether it closes the connection), without a client's retries.

Frames are Kafka's: a 4-byte size, a request header (v1, or v2 for flexible versions) and the body.
Every read is bounded by its timeout.
"""

from __future__ import annotations

import socket
import struct
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder


def read_response(sock: socket.socket, timeout_s: float = 2.0) -> tuple[bytes | None, bool]:
    """One response's bytes (None if none came), and whether the broker closed the connection."""
    sock.settimeout(timeout_s)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return (data or None), True
            data += chunk
            if len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
                return data, False
    except TimeoutError:
        return (data or None), False
    except ConnectionResetError:
        return (data or None), True
    return (data or None), False


def one_record() -> bytes:
    """One batch (magic 2, no producer id) of one record, key ``k``, value ``v``."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


def produce_frame(topic: str, partition: int, acks: int, correlation_id: int) -> bytes:
    """A Produce v9 of :func:`one_record` to one partition."""
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=one_record())
    wanted = ProduceRequest.TopicProduceData(name=topic, partition_data=[data])
    request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[wanted])
    request.API_VERSION = 9
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=9, header=True, framed=True))


def fetch_frame(
    topic: str, partition: int, correlation_id: int, offset: int = 0, max_wait_ms: int = 100
) -> bytes:
    """A Fetch v12 (topic names, no session) of one partition from ``offset``, ``min_bytes`` 1."""
    wanted = FetchRequest.FetchTopic.FetchPartition(
        partition=partition, fetch_offset=offset, partition_max_bytes=65536
    )
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[wanted])],
    )
    request.API_VERSION = 12
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=12, header=True, framed=True))
