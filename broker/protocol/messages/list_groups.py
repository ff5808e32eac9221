"""ListGroups (key 16), v0-v5: the groups this broker coordinates.

Kafka's range. Admin clients send it to every broker and merge the answers (seen: kafka-python 3.0 v5;
confluent-kafka's AdminClient lists through it in the tests). v3 is flexible, v4 filters by state and
answers it, v5 filters by type and answers it ("classic": Lumber has only classic groups).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class ListGroupsRequest(NamedTuple):
    states_filter: Annotated[Sequence[str], wire(array("string"), "4+")] = ()
    types_filter: Annotated[Sequence[str], wire(array("string"), "5+")] = ()


class ListedGroup(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    protocol_type: Annotated[str, wire("string")] = ""
    group_state: Annotated[str, wire("string", "4+")] = ""
    group_type: Annotated[str, wire("string", "5+")] = ""


class ListGroupsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    groups: Annotated[Sequence[ListedGroup], wire(array(ListedGroup))] = ()


LIST_GROUPS = ApiSpec(
    key=ApiKey.LIST_GROUPS,
    request=ListGroupsRequest,
    response=ListGroupsResponse,
    min_version=0,
    max_version=5,
    flexible_from=3,
)
