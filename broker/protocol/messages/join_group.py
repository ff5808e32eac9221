"""JoinGroup (key 11), v0-v9: a member joins (or rejoins) a classic consumer group.

The range is Kafka's own (v0-v9). Seen sent through this codec: librdkafka 2.16 v5 (v5: ``group_instance_id``
for static membership, KIP-345), kafka-python 3.0 v7. v1 adds the rebalance
timeout, v4 makes a new member without an id retry with the one the coordinator gives it
(MEMBER_ID_REQUIRED, KIP-394), v6 is flexible, v7 answers the protocol type, v8 carries the reason, v9's
``skip_assignment`` is for server-side assignors (always false here).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class JoinGroupRequestProtocol(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    metadata: Annotated[bytes, wire("bytes")] = b""


class JoinGroupRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    session_timeout_ms: Annotated[int, wire("int32")] = 0
    rebalance_timeout_ms: Annotated[int, wire("int32", "1+")] = -1
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    protocol_type: Annotated[str, wire("string")] = ""
    protocols: Annotated[Sequence[JoinGroupRequestProtocol], wire(array(JoinGroupRequestProtocol))] = ()
    reason: Annotated[str | None, wire("string", "8+", nullable="8+")] = None


class JoinGroupResponseMember(NamedTuple):
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    metadata: Annotated[bytes, wire("bytes")] = b""


class JoinGroupResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "2+")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    generation_id: Annotated[int, wire("int32")] = -1
    protocol_type: Annotated[str | None, wire("string", "7+", nullable="7+")] = None
    protocol_name: Annotated[str | None, wire("string", nullable="7+")] = ""
    leader: Annotated[str, wire("string")] = ""
    skip_assignment: Annotated[bool, wire("bool", "9+")] = False
    member_id: Annotated[str, wire("string")] = ""
    members: Annotated[Sequence[JoinGroupResponseMember], wire(array(JoinGroupResponseMember))] = ()


JOIN_GROUP = ApiSpec(
    key=ApiKey.JOIN_GROUP,
    request=JoinGroupRequest,
    response=JoinGroupResponse,
    min_version=0,
    max_version=9,
    flexible_from=6,
)
