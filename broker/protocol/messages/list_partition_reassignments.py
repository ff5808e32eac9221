"""ListPartitionReassignments (key 46), v0: the partition moves in progress (KIP-455).

The range is Kafka 3.x's (v0, flexible). Null ``topics`` lists every move; a partition that is not moving
is left out of the answer. Only the controller answers (others: NOT_CONTROLLER).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class ListPartitionReassignmentsTopics(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partition_indexes: Annotated[Sequence[int], wire(array("int32"))] = ()


class ListPartitionReassignmentsRequest(NamedTuple):
    timeout_ms: Annotated[int, wire("int32")] = 60_000
    topics: Annotated[
        Sequence[ListPartitionReassignmentsTopics] | None,
        wire(array(ListPartitionReassignmentsTopics), nullable="0+"),
    ] = None


class OngoingPartitionReassignment(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    replicas: Annotated[Sequence[int], wire(array("int32"))] = ()
    adding_replicas: Annotated[Sequence[int], wire(array("int32"))] = ()
    removing_replicas: Annotated[Sequence[int], wire(array("int32"))] = ()


class OngoingTopicReassignment(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[OngoingPartitionReassignment], wire(array(OngoingPartitionReassignment))
    ] = ()


class ListPartitionReassignmentsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    topics: Annotated[Sequence[OngoingTopicReassignment], wire(array(OngoingTopicReassignment))] = ()


LIST_PARTITION_REASSIGNMENTS = ApiSpec(
    key=ApiKey.LIST_PARTITION_REASSIGNMENTS,
    request=ListPartitionReassignmentsRequest,
    response=ListPartitionReassignmentsResponse,
    min_version=0,
    max_version=0,
    flexible_from=0,
)
