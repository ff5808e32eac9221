"""SaslAuthenticate (key 36), v0-v2: one SASL token each way (PLAIN's one message, SCRAM's two rounds).

Kafka's range; v1 adds the session lifetime (always 0 here: Lumber does not re-authenticate, KIP-368), v2 is
flexible. Seen sent: librdkafka 2.16 v1, kafka-python 3.0 v2. Answered by the network layer
(:mod:`broker.network.sasl_authenticator`) before a connection is authenticated; a failure is
SASL_AUTHENTICATION_FAILED with a message that names the mechanism, never the user or the password.
"""

from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import wire


class SaslAuthenticateRequest(NamedTuple):
    auth_bytes: Annotated[bytes, wire("bytes")] = b""


class SaslAuthenticateResponse(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    error_message: Annotated[str | None, wire("string", nullable="0+")] = None
    auth_bytes: Annotated[bytes, wire("bytes")] = b""
    session_lifetime_ms: Annotated[int, wire("int64", "1+")] = 0


SASL_AUTHENTICATE = ApiSpec(
    key=ApiKey.SASL_AUTHENTICATE,
    request=SaslAuthenticateRequest,
    response=SaslAuthenticateResponse,
    min_version=0,
    max_version=2,
    flexible_from=2,
)
