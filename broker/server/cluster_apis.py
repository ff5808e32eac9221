"""The protocol layer's description of the cluster as a whole: DescribeCluster (KIP-700; part of Kafka's
``KafkaApis``, split out as :mod:`broker.server.admin_apis` is).

* **DescribeCluster**: the cluster id, the controller's broker id and every registered broker at its endpoint
  of the listener the request came in on (a broker without that listener is left out, as in Metadata), with
  its rack; ``endpoint_type`` 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, an unknown type
  UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages (a Kafka broker's answers; v0 asks for brokers only). Asked
  for, the cluster's authorized operations (KIP-430): those of the cluster's operations the principal may
  do, 0 without DESCRIBE on the cluster, every one without an authorizer
  (:meth:`~broker.server.auth_helper.AuthHelper.cluster_authorized_operations`).
  Where Lumber differs from Kafka: the controller id is Lumber's ZooKeeper controller (as Kafka's
  ZooKeeper-mode brokers answered); a KRaft broker names a random live broker, its controllers being out of
  the clients' reach.

Thread-safe: no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.describe_cluster import (
    BROKER_ENDPOINTS,
    CONTROLLER_ENDPOINTS,
    OPERATIONS_NOT_ASKED,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from broker.server.auth_helper import AuthHelper

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class ClusterApis:
    """Answers DescribeCluster (see the module docstring)."""

    def __init__(self, cluster: ClusterWatcher, cluster_id: str, auth: AuthHelper, respond: Respond) -> None:
        self._cluster = cluster
        self._cluster_id = cluster_id
        self._auth = auth
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {int(ApiKey.DESCRIBE_CLUSTER): self._describe_cluster}

    def _describe_cluster(
        self, request: NetworkRequest, header: RequestHeader, body: DescribeClusterRequest
    ) -> None:
        if body.endpoint_type != BROKER_ENDPOINTS:
            if body.endpoint_type == CONTROLLER_ENDPOINTS:
                code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
                message = (
                    "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                    "CONTROLLER"
                )
            else:
                code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
                message = f"Unsupported endpoint type {body.endpoint_type}"
            answer = DescribeClusterResponse(error_code=int(code), error_message=message)
            self._respond(request, header, answer)
            return
        view = self._cluster.view
        listener = request.session.listener_name
        brokers = [
            DescribeClusterBroker(broker_id=b.broker_id, host=e.host, port=e.port, rack=b.rack)
            for b in sorted(view.brokers.values(), key=lambda b: b.broker_id)
            if (e := b.endpoint(listener)) is not None
        ]
        operations = OPERATIONS_NOT_ASKED
        if body.include_cluster_authorized_operations:
            operations = self._auth.cluster_authorized_operations(request.session)
        answer = DescribeClusterResponse(
            cluster_id=self._cluster_id,
            controller_id=self._cluster.controller_id(),
            brokers=brokers,
            cluster_authorized_operations=operations,
        )
        self._respond(request, header, answer)
