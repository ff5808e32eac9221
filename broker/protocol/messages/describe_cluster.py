"""DescribeCluster (key 60), v0-v2: the cluster id, the controller and the brokers (KIP-700).

Kafka 4.4's range (flexible from v0). Seen sent: confluent-kafka's ``AdminClient.describe_cluster`` and
kafka-python 3.0's ``describe_cluster``. Lumber's brokers are the only endpoints it has: an
``endpoint_type`` of 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, as a Kafka broker answers it;
``include_fenced_brokers`` (v2) changes nothing (a Lumber broker is registered or gone).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire

#: ``endpoint_type`` values (Kafka's ``EndpointType``).
BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2
#: ``cluster_authorized_operations`` when not asked for (the schema's default, Kafka's ``Int.MinValue``).
OPERATIONS_NOT_ASKED = -(2**31)


class DescribeClusterRequest(NamedTuple):
    include_cluster_authorized_operations: Annotated[bool, wire("bool")] = False
    endpoint_type: Annotated[int, wire("int8", "1+")] = BROKER_ENDPOINTS
    include_fenced_brokers: Annotated[bool, wire("bool", "2+")] = False


class DescribeClusterBroker(NamedTuple):
    broker_id: Annotated[int, wire("int32")] = 0
    host: Annotated[str, wire("string")] = ""
    port: Annotated[int, wire("int32")] = 0
    rack: Annotated[str | None, wire("string", nullable="0+")] = None
    is_fenced: Annotated[bool, wire("bool", "2+")] = False


class DescribeClusterResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    endpoint_type: Annotated[int, wire("int8", "1+")] = BROKER_ENDPOINTS
    cluster_id: Annotated[str, wire("string")] = ""
    controller_id: Annotated[int, wire("int32")] = -1
    brokers: Annotated[Sequence[DescribeClusterBroker], wire(array(DescribeClusterBroker))] = ()
    cluster_authorized_operations: Annotated[int, wire("int32")] = OPERATIONS_NOT_ASKED


DESCRIBE_CLUSTER = ApiSpec(
    key=ApiKey.DESCRIBE_CLUSTER,
    request=DescribeClusterRequest,
    response=DescribeClusterResponse,
    min_version=0,
    max_version=2,
    flexible_from=0,
)
