"""ApiVersions (key 18), v0-v4: which APIs and versions the broker implements.

A client sends it first on every connection. v3+ is flexible, but the response header is always v0 (the
client must be able to read the error of a version the broker does not know). A request newer than v4 is
answered in the v0 format with UNSUPPORTED_VERSION and the supported ranges
(:func:`broker.protocol.codec.encode_api_versions_fallback`). v4 differs from v3 only in what brokers may
put in SupportedFeatures (KAFKA-17011).
"""

from collections.abc import Sequence
from typing import Annotated, NamedTuple

from broker.protocol.api_key import ApiKey
from broker.protocol.api_spec import ApiSpec
from broker.protocol.schema import array, wire


class ApiVersionsRequest(NamedTuple):
    client_software_name: Annotated[str, wire("string", "3+")] = ""
    client_software_version: Annotated[str, wire("string", "3+")] = ""


class ApiVersion(NamedTuple):
    """One supported API: its key and version range."""

    api_key: Annotated[int, wire("int16")] = 0
    min_version: Annotated[int, wire("int16")] = 0
    max_version: Annotated[int, wire("int16")] = 0


class SupportedFeatureKey(NamedTuple):
    name: Annotated[str, wire("string", "3+")] = ""
    min_version: Annotated[int, wire("int16", "3+")] = 0
    max_version: Annotated[int, wire("int16", "3+")] = 0


class FinalizedFeatureKey(NamedTuple):
    name: Annotated[str, wire("string", "3+")] = ""
    max_version_level: Annotated[int, wire("int16", "3+")] = 0
    min_version_level: Annotated[int, wire("int16", "3+")] = 0


class ApiVersionsResponse(NamedTuple):
    error_code: Annotated[int, wire("int16")] = 0
    api_keys: Annotated[Sequence[ApiVersion], wire(array(ApiVersion))] = ()
    throttle_time_ms: Annotated[int, wire("int32", "1+")] = 0
    supported_features: Annotated[
        Sequence[SupportedFeatureKey], wire(array(SupportedFeatureKey), "3+", tag=0)
    ] = ()
    finalized_features_epoch: Annotated[int, wire("int64", "3+", tag=1)] = -1
    finalized_features: Annotated[
        Sequence[FinalizedFeatureKey], wire(array(FinalizedFeatureKey), "3+", tag=2)
    ] = ()
    zk_migration_ready: Annotated[bool, wire("bool", "3+", tag=3)] = False


API_VERSIONS = ApiSpec(
    key=ApiKey.API_VERSIONS,
    request=ApiVersionsRequest,
    response=ApiVersionsResponse,
    min_version=0,
    max_version=4,
    flexible_from=3,
    response_header_always_v0=True,
)
