"""DeleteAcls (key 31), v0-v2: remove the ACL bindings that match each filter.

Kafka's range up to v2 (v3 only allows the USER resource type, which Lumber does not have; see
:mod:`~broker.protocol.messages.describe_acls`). v1 adds the pattern type (v0 filters LITERAL bindings, the
field's default 3), v2 is flexible. Each filter is answered with the bindings it removed. confluent-kafka's
AdminClient ``delete_acls`` sends v1.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class DeleteAclsFilter(NamedTuple):
    resource_type_filter: Annotated[int, wire("int8")] = 1
    resource_name_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    pattern_type_filter: Annotated[int, wire("int8", "1+")] = 3
    principal_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    host_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    operation: Annotated[int, wire("int8")] = 1
    permission_type: Annotated[int, wire("int8")] = 1


class DeleteAclsRequest(NamedTuple):
    filters: Annotated[Sequence[DeleteAclsFilter], wire(array(DeleteAclsFilter))] = ()


class DeleteAclsMatchingAcl(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    pattern_type: Annotated[int, wire("int8", "1+")] = 3
    principal: Annotated[str, wire("string")] = ""
    host: Annotated[str, wire("string")] = ""
    operation: Annotated[int, wire("int8")] = 0
    permission_type: Annotated[int, wire("int8")] = 0


class DeleteAclsFilterResult(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    matching_acls: Annotated[Sequence[DeleteAclsMatchingAcl], wire(array(DeleteAclsMatchingAcl))] = ()


class DeleteAclsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    filter_results: Annotated[Sequence[DeleteAclsFilterResult], wire(array(DeleteAclsFilterResult))] = ()


DELETE_ACLS = ApiSpec(
    key=ApiKey.DELETE_ACLS,
    request=DeleteAclsRequest,
    response=DeleteAclsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
