"""DeleteTopics (key 20), v1-v6: delete topics by name.

The range is Kafka 4.0's. v4 is flexible, v5 adds error messages, v6 names topics by name *or* topic id:
Lumber has no topic ids, so a server answers an id-only entry UNKNOWN_TOPIC_ID.
"""

import uuid
from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.primitives import Uuid
from broker.protocol.schema import array, wire


class DeleteTopicState(NamedTuple):
    name: Annotated[str | None, wire("string", "6+", nullable="6+")] = None
    topic_id: Annotated[uuid.UUID, wire("uuid", "6+")] = Uuid.ZERO


class DeleteTopicsRequest(NamedTuple):
    topics: Annotated[Sequence[DeleteTopicState], wire(array(DeleteTopicState), "6+")] = ()
    topic_names: Annotated[Sequence[str], wire(array("string"), "0-5")] = ()
    timeout_ms: Annotated[int, wire("int32")] = 0


class DeletableTopicResult(NamedTuple):
    name: Annotated[str | None, wire("string", nullable="6+")] = ""
    topic_id: Annotated[uuid.UUID, wire("uuid", "6+")] = Uuid.ZERO
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", "5+", nullable="5+")] = None


class DeleteTopicsResponse(NamedTuple):
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    responses: Annotated[Sequence[DeletableTopicResult], wire(array(DeletableTopicResult))] = ()


DELETE_TOPICS = ApiSpec(
    key=ApiKey.DELETE_TOPICS,
    request=DeleteTopicsRequest,
    response=DeleteTopicsResponse,
    min_version=1,
    max_version=6,
    flexible_from=4,
)
