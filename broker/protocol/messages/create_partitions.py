"""CreatePartitions (key 37), v0-v3: add partitions to topics.

The range is Kafka 3.x's. v2 is flexible; v1 and v3 change only throttling (v3 may answer
THROTTLING_QUOTA_EXCEEDED, which Lumber never does). ``assignments``, when given, places each new partition
(one broker list per partition added); null lets the broker place them.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class CreatePartitionsAssignment(NamedTuple):
    broker_ids: Annotated[Sequence[int], wire(array("int32"))] = ()


class CreatePartitionsTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    count: Annotated[int, wire("int32")] = 0  # type: ignore[assignment]  # Kafka's name shadows tuple.count
    assignments: Annotated[
        Sequence[CreatePartitionsAssignment] | None,
        wire(array(CreatePartitionsAssignment), nullable="0+"),
    ] = None


class CreatePartitionsRequest(NamedTuple):
    topics: Annotated[Sequence[CreatePartitionsTopic], wire(array(CreatePartitionsTopic))] = ()
    timeout_ms: Annotated[int, wire("int32")] = 0
    validate_only: Annotated[bool, wire("bool")] = False


class CreatePartitionsTopicResult(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None


class CreatePartitionsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    results: Annotated[Sequence[CreatePartitionsTopicResult], wire(array(CreatePartitionsTopicResult))] = ()


CREATE_PARTITIONS = ApiSpec(
    key=ApiKey.CREATE_PARTITIONS,
    request=CreatePartitionsRequest,
    response=CreatePartitionsResponse,
    min_version=0,
    max_version=3,
    flexible_from=2,
)
