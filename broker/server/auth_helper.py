"""What the API handlers ask of the authorizer (Kafka's ``AuthHelper``): one check, a filter of names, a
cluster check, the authorized operations of a resource, each allowing everything when no authorizer is
configured.

Every handler that serves a resource holds an :class:`AuthHelper`. Without ``[broker] authorizer`` its
authorizer is None and every answer is yes, at the cost of one attribute test, so a broker without
authorization serves exactly as before. The errors it makes (:class:`~broker.server.errors.AuthorizationError`
and its kinds) are answered with Kafka's codes by the one table, :mod:`broker.server.error_codes`:
TOPIC_AUTHORIZATION_FAILED (29), GROUP_AUTHORIZATION_FAILED (30), CLUSTER_AUTHORIZATION_FAILED (31),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).

**Authorized operations** (KIP-430, Kafka's ``authorizedOperations``): what Metadata (v8+, each topic; v8-10,
the cluster), DescribeCluster and DescribeGroups (v3+, each group) answer when the request asks for it: a
32-bit field, bit ``1 << code`` set for each operation the resource type supports
(:data:`~broker.security.acl_binding.SUPPORTED_OPERATIONS`) that the session may do on the resource, each
asked of the authorizer as one request would be (super users, deny beats allow, implied DESCRIBE, the
no-ACL rule), none of it logged as a refusal. Without an authorizer: every supported operation. The
cluster's field is 0 unless the session may DESCRIBE the cluster (Kafka's rule, the refusal logged as any
other). A handler asks only when the request asked: nothing is spent on the field otherwise.

Thread-safe (the authorizer is).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.network.session import Session
from broker.security.acl_binding import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bit_field,
)
from broker.server.authorizer import AclAuthorizer
from broker.server.errors import (
    AuthorizationError,
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
)

_ERRORS: dict[ResourceType, type[AuthorizationError]] = {
    ResourceType.TOPIC: TopicAuthorizationError,
    ResourceType.GROUP: GroupAuthorizationError,
    ResourceType.CLUSTER: ClusterAuthorizationError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationError,
}

#: The authorized operations of each resource type without an authorizer: every supported one.
_EVERY_SUPPORTED = {kind: operations_bit_field(ops) for kind, ops in SUPPORTED_OPERATIONS.items()}


def authorization_error(
    session: Session, operation: AclOperation, resource_type: ResourceType, name: str
) -> AuthorizationError:
    """The error a refusal answers with, naming the principal, the operation and the resource."""
    what = (
        "the cluster" if resource_type is ResourceType.CLUSTER else f"{resource_type.title.lower()} {name!r}"
    )
    return _ERRORS[resource_type](f"{session.principal} may not {operation.title} {what}")


class AuthHelper:
    """The handlers' view of the authorizer (see the module docstring)."""

    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(
            session, operation, resource_type, name, log_if_denied=log_if_denied
        )

    def authorize_cluster(self, session: Session, operation: AclOperation) -> bool:
        return self.authorize(session, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorize_by_resource_type(
        self, session: Session, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(session, operation, resource_type)

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        """The bit field of the operations ``resource_type`` supports that the session may do on the
        resource ``name`` (see the module docstring)."""
        authorizer = self.authorizer
        if authorizer is None:
            return _EVERY_SUPPORTED[resource_type]
        return operations_bit_field(
            operation
            for operation in SUPPORTED_OPERATIONS[resource_type]
            if authorizer.authorize(session, operation, resource_type, name, log_if_denied=False)
        )

    def cluster_authorized_operations(self, session: Session) -> int:
        """The cluster's authorized operations, 0 unless the session may DESCRIBE the cluster (Kafka's
        Metadata and DescribeCluster)."""
        if not self.authorize_cluster(session, AclOperation.DESCRIBE):
            return 0
        return self.authorized_operations(session, ResourceType.CLUSTER, CLUSTER_NAME)

    def check(
        self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> None:
        """Raise the resource type's :class:`AuthorizationError` unless the session may."""
        if not self.authorize(session, operation, resource_type, name):
            raise authorization_error(session, operation, resource_type, name)

    def refusal(
        self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> AuthorizationError | None:
        """The error to answer with, or None when the session may."""
        if self.authorize(session, operation, resource_type, name):
            return None
        return authorization_error(session, operation, resource_type, name)

    def check_cluster(self, session: Session, operation: AclOperation) -> None:
        self.check(session, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def denied(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """The names of ``names`` the session may not do ``operation`` on (empty without an authorizer)."""
        if self.authorizer is None:
            return set()
        return {
            name
            for name in set(names)
            if not self.authorize(session, operation, resource_type, name, log_if_denied=log_if_denied)
        }
