"""InitProducerId (key 22), v0-v4: a producer id and epoch for an idempotent producer.

Idempotent producers (kafka-python 3.x and Lumber's by default, confluent-kafka with
``enable.idempotence``) ask for a producer id before their first Produce; the broker then deduplicates
their retries by sequence number (:mod:`broker.log.producer_state`). v2 is flexible; v3 lets a producer
send its current id and epoch (KIP-360: Kafka bumps the epoch of a transactional id; a non-transactional
producer gets a fresh id, in Kafka as in Lumber), v4 is the highest kafka-python sends.
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
