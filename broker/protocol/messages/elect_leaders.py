"""ElectLeaders (key 43), v0-v2: elect partitions' leaders now (KIP-460; v0 is the preferred replica only).

Kafka 4.4's range (v2 flexible; v1 adds ``election_type`` and the top-level error). Seen sent:
confluent-kafka's ``AdminClient.elect_leaders`` and kafka-python 3.0's ``elect_leaders``. Null
``topic_partitions`` asks for every partition (then those needing no election are left out of the answer,
as Kafka does).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire

#: ``election_type`` values (Kafka's ``ElectionType``).
PREFERRED = 0
UNCLEAN = 1


class TopicPartitions(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partitions: Annotated[Sequence[int], wire(array("int32"))] = ()


class ElectLeadersRequest(NamedTuple):
    election_type: Annotated[int, wire("int8", "1+")] = PREFERRED
    topic_partitions: Annotated[
        Sequence[TopicPartitions] | None, wire(array(TopicPartitions), nullable="0+")
    ] = None
    timeout_ms: Annotated[int, wire("int32")] = 60_000


class PartitionResult(NamedTuple):
    partition_id: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None


class ReplicaElectionResult(NamedTuple):
    topic: Annotated[str, wire("string")] = ""
    partition_result: Annotated[Sequence[PartitionResult], wire(array(PartitionResult))] = ()


class ElectLeadersResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16", "1+")] = 0
    replica_election_results: Annotated[
        Sequence[ReplicaElectionResult], wire(array(ReplicaElectionResult))
    ] = ()


ELECT_LEADERS = ApiSpec(
    key=ApiKey.ELECT_LEADERS,
    request=ElectLeadersRequest,
    response=ElectLeadersResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
