"""DescribeConfigs (key 32), v1-v4: a topic's or a broker's configs, each with its value and source.

The range is Kafka 4.0's (KIP-896 removed v0, whose ``is_default`` ``config_source`` replaced in v1). v1
adds ``include_synonyms`` and each config's source and synonyms, v2 changes nothing on the wire (a
quota-throttling change), v3 adds ``include_documentation`` and each config's type and documentation,
v4 is flexible. librdkafka (confluent-kafka) sends v1, the highest it implements; kafka-python 3.x
negotiates up to v4, its own floor being v1 (older kafka-python sent v0-v2, so a client of before 3.0 that
insists on v0 is refused, as Kafka 4.0 refuses it). aiokafka's admin client (0.x, not installed here; read
from its source) takes ``min(its highest, the broker's highest)`` = v2, inside the range.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class DescribeConfigsResource(NamedTuple):
    #: :class:`~broker.protocol.messages.config_resource.ConfigResourceType`
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    #: None: every config
    configuration_keys: Annotated[Sequence[str] | None, wire(array("string"), nullable="0+")] = None


class DescribeConfigsRequest(NamedTuple):
    resources: Annotated[Sequence[DescribeConfigsResource], wire(array(DescribeConfigsResource))] = ()
    include_synonyms: Annotated[bool, wire("bool", "1+")] = False
    include_documentation: Annotated[bool, wire("bool", "3+")] = False


class DescribeConfigsSynonym(NamedTuple):
    name: Annotated[str, wire("string", "1+")] = ""
    value: Annotated[str | None, wire("string", "1+", nullable="0+")] = ""
    #: :class:`~broker.protocol.messages.config_resource.ConfigSource`
    source: Annotated[int, wire("int8", "1+")] = 0


class DescribeConfigsResourceResult(NamedTuple):
    name: Annotated[str, wire("string")] = ""
    value: Annotated[str | None, wire("string", nullable="0+")] = ""
    read_only: Annotated[bool, wire("bool")] = False
    config_source: Annotated[int, wire("int8", "1+")] = -1
    is_sensitive: Annotated[bool, wire("bool")] = False
    synonyms: Annotated[Sequence[DescribeConfigsSynonym], wire(array(DescribeConfigsSynonym), "1+")] = ()
    #: :class:`~broker.protocol.messages.config_resource.ConfigType`
    config_type: Annotated[int, wire("int8", "3+")] = 0
    documentation: Annotated[str | None, wire("string", "3+", nullable="0+")] = ""


class DescribeConfigsResult(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = ""
    resource_type: Annotated[int, wire("int8")] = 0
    resource_name: Annotated[str, wire("string")] = ""
    configs: Annotated[
        Sequence[DescribeConfigsResourceResult], wire(array(DescribeConfigsResourceResult))
    ] = ()


class DescribeConfigsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    results: Annotated[Sequence[DescribeConfigsResult], wire(array(DescribeConfigsResult))] = ()


DESCRIBE_CONFIGS = ApiSpec(
    key=ApiKey.DESCRIBE_CONFIGS,
    request=DescribeConfigsRequest,
    response=DescribeConfigsResponse,
    min_version=1,
    max_version=4,
    flexible_from=4,
)
