"""The ACL authorizer (Kafka's ``AclAuthorizer`` and ``StandardAuthorizer``): may this session do this
operation on this resource?

Configured by ``[broker] authorizer = "acl"`` (:mod:`broker.security_config`). For one request:

1. a principal in ``super_users`` may do everything;
2. otherwise the ACLs decide (:class:`~broker.security.acl_cache.AclCache`: deny beats allow, implied
   operations, literal, ``*`` and prefixed patterns, ``User:*``, hosts);
3. a resource that has no ACL at all is open to everyone if ``allow_everyone_if_no_acl_found``, else
   refused.

The ACLs are the broker's copy (:class:`~broker.cluster.acl_watcher.AclWatcher`), read as one immutable
snapshot per call: no ZooKeeper round trip on a request thread. A refusal is logged at INFO naming the
principal, the client's host, the operation and the resource (Kafka's ``kafka.authorizer.logger``); what
a request merely filters out (Metadata's unlisted topics) is logged at DEBUG.

Thread-safe: the configuration is fixed, the cache is swapped whole by the watcher.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from broker.network.session import Session
from broker.security.acl_binding import AclOperation, ResourceType
from broker.security.acl_cache import AclCache, Match

logger = logging.getLogger(__name__)


class AclAuthorizer:
    """Answers whether a session may do an operation on a resource (see the module docstring)."""

    def __init__(
        self,
        *,
        acls: Callable[[], AclCache],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    @property
    def cache(self) -> AclCache:
        """The ACLs as this broker has them now."""
        return self._acls()

    def authorize(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        principal = str(session.principal)
        if principal in self.super_users:
            return True
        match = self._acls().authorize(principal, session.client_host, operation, resource_type, name)
        allowed = match is Match.ALLOW or (match is Match.NO_ACL and self.allow_everyone_if_no_acl_found)
        if not allowed:
            logger.log(
                logging.INFO if log_if_denied else logging.DEBUG,
                "principal %s from host %s denied %s on %s %r (%s)",
                principal,
                session.client_host or "-",
                operation.title,
                resource_type.title,
                name,
                match.value,
            )
        return allowed

    def authorize_by_resource_type(
        self, session: Session, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the session may do ``operation`` on some resource of ``resource_type`` (Kafka's
        ``authorizeByResourceType``: a super user, the no-ACL rule for a name nobody wrote an ACL for, or
        an ALLOW not undone by a DENY)."""
        if self.authorize(session, operation, resource_type, "hardcode", log_if_denied=False):
            return True  # Kafka's probe of an unnamed resource: super users and the no-ACL rule
        return self._acls().authorize_by_resource_type(
            str(session.principal), session.client_host, operation, resource_type
        )
