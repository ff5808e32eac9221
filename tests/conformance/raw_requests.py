"""Requests framed and parsed with kafka-python's protocol classes, sent on a raw socket, so a scenario sees
exactly what the broker answers (and whether it closes the connection), without a client's retries.

Frames are Kafka's: a 4-byte size, a request header (v1, or v2 for flexible versions) and the body.
Every read is bounded by its timeout.

An idempotent producer's batch (:func:`idempotent_batch`) carries the producer id, epoch and base sequence a
scenario chooses, so it can send what a well-behaved client never does: a sequence gap, a resend, an epoch
older than one the partition has seen. Its records have fixed CreateTime timestamps, so two runs of a
scenario write the same bytes.
"""

from __future__ import annotations

import socket
import struct
import time
import warnings
from typing import Any

from tests.conformance.conformance import RECENT_TS

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

PRODUCE_VERSION = 9
INIT_PRODUCER_ID_VERSION = 4
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
METADATA_VERSION = 9
FETCH_VERSION = 12
DESCRIBE_CONFIGS_VERSION = 4
#: DescribeConfigs' resource types
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
#: DescribeConfigs v1+ config sources, by number
CONFIG_SOURCES = (
    "UNKNOWN",
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "CLIENT_METRICS_CONFIG",
    "GROUP_CONFIG",
)
#: the CreateTime of the first record of every :func:`idempotent_batch` (then one ms per record)
BATCH_TIMESTAMP_MS = RECENT_TS


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


def one_record(key: bytes = b"k", value: bytes = b"v") -> bytes:
    """One batch (magic 2, no producer id) of one record, key ``k`` and value ``v`` unless given."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=None, key=key, value=value, headers=[])
    return bytes(builder.build())


def idempotent_batch(producer_id: int, epoch: int, base_sequence: int, count: int) -> bytes:
    """One batch (magic 2, not transactional) of ``count`` records of an idempotent producer: record ``i``
    has key ``s<base_sequence + i>`` and value ``e<epoch>-s<base_sequence + i>``."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i in range(count):
        sequence = base_sequence + i
        builder.append(
            i,
            timestamp=BATCH_TIMESTAMP_MS + sequence,
            key=b"s%d" % sequence,
            value=b"e%d-s%d" % (epoch, sequence),
            headers=[],
        )
    return bytes(builder.build())


def produce_frame(
    topic: str, partition: int, acks: int, correlation_id: int, records: bytes | None = None
) -> bytes:
    """A Produce v9 of ``records`` (default :func:`one_record`) to one partition."""
    data = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=partition, records=one_record() if records is None else records
    )
    wanted = ProduceRequest.TopicProduceData(name=topic, partition_data=[data])
    request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[wanted])
    request.API_VERSION = PRODUCE_VERSION
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=PRODUCE_VERSION, header=True, framed=True))


def produce_answer(response: bytes) -> list[dict[str, Any]]:
    """A Produce v9 response's partitions: every field a producer reads."""
    decoded = ProduceResponse.decode(response, version=PRODUCE_VERSION, header=True, framed=True)
    return [
        {
            "partition": p.index,
            "error_code": p.error_code,
            "base_offset": p.base_offset,
            "log_append_time_ms": p.log_append_time_ms,
            "log_start_offset": p.log_start_offset,
            "record_errors": [[e.batch_index, e.batch_index_error_message] for e in p.record_errors],
            "error_message": p.error_message,
        }
        for t in decoded.responses
        for p in t.partition_responses
    ]


def init_producer_id_frame(
    correlation_id: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    transactional_id: str | None = None,
) -> bytes:
    """An InitProducerId v4; a known ``producer_id`` and ``producer_epoch`` ask for a bump (KIP-360)."""
    request = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60000,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    request.API_VERSION = INIT_PRODUCER_ID_VERSION
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=INIT_PRODUCER_ID_VERSION, header=True, framed=True))


def init_producer_id_answer(response: bytes) -> tuple[int, int, int]:
    """An InitProducerId v4 response's error code, producer id and epoch."""
    decoded = InitProducerIdResponse.decode(
        response, version=INIT_PRODUCER_ID_VERSION, header=True, framed=True
    )
    return decoded.error_code, decoded.producer_id, decoded.producer_epoch


def offset_for_leader_epoch_frame(
    topic: str, partition: int, leader_epoch: int, current_leader_epoch: int, correlation_id: int
) -> bytes:
    """An OffsetForLeaderEpoch v4 as a consumer sends it (replica id -1) for one partition."""
    wanted = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch
    )
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[wanted])],
    )
    request.API_VERSION = OFFSET_FOR_LEADER_EPOCH_VERSION
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=OFFSET_FOR_LEADER_EPOCH_VERSION, header=True, framed=True))


def offset_for_leader_epoch_answer(response: bytes) -> list[int]:
    """An OffsetForLeaderEpoch v4 response's one partition: error code, leader epoch, end offset."""
    decoded = OffsetForLeaderEpochResponse.decode(
        response, version=OFFSET_FOR_LEADER_EPOCH_VERSION, header=True, framed=True
    )
    [found] = [p for t in decoded.topics for p in t.partitions]
    return [found.error_code, found.leader_epoch, found.end_offset]


def partition_state(address: str, topic: str, partition: int) -> dict[str, Any]:
    """A Metadata v9 answer about one partition: its error code, leader, leader epoch, replicas and ISR
    (broker ids)."""
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    request.API_VERSION = METADATA_VERSION
    request.with_header(correlation_id=41, client_id="conformance")
    [response] = exchange(
        address, [bytes(request.encode(version=METADATA_VERSION, header=True, framed=True))]
    )
    if response is None:
        raise AssertionError(f"{address} did not answer Metadata for {topic}")
    decoded = MetadataResponse.decode(response, version=METADATA_VERSION, header=True, framed=True)
    [found] = [
        p for t in decoded.topics if t.name == topic for p in t.partitions if p.partition_index == partition
    ]
    return {
        "error_code": found.error_code,
        "leader": found.leader_id,
        "leader_epoch": found.leader_epoch,
        "replicas": list(found.replica_nodes),
        "isr": list(found.isr_nodes),
    }


def _fetched_batches(address: str, topic: str, partition: int, end: int, correlation_id: int) -> list[Any]:
    """Every batch of ``topic-partition`` below offset ``end`` as Fetch v12 from ``address`` returns it (the
    stored bytes: neither broker converts a v2 batch on the way out), kafka-python's batch objects in log
    order."""
    batches: list[Any] = []
    offset = 0
    while offset < end:
        [response] = exchange(address, [fetch_frame(topic, partition, correlation_id, offset=offset)])
        if response is None:
            raise AssertionError(f"{address} did not answer a Fetch of {topic}-{partition} at {offset}")
        answer = FetchResponse.decode(response, version=FETCH_VERSION, header=True, framed=True)
        [data] = [p for t in answer.responses for p in t.partitions]
        if data.error_code != 0 or not data.records:
            raise AssertionError(f"{topic}-{partition} at {offset} from {address}: error {data.error_code}")
        records = MemoryRecords(bytes(data.records))
        while (batch := records.next_batch()) is not None:
            if batch.last_offset >= offset:
                if batch.base_offset < end:
                    batches.append(batch)
                offset = batch.last_offset + 1
    return batches


def batch_epochs(address: str, topic: str, partition: int, end: int) -> list[tuple[int, int, int]]:
    """Every batch of ``topic-partition`` below offset ``end`` as Fetch v12 from ``address`` reads it:
    ``(base offset, last offset, partition leader epoch)``, in log order."""
    return [
        (batch.base_offset, batch.last_offset, batch.leader_epoch)
        for batch in _fetched_batches(address, topic, partition, end, 51)
    ]


#: A batch's codec (bits 0-2 of its attributes) by name, as ``compression.type`` names it.
CODEC_NAMES = ("uncompressed", "gzip", "snappy", "lz4", "zstd")


def stored_batches(address: str, topic: str, partition: int, end: int) -> list[dict[str, Any]]:
    """Every batch of ``topic-partition`` below offset ``end`` as Fetch v12 from ``address`` returns it: its
    offsets, record count, codec, timestamp type, and producer fields (whether it has a producer id: the
    ids differ between clusters)."""
    return [
        {
            "offsets": [batch.base_offset, batch.last_offset],
            "records": batch.records_count,
            "codec": CODEC_NAMES[batch.compression_type],
            "timestamp_type": batch.timestamp_type,
            "has_producer_id": batch.producer_id >= 0,
            "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence,
            "transactional": batch.is_transactional,
        }
        for batch in _fetched_batches(address, topic, partition, end, 52)
    ]


def stored_batch_bytes(address: str, topic: str, partition: int, end: int) -> list[bytes]:
    """The bytes of every batch of ``topic-partition`` below offset ``end`` as Fetch v12 from ``address``
    returns them (header included), in log order."""
    return [bytes(batch._buffer) for batch in _fetched_batches(address, topic, partition, end, 54)]


def describe_config(address: str, resource_type: int, name: str, key: str) -> dict[str, Any] | None:
    """DescribeConfigs v4 of one config of one resource, synonyms included (every one, in order: a client's
    map by name would keep one of a topic config's and its broker default's, which share the name
    ``compression.type``): its value, source and read-only flag, or the error's code; None if the resource
    has no such config."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=[key]
    )
    request = DescribeConfigsRequest(resources=[resource], include_synonyms=True, include_documentation=False)
    request.API_VERSION = DESCRIBE_CONFIGS_VERSION
    request.with_header(correlation_id=53, client_id="conformance")
    [response] = exchange(
        address, [bytes(request.encode(version=DESCRIBE_CONFIGS_VERSION, header=True, framed=True))]
    )
    if response is None:
        raise AssertionError(f"{address} did not answer DescribeConfigs of {name}")
    decoded = DescribeConfigsResponse.decode(
        response, version=DESCRIBE_CONFIGS_VERSION, header=True, framed=True
    )
    [result] = decoded.results
    if result.error_code:
        return {"error_code": result.error_code}
    for config in result.configs:
        if config.name == key:
            return {
                "value": config.value,
                "source": CONFIG_SOURCES[config.config_source],
                "read_only": config.read_only,
                "synonyms": [[s.name, s.value, CONFIG_SOURCES[s.source]] for s in config.synonyms],
            }
    return None


def fetch_positions(address: str, topic: str, partition: int) -> dict[str, int]:
    """A Fetch v12 of ``topic-partition`` at offset 0 from ``address``: its error code, high watermark,
    last stable offset and log start offset."""
    [response] = exchange(address, [fetch_frame(topic, partition, 52)])
    if response is None:
        raise AssertionError(f"{address} did not answer a Fetch of {topic}-{partition}")
    answer = FetchResponse.decode(response, version=FETCH_VERSION, header=True, framed=True)
    [data] = [p for t in answer.responses for p in t.partitions]
    return {
        "error_code": data.error_code,
        "high_watermark": data.high_watermark,
        "last_stable_offset": data.last_stable_offset,
        "log_start_offset": data.log_start_offset,
    }


def exchange(address: str, frames: list[bytes], timeout_s: float = 10.0) -> list[bytes | None]:
    """Send each frame on one connection to ``host:port`` and read its response in turn (None: none came,
    or the broker closed the connection, after which the rest are not sent)."""
    host, port = address.rsplit(":", 1)
    answers: list[bytes | None] = []
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        for frame in frames:
            sock.sendall(frame)
            response, closed = read_response(sock, timeout_s)
            answers.append(response)
            if closed:
                answers.extend([None] * (len(frames) - len(answers)))
                break
    return answers


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
    request.API_VERSION = FETCH_VERSION
    request.with_header(correlation_id=correlation_id, client_id="conformance")
    return bytes(request.encode(version=FETCH_VERSION, header=True, framed=True))
