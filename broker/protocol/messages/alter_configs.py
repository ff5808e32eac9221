"""AlterConfigs (key 33), v0-v2: replace a resource's configs as a whole (every key not named goes back to
its default).

The range is Kafka 4.0's: v1 changes nothing on the wire (a quota-throttling change), v2 is flexible.
librdkafka (confluent-kafka's ``alter_configs``) negotiates up to v2; kafka-python 3.x sends it only when
told ``incremental=False`` (it prefers IncrementalAlterConfigs), at v2 too; aiokafka's admin client (read
from its source, not installed here) sends v1, its highest.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class AlterableConfig(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    #: None: the key is left out (as Kafka reads a null value)
    value: Annotated[str | None, wire("string", nullable="0+")] = ""


class AlterConfigsResource(NamedTuple):
    #: :class:`~broker.protocol.messages.config_resource.ConfigResourceType`
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    configs: Annotated[Sequence[AlterableConfig], wire(array(AlterableConfig))] = ()


class AlterConfigsRequest(NamedTuple):
    resources: Annotated[Sequence[AlterConfigsResource], wire(array(AlterConfigsResource))] = ()
    validate_only: Annotated[bool, wire("bool")] = False


class AlterConfigsResourceResponse(NamedTuple):
    """One resource's answer (IncrementalAlterConfigs answers with the same struct)."""

    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = ""
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""


class AlterConfigsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    responses: Annotated[
        Sequence[AlterConfigsResourceResponse], wire(array(AlterConfigsResourceResponse))
    ] = ()


ALTER_CONFIGS = ApiSpec(
    key=ApiKey.ALTER_CONFIGS,
    request=AlterConfigsRequest,
    response=AlterConfigsResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
