"""DescribeProducers (key 61), v0: the idempotent producers a partition's leader holds state for (KIP-664).

Kafka 4.4's range (v0, flexible). Seen sent: kafka-python 3.0's ``describe_producers`` and Kafka's
``kafka-transactions describe-producers``. Lumber has no transactions: ``coordinator_epoch`` and
``current_txn_start_offset`` are always -1, as Kafka answers for a producer outside a transaction.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class TopicRequest(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partition_indexes: Annotated[Sequence[int], wire(array("int32"))] = ()


class DescribeProducersRequest(NamedTuple):
    topics: Annotated[Sequence[TopicRequest], wire(array(TopicRequest))] = ()


class ProducerState(NamedTuple):
    producer_id: Annotated[int, wire("int64")] = 0
    producer_epoch: Annotated[int, wire("int32")] = 0
    last_sequence: Annotated[int, wire("int32")] = -1
    last_timestamp: Annotated[int, wire("int64")] = -1
    coordinator_epoch: Annotated[int, wire("int32")] = -1
    current_txn_start_offset: Annotated[int, wire("int64")] = -1


class PartitionResponse(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    active_producers: Annotated[Sequence[ProducerState], wire(array(ProducerState))] = ()


class TopicResponse(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[PartitionResponse], wire(array(PartitionResponse))] = ()


class DescribeProducersResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    topics: Annotated[Sequence[TopicResponse], wire(array(TopicResponse))] = ()


DESCRIBE_PRODUCERS = ApiSpec(
    key=ApiKey.DESCRIBE_PRODUCERS,
    request=DescribeProducersRequest,
    response=DescribeProducersResponse,
    min_version=0,
    max_version=0,
    flexible_from=0,
)
