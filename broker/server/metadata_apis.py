"""Metadata as KafkaApis answers it (Kafka's ``handleTopicMetadataRequest``): the live brokers and the
asked-for topics, only those the client may see.

* **Brokers**: each live broker at its endpoint of the listener the request came in on (a broker without
  that listener is left out, as in Kafka).
* **Topics**: the asked-for ones, or every topic (a null list, or an empty one at v0), from the cluster
  watcher's view. Unknown topics are created when the request and ``[broker] auto_create_topics`` both allow
  it.
* **Controller**: the one the view names; while the view names none, ``/controller`` is read again
  (:meth:`~broker.cluster.cluster_watcher.ClusterWatcher.controller_id`), so an election the watch has not
  delivered yet is answered: librdkafka's admin client, told "no controller", waits for its next metadata
  refresh (its CreateTopics then timed out after 30 s against a broker that had just started).
* **Authorization** (``[broker] authorizer``): a request for every topic lists only those the principal may
  DESCRIBE; a topic asked for by name that it may not describe is answered TOPIC_AUTHORIZATION_FAILED, with
  no partitions (whether it exists is not told). Auto-creating needs CREATE on the cluster or on the topic;
  without it the unknown topic is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers it.
* **Authorized operations** (KIP-430; v8+ for topics, v8-10 for the cluster), only when asked for: each
  answered topic the principal may describe carries the operations it may do on it, a refused one Kafka's
  "not given" (INT32_MIN); the cluster's is 0 without DESCRIBE on the cluster
  (:meth:`~broker.server.auth_helper.AuthHelper.authorized_operations`).

Thread-safe (reads the view; creates through the admin manager).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError
from broker.config import BrokerConfig
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from broker.record.errors import InvalidTopicError
from broker.security.acl_binding import AclOperation, ResourceType
from broker.server.admin_manager import AdminManager
from broker.server.auth_helper import AuthHelper
from broker.server.error_codes import error_code_of
from broker.server.topic_metadata import topic_metadata

logger = logging.getLogger(__name__)

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]
_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


class MetadataApis:
    """The Metadata handler (see the module docstring)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        admin_manager: AdminManager,
        cluster: ClusterWatcher,
        cluster_id: str,
        auth: AuthHelper,
        respond: Respond,
    ) -> None:
        self._config = config
        self._admin = admin_manager
        self._cluster = cluster
        self._cluster_id = cluster_id
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {int(ApiKey.METADATA): self._metadata}

    def _metadata(self, request: NetworkRequest, header: RequestHeader, body: MetadataRequest) -> None:
        view = self._cluster.view
        if self._config.broker_id not in view.brokers:
            # just registered (or about to deregister): the watcher may not have seen this broker's own
            # node yet, and a client told of no broker at all may not ask again for a while (librdkafka)
            view = self._cluster.refresh()
        session = request.session
        every_topic = body.topics is None or (header.api_version == 0 and not body.topics)
        if every_topic:
            names = sorted(view.topics)
            hidden = self._auth.denied(
                session, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_if_denied=False
            )
            names = [name for name in names if name not in hidden]
            denied: set[str] = set()
        else:
            names = [t.name for t in body.topics or () if t.name is not None]
            denied = self._auth.denied(session, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        allow_create = self._config.auto_create_topics and (
            header.api_version < 4 or body.allow_auto_topic_creation
        )
        missing = [name for name in names if name not in view.topics and name not in denied]
        created_errors: dict[str, ErrorCode] = {}
        if missing and allow_create:
            if not self._auth.authorize_cluster(session, AclOperation.CREATE):
                denied |= self._auth.denied(session, AclOperation.CREATE, ResourceType.TOPIC, missing)
            for name in missing:
                if name not in denied:
                    created_errors[name] = self._auto_create(name)
            view = self._cluster.refresh()
        listener = session.listener_name
        brokers = [
            MetadataResponseBroker(node_id=b.broker_id, host=e.host, port=e.port, rack=None)
            for b in sorted(view.brokers.values(), key=lambda b: b.broker_id)
            if (e := b.endpoint(listener)) is not None  # a broker without the listener is left out (Kafka)
        ]
        topics = [
            MetadataResponseTopic(error_code=_DENIED, name=name)
            if name in denied
            else topic_metadata(view, name, created_errors.get(name))
            for name in names
        ]
        cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
        if header.api_version >= 8:  # the flags decode False below v8 (v11+: no cluster flag)
            if body.include_topic_authorized_operations:
                topics = [
                    topic
                    if name in denied
                    else topic._replace(
                        topic_authorized_operations=self._auth.authorized_operations(
                            session, ResourceType.TOPIC, name
                        )
                    )
                    for topic, name in zip(topics, names, strict=True)
                ]
            if body.include_cluster_authorized_operations:
                cluster_operations = self._auth.cluster_authorized_operations(session)
        self._respond(
            request,
            header,
            MetadataResponse(
                brokers=brokers,
                cluster_id=self._cluster_id,
                controller_id=self._cluster.controller_id(),
                topics=topics,
                cluster_authorized_operations=cluster_operations,
            ),
        )

    def _auto_create(self, topic: str) -> ErrorCode:
        try:
            self._admin.auto_create_topic(topic)
        except InvalidTopicError:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        except ClusterError as exc:
            logger.warning("auto-creating topic %r failed: %s", topic, exc)
            return error_code_of(exc)
        return ErrorCode.NONE
