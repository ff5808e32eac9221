"""Heartbeat (key 12), v0-v4: a member says it is alive; the answer says whether to rejoin.

Kafka's range. Seen sent: librdkafka 2.16 v3 (v3: ``group_instance_id``); kafka-python 3.0 caps it at v4,
the flexible version.
"""

from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import wire


class HeartbeatRequest(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    generation_id: Annotated[int, wire("int32")] = 0
    member_id: Annotated[str, wire("string")] = ""
    group_instance_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None


class HeartbeatResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16")] = 0


HEARTBEAT = ApiSpec(
    key=ApiKey.HEARTBEAT,
    request=HeartbeatRequest,
    response=HeartbeatResponse,
    min_version=0,
    max_version=4,
    flexible_from=4,
)
