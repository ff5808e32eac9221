"""DescribeAcls (key 29), v0-v2: the ACL bindings that match a filter.

Kafka's range up to v2 (Kafka has v0-v3). v1 adds the pattern type (v0 filters and answers LITERAL bindings
only, the field's default 3), v2 is flexible. v3 changes nothing on the wire but allows the USER resource
type (delegation tokens), which Lumber does not have, so Lumber stops at v2 (as Kafka 3.2 did: kafka-python
then takes Lumber for Kafka 3.2, as before the ACL APIs). The codes of the resource type, pattern type,
operation and permission are :mod:`broker.security.acl_binding`'s. confluent-kafka's AdminClient
``describe_acls`` sends v1; kafka-python's ``describe_acls`` v2.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class DescribeAclsRequest(NamedTuple):
    resource_type_filter: Annotated[int, wire("int8")] = 1
    resource_name_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    pattern_type_filter: Annotated[int, wire("int8", "1+")] = 3
    principal_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    host_filter: Annotated[str | None, wire("string", nullable="0+")] = None
    operation: Annotated[int, wire("int8")] = 1
    permission_type: Annotated[int, wire("int8")] = 1


class AclDescription(NamedTuple):
    principal: Annotated[str, wire("string")] = ""
    host: Annotated[str, wire("string")] = ""
    operation: Annotated[int, wire("int8")] = 0
    permission_type: Annotated[int, wire("int8")] = 0


class DescribeAclsResource(NamedTuple):
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    pattern_type: Annotated[int, wire("int8", "1+")] = 3
    acls: Annotated[Sequence[AclDescription], wire(array(AclDescription))] = ()


class DescribeAclsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    resources: Annotated[Sequence[DescribeAclsResource], wire(array(DescribeAclsResource))] = ()


DESCRIBE_ACLS = ApiSpec(
    key=ApiKey.DESCRIBE_ACLS,
    request=DescribeAclsRequest,
    response=DescribeAclsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
