"""InitProducerId (key 22), v0-v4: a producer id and epoch for an idempotent producer.

kafka-python 3.x producers are idempotent by default against any broker that looks like Kafka 0.11 or
newer, and ask for a producer id before their first Produce; without this API they would fail. Lumber
hands out ids but does not deduplicate by sequence number (the audit trail detects duplicates). v2 is
flexible; v3 lets a producer bump its epoch by sending its current id and epoch (KIP-360), v4 is the
highest kafka-python sends.
"""

from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import wire


class InitProducerIdRequest(NamedTuple):
    transactional_id: Annotated[str | None, wire("string", nullable="0+")] = None
    transaction_timeout_ms: Annotated[int, wire("int32")] = 0
    producer_id: Annotated[int, wire("int64", "3+")] = -1
    producer_epoch: Annotated[int, wire("int16", "3+")] = -1


class InitProducerIdResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32")] = 0
    error_code: Annotated[int, wire("int16")] = 0
    producer_id: Annotated[int, wire("int64")] = -1
    producer_epoch: Annotated[int, wire("int16")] = 0


INIT_PRODUCER_ID = ApiSpec(
    key=ApiKey.INIT_PRODUCER_ID,
    request=InitProducerIdRequest,
    response=InitProducerIdResponse,
    min_version=0,
    max_version=4,
    flexible_from=2,
)
