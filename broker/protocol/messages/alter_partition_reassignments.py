"""AlterPartitionReassignments (key 45), v0: start or cancel partition moves (KIP-455).

The range is Kafka 3.x's (v0, flexible). A partition's ``replicas`` are its target replicas, or null to
cancel the move in progress. Only the controller answers (others: NOT_CONTROLLER);
:mod:`broker.server.partition_reassigner` does the work.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class ReassignablePartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    replicas: Annotated[Sequence[int] | None, wire(array("int32"), nullable="0+")] = None


class ReassignableTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[ReassignablePartition], wire(array(ReassignablePartition))] = ()


class AlterPartitionReassignmentsRequest(NamedTuple):
    timeout_ms: Annotated[int, wire("int32")] = 60_000
    topics: Annotated[Sequence[ReassignableTopic], wire(array(ReassignableTopic))] = ()


class ReassignablePartitionResponse(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None


class ReassignableTopicResponse(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[ReassignablePartitionResponse], wire(array(ReassignablePartitionResponse))
    ] = ()


class AlterPartitionReassignmentsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    responses: Annotated[Sequence[ReassignableTopicResponse], wire(array(ReassignableTopicResponse))] = ()


ALTER_PARTITION_REASSIGNMENTS = ApiSpec(
    key=ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    request=AlterPartitionReassignmentsRequest,
    response=AlterPartitionReassignmentsResponse,
    min_version=0,
    max_version=0,
    flexible_from=0,
)
