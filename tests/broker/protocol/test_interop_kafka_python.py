"""Codec-level interop with kafka-python 3.x's own protocol classes (``kafka.protocol``).

For every API and version that both Lumber and kafka-python implement, random messages are encoded by one
codec and decoded by the other, comparing every field exactly, and the two encodings must be the same
bytes. Whole frames (size prefix and headers) are compared too, and kafka-python must read Lumber's
ApiVersions fallback and version table the way its own client does.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import (
    ApiKey,
    ErrorCode,
    compiler,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    supported_api_versions,
)
from broker.protocol.apis import SUPPORTED_APIS
from broker.protocol.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from broker.protocol.primitives import byte_view
from broker.protocol.schema import ArrayOf, schema_of
from tests.broker.protocol.strategies import filled, normalize, struct_values

with warnings.catch_warnings():
    # kafka-python's protocol package calls importlib.resources.read_text, deprecated in 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.errors import BrokerResponseError
    from kafka.protocol.admin import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        CreateAclsRequest,
        CreateAclsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
        DescribeClusterRequest,
        DescribeClusterResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeProducersRequest,
        DescribeProducersResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.consumer import (
        FetchRequest,
        FetchResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )
    from kafka.protocol.producer import (
        InitProducerIdRequest,
        InitProducerIdResponse,
        ProduceRequest,
        ProduceResponse,
    )
    from kafka.protocol.sasl import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )
    from kafka.protocol.schemas.fields.codecs.types import BitField

pytestmark = pytest.mark.interop

KAFKA_PYTHON: dict[int, tuple[Any, Any]] = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.ALTER_CONFIGS: (AlterConfigsRequest, AlterConfigsResponse),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    ),
    ApiKey.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.DELETE_RECORDS: (DeleteRecordsRequest, DeleteRecordsResponse),
    ApiKey.DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
    ApiKey.DESCRIBE_LOG_DIRS: (DescribeLogDirsRequest, DescribeLogDirsResponse),
    ApiKey.DESCRIBE_PRODUCERS: (DescribeProducersRequest, DescribeProducersResponse),
    ApiKey.ELECT_LEADERS: (ElectLeadersRequest, ElectLeadersResponse),
    ApiKey.DESCRIBE_ACLS: (DescribeAclsRequest, DescribeAclsResponse),
    ApiKey.CREATE_ACLS: (CreateAclsRequest, CreateAclsResponse),
    ApiKey.DELETE_ACLS: (DeleteAclsRequest, DeleteAclsResponse),
}

# kafka-python renames Metadata's authorized-operations fields, and decodes them (and DescribeGroups') as sets
# of bit numbers.
BITFIELDS = {
    ("MetadataResponse", "cluster_authorized_operations"),
    ("MetadataResponseTopic", "topic_authorized_operations"),
    ("DescribedGroup", "authorized_operations"),
    ("DescribeClusterResponse", "cluster_authorized_operations"),
}
RENAMED = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponseTopic", "topic_authorized_operations"): "authorized_operations",
    ("DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
}


def both_support():
    for spec in SUPPORTED_APIS:
        request_class, response_class = KAFKA_PYTHON[spec.key]
        low, high = request_class.valid_versions
        for version in spec.versions:
            if low <= version <= high:
                yield spec, version, spec.request, request_class
                yield spec, version, spec.response, response_class


CASES = [pytest.param(*case, id=f"{case[2].__name__}-v{case[1]}") for case in both_support()]
REQUEST_CASES = [
    pytest.param(*case, id=f"{case[2].__name__}-v{case[1]}")
    for case in both_support()
    if case[2] is case[0].request
]
RESPONSE_CASES = [
    pytest.param(*case, id=f"{case[2].__name__}-v{case[1]}")
    for case in both_support()
    if case[2] is case[0].response
]


def sendable(message: Any, version: int) -> Any:
    """kafka-python reads any ApiVersions response with an error in the v0 format (a broker sends errors
    only in the fallback, which is v0), so above v0 an ApiVersions response carries no error here."""
    if type(message).__name__ == "ApiVersionsResponse" and version > 0:
        return message._replace(error_code=0)
    return message


def their_name(ours: type, name: str) -> str:
    return RENAMED.get((ours.__name__, name), name)


def to_theirs(message: tuple[Any, ...], their_class: Any, version: int, *, top: bool = True) -> Any:
    """Our message as an instance of kafka-python's class for it."""
    kwargs = {}
    for field in schema_of(type(message)).fields:
        if not field.present_in(version):
            continue
        name = their_name(type(message), field.name)
        their_field = their_class._struct.fields[name]
        value = message[field.index]
        kwargs[name] = _value_to_theirs(
            value,
            field.wire.type,
            their_field,
            version,
            bitfield=(type(message).__name__, field.name) in BITFIELDS,
        )
    return their_class(version=version, **kwargs) if top else their_class(**kwargs)


def _value_to_theirs(value: Any, type_: Any, their_field: Any, version: int, *, bitfield: bool) -> Any:
    if value is None:
        return None
    if bitfield:
        bits = BitField.from_32_bit_field(value & 0xFFFFFFFF)
        return None if bits == {31} else bits
    if isinstance(type_, ArrayOf):
        if isinstance(type_.element, str):
            return list(value)
        return [to_theirs(item, their_field.data_class, version, top=False) for item in value]
    if isinstance(type_, str):
        return bytes(value) if isinstance(value, memoryview) else value
    return to_theirs(value, their_field.data_class, version, top=False)


def from_theirs(theirs: Any, ours: type, version: int) -> Any:
    """kafka-python's decoded message as one of ours (fields absent at ``version`` take our defaults)."""
    values = []
    for field in schema_of(ours).fields:
        if not field.present_in(version):
            values.append(field.default)
            continue
        name = their_name(ours, field.name)
        value = getattr(theirs, name)
        values.append(
            _value_from_theirs(
                value, field.wire.type, version, bitfield=(ours.__name__, field.name) in BITFIELDS
            )
        )
    return ours(*values)


def _value_from_theirs(value: Any, type_: Any, version: int, *, bitfield: bool) -> Any:
    if bitfield:
        return (
            AUTHORIZED_OPERATIONS_OMITTED
            if value is None
            else BitField.to_32_bit_field(value) - (2**32 if 31 in value else 0)
        )
    if value is None:
        return None
    if isinstance(type_, ArrayOf):
        if isinstance(type_.element, str):
            return list(value)
        return [from_theirs(item, type_.element, version) for item in value]
    if isinstance(type_, str):
        if type_ == "uuid" and value is None:
            return uuid.UUID(int=0)
        return value
    return from_theirs(value, type_, version)


@pytest.mark.parametrize(("spec", "version", "ours", "theirs"), CASES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_both_codecs_agree(spec, version, ours, theirs, data):
    flexible = spec.is_flexible(version)
    message = sendable(data.draw(struct_values(ours, version, flexible=flexible)), version)
    our_bytes = b"".join(compiler.encode(message, ours, version, flexible=flexible, context="x"))

    their_message = to_theirs(message, theirs, version)
    their_bytes = bytes(their_message.encode(version=version))
    assert our_bytes == their_bytes

    decoded_by_them = theirs.decode(our_bytes, version=version)
    assert normalize(from_theirs(decoded_by_them, ours, version)) == normalize(message)
    decoded_by_us, end = compiler.decode(
        ours, byte_view(their_bytes), 0, version, flexible=flexible, context="x"
    )
    assert end == len(their_bytes)
    assert normalize(decoded_by_us) == normalize(message)


@pytest.mark.parametrize(("spec", "version", "ours", "theirs"), REQUEST_CASES)
def test_request_frames_are_identical(spec, version, ours, theirs):
    message = filled(ours, version)
    their_message = to_theirs(message, theirs, version)
    their_message.with_header(correlation_id=31, client_id="lumber-test")
    their_frame = bytes(their_message.encode(version=version, header=True, framed=True))
    our_frame = encode_request(version, 31, "lumber-test", message)
    assert our_frame == their_frame
    request = decode_request(their_frame[4:])
    assert (request.header.api_key, request.header.api_version, request.header.correlation_id) == (
        spec.key,
        version,
        31,
    )
    assert normalize(request.body) == normalize(message)


@pytest.mark.parametrize(("spec", "version", "ours", "theirs"), RESPONSE_CASES)
def test_response_frames_are_read_by_kafka_python(spec, version, ours, theirs):
    message = sendable(filled(ours, version), version)
    frame = encode_response(version, 77, message)
    decoded = theirs.decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 77
    assert normalize(from_theirs(decoded, ours, version)) == normalize(message)
    their_message = to_theirs(message, theirs, version)
    their_message.with_header(correlation_id=77)
    # (its version is set at construction: kafka-python's encode(version=...) fails on response headers)
    assert bytes(their_message.encode(header=True, framed=True)) == frame
    assert normalize(decode_response(spec.key, version, frame[4:]).body) == normalize(message)


def test_kafka_python_reads_the_api_versions_fallback():
    frame = encode_api_versions_fallback(5)
    response = ApiVersionsResponse.decode(frame, version=4, header=True, framed=True)
    assert response.header.correlation_id == 5
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == {v.api_key: (v.min_version, v.max_version) for v in supported_api_versions()}
    # What kafka-python's connection then does: retry with min(its version, our ApiVersions maximum).
    assert min(4, ranges[ApiKey.API_VERSIONS][1]) == 4


def test_kafka_python_identifies_lumber_as_kafka_3_2():
    data = BrokerVersionData(
        api_versions={v.api_key: (v.min_version, v.max_version) for v in supported_api_versions()}
    )
    # its newest probe that matches is JoinGroup v9 (Kafka 3.2); Produce v9 (2.8) before the group APIs
    assert data.broker_version == (3, 2)
    # The versions kafka-python's clients then use (their own caps: Produce 9, Fetch 12).
    assert data.api_version(ProduceRequest, max_version=9) == 9
    assert data.api_version(FetchRequest, max_version=12) == 12
    assert data.api_version(MetadataRequest) == 12
    assert data.api_version(ListOffsetsRequest) == 7  # v7: v6's layout, plus the -3 (max timestamp) query
    assert data.api_version(InitProducerIdRequest, max_version=4) == 4
    assert data.api_version(ApiVersionsRequest) == 4


def test_error_codes_match_kafka_python():
    """Every code kafka-python knows has the same number here, and Kafka's current name: kafka-python keeps
    a few names that Kafka has since changed."""
    renamed_by_kafka = {
        "NO_ERROR": "NONE",
        "UNKNOWN": "UNKNOWN_SERVER_ERROR",
        "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
        "MESSAGE_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
        "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
        "INVALID_REPLICATION_ASSIGNMENT": "INVALID_REPLICA_ASSIGNMENT",
    }
    classes = [BrokerResponseError]
    theirs: dict[int, str] = {}
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        if isinstance(getattr(cls, "errno", None), int):
            theirs[cls.errno] = cls.message
    assert len(theirs) > 100
    for code, name in theirs.items():
        assert ErrorCode(code).name == renamed_by_kafka.get(name, name)
    assert ErrorCode.name_of(35) == "UNSUPPORTED_VERSION"
    assert ErrorCode.name_of(9999) == "UNKNOWN_CODE_9999"
