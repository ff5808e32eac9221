"""CreateAcls (key 30), v0-v2: store ACL bindings.

Kafka's range up to v2 (v3 only allows the USER resource type, which Lumber does not have; see
:mod:`~broker.protocol.messages.describe_acls`). v1 adds the pattern type (v0 creates LITERAL bindings, the
field's default 3), v2 is flexible. Each creation is answered on its own, in order: an invalid one (an ANY
or unknown code, a bad principal, a cluster resource not named ``kafka-cluster``) INVALID_REQUEST with a
message, the others NONE. confluent-kafka's AdminClient ``create_acls`` sends v1.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class AclCreation(NamedTuple):
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    resource_pattern_type: Annotated[int, wire("int8", "1+")] = 3
    principal: Annotated[str, wire("string")] = ""
    host: Annotated[str, wire("string")] = ""
    operation: Annotated[int, wire("int8")] = 0
    permission_type: Annotated[int, wire("int8")] = 0


class CreateAclsRequest(NamedTuple):
    creations: Annotated[Sequence[AclCreation], wire(array(AclCreation))] = ()


class AclCreationResult(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None


class CreateAclsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    results: Annotated[Sequence[AclCreationResult], wire(array(AclCreationResult))] = ()


CREATE_ACLS = ApiSpec(
    key=ApiKey.CREATE_ACLS,
    request=CreateAclsRequest,
    response=CreateAclsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
