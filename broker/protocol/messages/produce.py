"""Produce (key 0), v0-v9: append record batches to partitions.

``records`` is opaque here: a zero-copy ``memoryview`` of the request frame, validated by the log layer.
v3 adds the transactional id and record batch v2 (message format 2); v0-v2 carry the old message sets,
which Lumber's log does not store: a server answers their partitions UNSUPPORTED_FOR_MESSAGE_FORMAT. They
are implemented and advertised anyway because librdkafka 2.x releases with issue 4956 enable gzip and
snappy only if the broker's Produce range includes v0 (Kafka 4.0 advertises v0 for the same reason,
KAFKA-18659; librdkafka 2.16.0 was seen to compress with a v3 floor, so it has the fix). v5 adds
``log_start_offset``, v8 per-record errors, v9 is flexible (the highest version kafka-python sends). With
``acks`` 0 the broker sends no response at all.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.region import RecordsData
from broker.protocol.schema import array, wire


class PartitionProduceData(NamedTuple):
    index: Annotated[int, wire("int32")] = 0  # type: ignore[assignment]  # Kafka's name shadows tuple.index
    records: Annotated[RecordsData | None, wire("records", nullable="0+")] = None


class TopicProduceData(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partition_data: Annotated[Sequence[PartitionProduceData], wire(array(PartitionProduceData))] = ()


class ProduceRequest(NamedTuple):
    transactional_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
    acks: Annotated[int, wire("int16")] = 0
    timeout_ms: Annotated[int, wire("int32")] = 0
    topic_data: Annotated[Sequence[TopicProduceData], wire(array(TopicProduceData))] = ()


class BatchIndexAndErrorMessage(NamedTuple):
    batch_index: Annotated[int, wire("int32", "8+")] = 0
    batch_index_error_message: Annotated[str | None, wire("string", "8+", nullable="8+")] = None


class PartitionProduceResponse(NamedTuple):
    index: Annotated[int, wire("int32")] = 0  # type: ignore[assignment]  # Kafka's name shadows tuple.index
    error_code: Annotated[int, wire("int16")] = 0
    base_offset: Annotated[int, wire("int64")] = 0
    log_append_time_ms: Annotated[int, wire("int64", "2+")] = -1
    log_start_offset: Annotated[int, wire("int64", "5+")] = -1
    record_errors: Annotated[
        Sequence[BatchIndexAndErrorMessage], wire(array(BatchIndexAndErrorMessage), "8+")
    ] = ()
    error_message: Annotated[str | None, wire("string", "8+", nullable="8+")] = None


class TopicProduceResponse(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partition_responses: Annotated[
        Sequence[PartitionProduceResponse], wire(array(PartitionProduceResponse))
    ] = ()


class ProduceResponse(NamedTuple):
    responses: Annotated[Sequence[TopicProduceResponse], wire(array(TopicProduceResponse))] = ()
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0


PRODUCE = ApiSpec(
    key=ApiKey.PRODUCE,
    request=ProduceRequest,
    response=ProduceResponse,
    min_version=0,
    max_version=9,
    flexible_from=9,
)
