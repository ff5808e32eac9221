"""DescribeAcls, CreateAcls and DeleteAcls as KafkaApis answers them (Kafka's ``AclApis``), so that the
standard admin clients manage Lumber's ACLs (confluent-kafka's ``create_acls`` / ``describe_acls`` /
``delete_acls``, kafka-python's, Kafka's ``kafka-acls.sh``).

* Without ``[broker] authorizer``: each answers SECURITY_DISABLED ("No Authorizer is configured"), as Kafka.
* **DescribeAcls** needs DESCRIBE on the cluster; answers from this broker's copy of the ACLs, grouped by
  resource pattern.
* **CreateAcls** and **DeleteAcls** need ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for each
  creation or filter). They write ZooKeeper (:class:`~broker.cluster.acl_store.AclStore`: every broker
  follows the change notification), then wait (at most :data:`MAX_WAIT_S`) until this broker's own copy has
  the change, so that a DescribeAcls sent next to the same broker sees it. An invalid creation or filter
  (an ANY or unknown code where a value is needed, a principal not ``type:name``, a cluster resource not
  named ``kafka-cluster``, a name holding ``/``) is INVALID_REQUEST with a message; the others are applied.

Thread-safe (handler threads; the store's writes are ZooKeeper transactions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from broker.cluster.acl_watcher import AclWatcher
from broker.cluster.errors import ClusterError
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from broker.protocol.messages.delete_acls import (
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from broker.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from broker.security.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.errors import InvalidAclError
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import error_code_of

logger = logging.getLogger(__name__)

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]
#: Longest a CreateAcls or DeleteAcls waits for this broker's copy of the ACLs to show its change.
MAX_WAIT_S = 5.0
_DISABLED = "No Authorizer is configured."
_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _code(kind: type[_E], value: int, field: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise InvalidAclError(f"{field} {value} is not a code Lumber knows") from None


def acl_filter_of(request: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    """The filter a DescribeAcls request or a DeleteAcls filter names; :class:`InvalidAclError`."""
    return AclBindingFilter(
        resource_type=_code(ResourceType, request.resource_type_filter, "resource type"),
        name=request.resource_name_filter,
        pattern_type=_code(PatternType, request.pattern_type_filter, "pattern type"),
        principal=request.principal_filter,
        host=request.host_filter,
        operation=_code(AclOperation, request.operation, "operation"),
        permission_type=_code(AclPermissionType, request.permission_type, "permission type"),
    ).check()


class AclApis:
    """The three ACL handlers (see the module docstring)."""

    def __init__(self, *, acls: AclWatcher | None, auth: AuthHelper, respond: Respond) -> None:
        self._acls = acls
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {
            int(ApiKey.DESCRIBE_ACLS): self._describe,
            int(ApiKey.CREATE_ACLS): self._create,
            int(ApiKey.DELETE_ACLS): self._delete,
        }

    def _refusal(
        self, request: NetworkRequest, operation: AclOperation
    ) -> tuple[ErrorCode, str | None] | None:
        if self._acls is None:
            return ErrorCode.SECURITY_DISABLED, _DISABLED
        if not self._auth.authorize_cluster(request.session, operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
        return None

    def _describe(self, request: NetworkRequest, header: RequestHeader, body: DescribeAclsRequest) -> None:
        refusal, acls = self._refusal(request, AclOperation.DESCRIBE), self._acls
        if refusal is not None or acls is None:
            code, message = refusal or (ErrorCode.SECURITY_DISABLED, _DISABLED)
            self._respond(request, header, DescribeAclsResponse(error_code=int(code), error_message=message))
            return
        try:
            acl_filter = acl_filter_of(body)
        except InvalidAclError as exc:
            response = DescribeAclsResponse(error_code=int(error_code_of(exc)), error_message=str(exc))
            self._respond(request, header, response)
            return
        resources: dict[ResourcePattern, list[AclDescription]] = {}
        for binding in acls.cache.bindings(acl_filter):
            entry = binding.entry
            resources.setdefault(binding.pattern, []).append(
                AclDescription(
                    principal=entry.principal,
                    host=entry.host,
                    operation=int(entry.operation),
                    permission_type=int(entry.permission_type),
                )
            )
        self._respond(
            request,
            header,
            DescribeAclsResponse(
                resources=[
                    DescribeAclsResource(
                        resource_type=int(p.resource_type),
                        resource_name=p.name,
                        pattern_type=int(p.pattern_type),
                        acls=acls,
                    )
                    for p, acls in resources.items()
                ]
            ),
        )

    def _create(self, request: NetworkRequest, header: RequestHeader, body: CreateAclsRequest) -> None:
        refusal, acls = self._refusal(request, AclOperation.ALTER), self._acls
        if refusal is not None or acls is None:
            code, message = refusal or (ErrorCode.SECURITY_DISABLED, _DISABLED)
            result = AclCreationResult(error_code=int(code), error_message=message)
            self._respond(request, header, CreateAclsResponse(results=[result] * len(body.creations)))
            return
        results: list[AclCreationResult] = []
        valid: list[AclBinding] = []
        for creation in body.creations:
            try:
                binding = AclBinding(
                    ResourcePattern(
                        _code(ResourceType, creation.resource_type, "resource type"),
                        creation.resource_name,
                        _code(PatternType, creation.resource_pattern_type, "pattern type"),
                    ),
                    AccessControlEntry(
                        creation.principal,
                        creation.host,
                        _code(AclOperation, creation.operation, "operation"),
                        _code(AclPermissionType, creation.permission_type, "permission type"),
                    ),
                ).check()
                acls.store.add([binding])
            except (InvalidAclError, ClusterError) as exc:
                logger.info("CreateAcls from %s: %s", request.peer, exc)
                results.append(AclCreationResult(error_code=int(error_code_of(exc)), error_message=str(exc)))
                continue
            logger.info("%s created ACL %s", request.session.principal, binding)
            valid.append(binding)
            results.append(AclCreationResult())
        if valid and not acls.wait_for(
            lambda cache: all(b.entry in cache.entries(b.pattern) for b in valid), MAX_WAIT_S
        ):
            logger.warning("created ACLs not yet seen by this broker after %.0f s", MAX_WAIT_S)
        self._respond(request, header, CreateAclsResponse(results=results))

    def _delete(self, request: NetworkRequest, header: RequestHeader, body: DeleteAclsRequest) -> None:
        refusal, acls = self._refusal(request, AclOperation.ALTER), self._acls
        if refusal is not None or acls is None:
            code, message = refusal or (ErrorCode.SECURITY_DISABLED, _DISABLED)
            result = DeleteAclsFilterResult(error_code=int(code), error_message=message)
            self._respond(request, header, DeleteAclsResponse(filter_results=[result] * len(body.filters)))
            return
        results: list[DeleteAclsFilterResult] = []
        removed_all: list[AclBinding] = []
        for asked in body.filters:
            try:
                removed = acls.store.remove(acl_filter_of(asked), acls.cache)
            except (InvalidAclError, ClusterError) as exc:
                logger.info("DeleteAcls from %s: %s", request.peer, exc)
                results.append(
                    DeleteAclsFilterResult(error_code=int(error_code_of(exc)), error_message=str(exc))
                )
                continue
            for binding in removed:
                logger.info("%s deleted ACL %s", request.session.principal, binding)
            removed_all.extend(removed)
            results.append(
                DeleteAclsFilterResult(
                    matching_acls=[
                        DeleteAclsMatchingAcl(
                            resource_type=int(b.pattern.resource_type),
                            resource_name=b.pattern.name,
                            pattern_type=int(b.pattern.pattern_type),
                            principal=b.entry.principal,
                            host=b.entry.host,
                            operation=int(b.entry.operation),
                            permission_type=int(b.entry.permission_type),
                        )
                        for b in removed
                    ]
                )
            )
        if removed_all and not acls.wait_for(
            lambda cache: not any(b.entry in cache.entries(b.pattern) for b in removed_all), MAX_WAIT_S
        ):
            logger.warning("deleted ACLs still seen by this broker after %.0f s", MAX_WAIT_S)
        self._respond(request, header, DeleteAclsResponse(filter_results=results))
