"""SaslHandshake (key 17), v0-v1: the client names its SASL mechanism on a SASL listener.

Kafka's range. v1 means the SASL tokens that follow travel in SaslAuthenticate requests (KIP-152); v0 sent
them as raw size-prefixed bytes, which Lumber does not read (a v0 handshake is answered, then the first raw
token closes the connection: every client of the last years sends v1). Never flexible (KAFKA-9577: the
version cannot move). Seen sent: librdkafka 2.16 v1, kafka-python 3.0 v1. Answered by the network layer
(:mod:`broker.network.sasl_authenticator`) before a connection is authenticated, never by KafkaApis.
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class SaslHandshakeRequest(NamedTuple):
    mechanism: Annotated[str, wire("string")] = ""


class SaslHandshakeResponse(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    mechanisms: Annotated[Sequence[str], wire(array("string"))] = ()


SASL_HANDSHAKE = ApiSpec(
    key=ApiKey.SASL_HANDSHAKE,
    request=SaslHandshakeRequest,
    response=SaslHandshakeResponse,
    min_version=0,
    max_version=1,
    flexible_from=None,
)
