"""FindCoordinator (key 10), v0-v2: which broker coordinates a consumer group.

Consumer groups are a later issue; Lumber declares this API because librdkafka needs it in two ways: it
enables lz4 only if the broker advertises FindCoordinator v0 (its feature map ties LZ4 to it), and a
confluent-kafka consumer always has a ``group.id`` and looks its coordinator up even when it only
``assign()``s partitions. Until groups exist a server answers COORDINATOR_NOT_AVAILABLE, which librdkafka
retries quietly while it fetches. v3+ (flexible) and v4+ (batched keys) are not needed by either client.
"""

from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import wire

#: ``key_type`` values.
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


class FindCoordinatorRequest(NamedTuple):
    key: Annotated[str, wire("string", "0-3")] = ""
    key_type: Annotated[int, wire("int8", "1+")] = 0


class FindCoordinatorResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    error_code: Annotated[int, wire("int16", "0-3")] = 0
    error_message: Annotated[str | None, wire("string", "1-3", nullable="1-3")] = ""
    node_id: Annotated[int, wire("int32", "0-3")] = 0
    host: Annotated[str, wire("string", "0-3")] = ""
    port: Annotated[int, wire("int32", "0-3")] = 0


FIND_COORDINATOR = ApiSpec(
    key=ApiKey.FIND_COORDINATOR,
    request=FindCoordinatorRequest,
    response=FindCoordinatorResponse,
    min_version=0,
    max_version=2,
    flexible_from=None,
)
