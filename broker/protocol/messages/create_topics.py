"""CreateTopics (key 19), v2-v7: create topics with a partition count (and optionally an assignment).

The range is Kafka 4.0's: v2 is its floor, v4 allows -1 partitions / replication factor ("broker
default"), v5 is flexible and answers with the created topic's settings, v7 adds the topic id (zero in
Lumber). kafka-python's admin client and librdkafka's both negotiate within it.
"""

import uuid
from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.primitives import Uuid
from broker.protocol.schema import array, wire


class CreatableReplicaAssignment(NamedTuple):
    partition_index: Annotated[int, wire("int32")] = 0
    broker_ids: Annotated[Sequence[int], wire(array("int32"))] = ()


class CreatableTopicConfig(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    value: Annotated[str | None, wire("string", nullable="0+")] = ""


class CreatableTopic(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    num_partitions: Annotated[int, wire("int32")] = 0
    replication_factor: Annotated[int, wire("int16")] = 0
    assignments: Annotated[Sequence[CreatableReplicaAssignment], wire(array(CreatableReplicaAssignment))] = ()
    configs: Annotated[Sequence[CreatableTopicConfig], wire(array(CreatableTopicConfig))] = ()


class CreateTopicsRequest(NamedTuple):
    topics: Annotated[Sequence[CreatableTopic], wire(array(CreatableTopic))] = ()
    timeout_ms: Annotated[int, wire("int32")] = 60000
    validate_only: Annotated[bool, wire("bool", "1+")] = False


class CreatableTopicConfigs(NamedTuple):
    name: Annotated[str, wire("string", "5+")] = ""
    value: Annotated[str | None, wire("string", "5+", nullable="5+")] = ""
    read_only: Annotated[bool, wire("bool", "5+")] = False
    config_source: Annotated[int, wire("int8", "5+")] = -1
    is_sensitive: Annotated[bool, wire("bool", "5+")] = False


class CreatableTopicResult(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    topic_id: Annotated[uuid.UUID, wire("uuid", "7+")] = Uuid.ZERO
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", "1+", nullable="0+")] = ""
    topic_config_error_code: Annotated[int, wire("int16", "5+", tag=0)] = 0
    num_partitions: Annotated[int, wire("int32", "5+")] = -1
    replication_factor: Annotated[int, wire("int16", "5+")] = -1
    configs: Annotated[
        Sequence[CreatableTopicConfigs] | None, wire(array(CreatableTopicConfigs), "5+", nullable="5+")
    ] = ()


class CreateTopicsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "2+")] = 0
    topics: Annotated[Sequence[CreatableTopicResult], wire(array(CreatableTopicResult))] = ()


CREATE_TOPICS = ApiSpec(
    key=ApiKey.CREATE_TOPICS,
    request=CreateTopicsRequest,
    response=CreateTopicsResponse,
    min_version=2,
    max_version=7,
    flexible_from=5,
)
