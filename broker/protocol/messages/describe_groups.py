"""DescribeGroups (key 15), v0-v5: a group's state, protocol, members and their assignments.

Kafka 4.0's range (v6 only adds an error message). Seen sent: kafka-python 3.0 v5. v3 asks for the
authorized operations (KIP-430, :mod:`broker.server.group_apis`; Kafka's "not given", INT32_MIN, when not
asked), v4 adds the members' ``group_instance_id``, v5 is flexible.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire

#: Kafka's "authorized operations not included".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class DescribeGroupsRequest(NamedTuple):
    groups: Annotated[Sequence[str], wire(array("string"))] = ()
    include_authorized_operations: Annotated[bool, wire("bool", "3+")] = False


class DescribedGroupMember(NamedTuple):
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "4+", nullable="4+")] = None
    client_id: Annotated[str, wire("string")] = ""
    client_host: Annotated[str, wire("string")] = ""
    member_metadata: Annotated[bytes, wire("bytes")] = b""
    member_assignment: Annotated[bytes, wire("bytes")] = b""


class DescribedGroup(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    group_id: Annotated[str, wire("string")] = ""
    group_state: Annotated[str, wire("string")] = ""
    protocol_type: Annotated[str, wire("string")] = ""
    protocol_data: Annotated[str, wire("string")] = ""
    members: Annotated[Sequence[DescribedGroupMember], wire(array(DescribedGroupMember))] = ()
    authorized_operations: Annotated[int, wire("int32", "3+")] = AUTHORIZED_OPERATIONS_OMITTED


class DescribeGroupsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    groups: Annotated[Sequence[DescribedGroup], wire(array(DescribedGroup))] = ()


DESCRIBE_GROUPS = ApiSpec(
    key=ApiKey.DESCRIBE_GROUPS,
    request=DescribeGroupsRequest,
    response=DescribeGroupsResponse,
    min_version=0,
    max_version=5,
    flexible_from=5,
)
