"""SyncGroup (key 14), v0-v5: the leader hands in the assignment; every member receives its own.

Kafka's range. Seen sent: librdkafka 2.16 v3 (v3: ``group_instance_id``), kafka-python 3.0 v5. v4 is
flexible; v5 carries the protocol type and name, which the coordinator checks
against the group's (INCONSISTENT_GROUP_PROTOCOL) and echoes.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class SyncGroupRequestAssignment(NamedTuple):
    member_id: Annotated[str, wire("string")] = ""
    assignment: Annotated[bytes, wire("bytes")] = b""


class SyncGroupRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    generation_id: Annotated[int, wire("int32")] = 0
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
    protocol_type: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    protocol_name: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    assignments: Annotated[Sequence[SyncGroupRequestAssignment], wire(array(SyncGroupRequestAssignment))] = ()


class SyncGroupResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    protocol_type: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    protocol_name: Annotated[str | None, wire("string", "5+", nullable="5+")] = None
    assignment: Annotated[bytes, wire("bytes")] = b""


SYNC_GROUP = ApiSpec(
    key=ApiKey.SYNC_GROUP,
    request=SyncGroupRequest,
    response=SyncGroupResponse,
    min_version=0,
    max_version=5,
    flexible_from=4,
)
