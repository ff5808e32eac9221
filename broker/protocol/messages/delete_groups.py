"""DeleteGroups (key 42), v0-v2: delete empty groups and their committed offsets.

Kafka's range. Seen sent: kafka-python 3.0 v2 (flexible); confluent-kafka's AdminClient deletes through it
in the tests. A group with members
answers NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class DeleteGroupsRequest(NamedTuple):
    groups_names: Annotated[Sequence[str], wire(array("string"))] = ()


class DeletableGroupResult(NamedTuple):
    group_id: Annotated[str, wire("string")] = ""
    error_code: Annotated[int, wire("int16")] = 0


class DeleteGroupsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    results: Annotated[Sequence[DeletableGroupResult], wire(array(DeletableGroupResult))] = ()


DELETE_GROUPS = ApiSpec(
    key=ApiKey.DELETE_GROUPS,
    request=DeleteGroupsRequest,
    response=DeleteGroupsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
