"""Metadata (key 3), v0-v12: the cluster's brokers and the partitions and leaders of topics.

v0 asks for all topics with an empty list, v1+ with null (an empty list asks for none); v4+ carries
``allow_auto_topic_creation``; v7+ leader epochs; v9+ is flexible; v10+ topic ids; v12 a null topic name in
the request. v13 (a top-level error code, Kafka 4.0) is left out: neither client needs it. Lumber has no
leader epochs: a server answers ``leader_epoch`` -1, so that clients skip KIP-320 offset validation (and
never send OffsetForLeaderEpoch), and a zero topic id (no KIP-516 topic ids).
"""

import uuid
from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.primitives import Uuid
from broker.protocol.schema import array, wire

#: Kafka's "authorized operations not requested" (``Integer.MIN_VALUE``).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class MetadataRequestTopic(NamedTuple):
    topic_id: Annotated[uuid.UUID, wire("uuid", "10+")] = Uuid.ZERO
    name: Annotated[str | None, wire("string", nullable="10+")] = ""


class MetadataRequest(NamedTuple):
    topics: Annotated[
        Sequence[MetadataRequestTopic] | None, wire(array(MetadataRequestTopic), nullable="1+")
    ] = ()
    allow_auto_topic_creation: Annotated[bool, wire("bool", "4+")] = True
    include_cluster_authorized_operations: Annotated[bool, wire("bool", "8-10")] = False
    include_topic_authorized_operations: Annotated[bool, wire("bool", "8+")] = False


class MetadataResponseBroker(NamedTuple):
    node_id: Annotated[int, wire("int32")] = 0
    host: Annotated[str, wire("string")] = ""
    port: Annotated[int, wire("int32")] = 0
    rack: Annotated[str | None, wire("string", "1+", nullable="1+")] = None


class MetadataResponsePartition(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    partition_index: Annotated[int, wire("int32")] = 0
    leader_id: Annotated[int, wire("int32")] = 0
    leader_epoch: Annotated[int, wire("int32", "7+")] = -1
    replica_nodes: Annotated[Sequence[int], wire(array("int32"))] = ()
    isr_nodes: Annotated[Sequence[int], wire(array("int32"))] = ()
    offline_replicas: Annotated[Sequence[int], wire(array("int32"), "5+")] = ()


class MetadataResponseTopic(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    name: Annotated[str | None, wire("string", nullable="12+")] = ""
    topic_id: Annotated[uuid.UUID, wire("uuid", "10+")] = Uuid.ZERO
    is_internal: Annotated[bool, wire("bool", "1+")] = False
    partitions: Annotated[Sequence[MetadataResponsePartition], wire(array(MetadataResponsePartition))] = ()
    topic_authorized_operations: Annotated[int, wire("int32", "8+")] = AUTHORIZED_OPERATIONS_OMITTED


class MetadataResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "3+")] = 0
    brokers: Annotated[Sequence[MetadataResponseBroker], wire(array(MetadataResponseBroker))] = ()
    cluster_id: Annotated[str | None, wire("string", "2+", nullable="2+")] = None
    controller_id: Annotated[int, wire("int32", "1+")] = -1
    topics: Annotated[Sequence[MetadataResponseTopic], wire(array(MetadataResponseTopic))] = ()
    cluster_authorized_operations: Annotated[int, wire("int32", "8-10")] = AUTHORIZED_OPERATIONS_OMITTED


METADATA = ApiSpec(
    key=ApiKey.METADATA,
    request=MetadataRequest,
    response=MetadataResponse,
    min_version=0,
    max_version=12,
    flexible_from=9,
)
