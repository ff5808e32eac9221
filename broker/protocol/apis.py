"""The APIs Lumber implements, by key and by message class (see :mod:`broker.protocol` for the why)."""

from __future__ import annotations

from typing import Any

from broker.protocol.api_spec import ApiSpec
from broker.protocol.errors import EncodeError
from broker.protocol.messages.alter_configs import ALTER_CONFIGS, AlterConfigsRequest, AlterConfigsResponse
from broker.protocol.messages.alter_partition_reassignments import (
    ALTER_PARTITION_REASSIGNMENTS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from broker.protocol.messages.api_versions import (
    API_VERSIONS,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from broker.protocol.messages.create_acls import CREATE_ACLS, CreateAclsRequest, CreateAclsResponse
from broker.protocol.messages.create_partitions import (
    CREATE_PARTITIONS,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from broker.protocol.messages.create_topics import CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse
from broker.protocol.messages.delete_acls import DELETE_ACLS, DeleteAclsRequest, DeleteAclsResponse
from broker.protocol.messages.delete_groups import DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse
from broker.protocol.messages.delete_records import (
    DELETE_RECORDS,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from broker.protocol.messages.delete_topics import DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse
from broker.protocol.messages.describe_acls import DESCRIBE_ACLS, DescribeAclsRequest, DescribeAclsResponse
from broker.protocol.messages.describe_cluster import (
    DESCRIBE_CLUSTER,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from broker.protocol.messages.describe_configs import (
    DESCRIBE_CONFIGS,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from broker.protocol.messages.describe_groups import (
    DESCRIBE_GROUPS,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from broker.protocol.messages.describe_log_dirs import (
    DESCRIBE_LOG_DIRS,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from broker.protocol.messages.describe_producers import (
    DESCRIBE_PRODUCERS,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from broker.protocol.messages.elect_leaders import ELECT_LEADERS, ElectLeadersRequest, ElectLeadersResponse
from broker.protocol.messages.fetch import FETCH, FetchRequest, FetchResponse
from broker.protocol.messages.find_coordinator import (
    FIND_COORDINATOR,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from broker.protocol.messages.heartbeat import HEARTBEAT, HeartbeatRequest, HeartbeatResponse
from broker.protocol.messages.incremental_alter_configs import (
    INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.protocol.messages.init_producer_id import (
    INIT_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from broker.protocol.messages.join_group import JOIN_GROUP, JoinGroupRequest, JoinGroupResponse
from broker.protocol.messages.leave_group import LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse
from broker.protocol.messages.list_groups import LIST_GROUPS, ListGroupsRequest, ListGroupsResponse
from broker.protocol.messages.list_offsets import LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse
from broker.protocol.messages.list_partition_reassignments import (
    LIST_PARTITION_REASSIGNMENTS,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from broker.protocol.messages.metadata import METADATA, MetadataRequest, MetadataResponse
from broker.protocol.messages.offset_commit import OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse
from broker.protocol.messages.offset_delete import OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse
from broker.protocol.messages.offset_fetch import OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse
from broker.protocol.messages.offset_for_leader_epoch import (
    OFFSET_FOR_LEADER_EPOCH,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from broker.protocol.messages.produce import PRODUCE, ProduceRequest, ProduceResponse
from broker.protocol.messages.sasl_authenticate import (
    SASL_AUTHENTICATE,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from broker.protocol.messages.sasl_handshake import (
    SASL_HANDSHAKE,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from broker.protocol.messages.sync_group import SYNC_GROUP, SyncGroupRequest, SyncGroupResponse

#: Every API Lumber implements, by API key.
SUPPORTED_APIS: tuple[ApiSpec, ...] = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    FIND_COORDINATOR,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    INIT_PRODUCER_ID,
    OFFSET_FOR_LEADER_EPOCH,
    JOIN_GROUP,
    SYNC_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    LIST_GROUPS,
    DESCRIBE_GROUPS,
    DELETE_GROUPS,
    OFFSET_DELETE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    CREATE_PARTITIONS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DELETE_RECORDS,
    DESCRIBE_CLUSTER,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    ELECT_LEADERS,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
)

#: A decoded request body.
RequestBody = (
    ProduceRequest
    | FetchRequest
    | ListOffsetsRequest
    | MetadataRequest
    | FindCoordinatorRequest
    | ApiVersionsRequest
    | CreateTopicsRequest
    | DeleteTopicsRequest
    | InitProducerIdRequest
    | OffsetForLeaderEpochRequest
    | JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | ListGroupsRequest
    | DescribeGroupsRequest
    | DeleteGroupsRequest
    | OffsetDeleteRequest
    | DescribeConfigsRequest
    | AlterConfigsRequest
    | IncrementalAlterConfigsRequest
    | CreatePartitionsRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
    | SaslHandshakeRequest
    | SaslAuthenticateRequest
    | DeleteRecordsRequest
    | DescribeClusterRequest
    | DescribeLogDirsRequest
    | DescribeProducersRequest
    | ElectLeadersRequest
    | DescribeAclsRequest
    | CreateAclsRequest
    | DeleteAclsRequest
)

#: A response body.
ResponseBody = (
    ProduceResponse
    | FetchResponse
    | ListOffsetsResponse
    | MetadataResponse
    | FindCoordinatorResponse
    | ApiVersionsResponse
    | CreateTopicsResponse
    | DeleteTopicsResponse
    | InitProducerIdResponse
    | OffsetForLeaderEpochResponse
    | JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | ListGroupsResponse
    | DescribeGroupsResponse
    | DeleteGroupsResponse
    | OffsetDeleteResponse
    | DescribeConfigsResponse
    | AlterConfigsResponse
    | IncrementalAlterConfigsResponse
    | CreatePartitionsResponse
    | AlterPartitionReassignmentsResponse
    | ListPartitionReassignmentsResponse
    | SaslHandshakeResponse
    | SaslAuthenticateResponse
    | DeleteRecordsResponse
    | DescribeClusterResponse
    | DescribeLogDirsResponse
    | DescribeProducersResponse
    | ElectLeadersResponse
    | DescribeAclsResponse
    | CreateAclsResponse
    | DeleteAclsResponse
)

APIS_BY_KEY: dict[int, ApiSpec] = {int(spec.key): spec for spec in SUPPORTED_APIS}
_BY_REQUEST: dict[type[Any], ApiSpec] = {spec.request: spec for spec in SUPPORTED_APIS}
_BY_RESPONSE: dict[type[Any], ApiSpec] = {spec.response: spec for spec in SUPPORTED_APIS}


def api_for_request(body: object) -> ApiSpec:
    """The API whose request ``body`` is."""
    spec = _BY_REQUEST.get(type(body))
    if spec is None:
        raise EncodeError(f"{type(body).__name__} is not the request of an API Lumber implements")
    return spec


def api_for_response(body: object) -> ApiSpec:
    """The API whose response ``body`` is."""
    spec = _BY_RESPONSE.get(type(body))
    if spec is None:
        raise EncodeError(f"{type(body).__name__} is not the response of an API Lumber implements")
    return spec


def supported_api_versions() -> list[ApiVersion]:
    """What an ApiVersions response lists: every implemented API and its version range, by key."""
    return [
        ApiVersion(api_key=int(spec.key), min_version=spec.min_version, max_version=spec.max_version)
        for spec in sorted(SUPPORTED_APIS, key=lambda spec: int(spec.key))
    ]
