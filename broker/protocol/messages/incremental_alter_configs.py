"""IncrementalAlterConfigs (key 44), v0-v1: change some of a resource's configs (KIP-339), each with an
operation: SET, DELETE (back to the default), APPEND or SUBTRACT (list-typed configs only).

The range is Kafka 4.0's: v1 is flexible. librdkafka (confluent-kafka's ``incremental_alter_configs``)
and kafka-python 3.x (``alter_configs``, which prefers it when the broker offers it) both negotiate up to
v1 (aiokafka has no IncrementalAlterConfigs). The answer reuses AlterConfigs' per-resource struct, which
has the same fields.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.messages.alter_configs import AlterConfigsResourceResponse
from broker.protocol.schema import array, wire


class IncrementalAlterableConfig(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    #: :class:`~broker.protocol.messages.config_resource.AlterConfigOp`
    config_operation: Annotated[int, wire("int8")] = 0
    value: Annotated[str | None, wire("string", nullable="0+")] = ""


class IncrementalAlterConfigsResource(NamedTuple):
    #: :class:`~broker.protocol.messages.config_resource.ConfigResourceType`
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    configs: Annotated[Sequence[IncrementalAlterableConfig], wire(array(IncrementalAlterableConfig))] = ()


class IncrementalAlterConfigsRequest(NamedTuple):
    resources: Annotated[
        Sequence[IncrementalAlterConfigsResource], wire(array(IncrementalAlterConfigsResource))
    ] = ()
    validate_only: Annotated[bool, wire("bool")] = False


class IncrementalAlterConfigsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    responses: Annotated[
        Sequence[AlterConfigsResourceResponse], wire(array(AlterConfigsResourceResponse))
    ] = ()


INCREMENTAL_ALTER_CONFIGS = ApiSpec(
    key=ApiKey.INCREMENTAL_ALTER_CONFIGS,
    request=IncrementalAlterConfigsRequest,
    response=IncrementalAlterConfigsResponse,
    min_version=0,
    max_version=1,
    flexible_from=1,
)
