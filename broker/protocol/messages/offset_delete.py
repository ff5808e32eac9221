"""OffsetDelete (key 47), v0: delete a group's committed offsets of some partitions (KIP-496).

The only version. A partition the group still consumes (its members subscribe
to its topic) answers GROUP_SUBSCRIBED_TO_TOPIC; an active group of another protocol type than
``consumer`` answers NON_EMPTY_GROUP.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class OffsetDeleteRequestPartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0


class OffsetDeleteRequestTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[OffsetDeleteRequestPartition], wire(array(OffsetDeleteRequestPartition))
    ] = ()


class OffsetDeleteRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    topics: Annotated[Sequence[OffsetDeleteRequestTopic], wire(array(OffsetDeleteRequestTopic))] = ()


class OffsetDeleteResponsePartition(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0


class OffsetDeleteResponseTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    partitions: Annotated[
        Sequence[OffsetDeleteResponsePartition], wire(array(OffsetDeleteResponsePartition))
    ] = ()


class OffsetDeleteResponse(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    topics: Annotated[Sequence[OffsetDeleteResponseTopic], wire(array(OffsetDeleteResponseTopic))] = ()


OFFSET_DELETE = ApiSpec(
    key=ApiKey.OFFSET_DELETE,
    request=OffsetDeleteRequest,
    response=OffsetDeleteResponse,
    min_version=0,
    max_version=0,
    flexible_from=None,
)
