"""LeaveGroup (key 13), v0-v5: members leave a group (one by id before v3, a batch of identities from v3).

Kafka's range. Seen sent: kafka-python 3.0 v5; librdkafka's older versions name one member id. v3
(KIP-345) lets an admin remove static members by ``group_instance_id``, each answered on its own; v4 is
flexible, v5 carries a reason.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class MemberIdentity(NamedTuple):
    member_id: Annotated[str, wire("string", "3+")] = ""
    group_instance_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
    reason: Annotated[str | None, wire("string", "5+", nullable="5+")] = None


class LeaveGroupRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    member_id: Annotated[str, wire("string", "0-2")] = ""
    members: Annotated[Sequence[MemberIdentity], wire(array(MemberIdentity), "3+")] = ()


class MemberResponse(NamedTuple):
    member_id: Annotated[str, wire("string", "3+")] = ""
    group_instance_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
    error_code: Annotated[int, wire("int16", "3+")] = 0


class LeaveGroupResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    members: Annotated[Sequence[MemberResponse], wire(array(MemberResponse), "3+")] = ()


LEAVE_GROUP = ApiSpec(
    key=ApiKey.LEAVE_GROUP,
    request=LeaveGroupRequest,
    response=LeaveGroupResponse,
    min_version=0,
    max_version=5,
    flexible_from=4,
)
