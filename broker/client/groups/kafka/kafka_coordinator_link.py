"""A Kafka-protocol group member's link to its group coordinator: step 1 of
:mod:`broker.client.groups.kafka.kafka_group_membership` (find the coordinator), how every later request
reaches it, and the signals its answers give the coordination thread. Mixed into
:class:`~broker.client.groups.kafka.kafka_group_membership.KafkaGroupMembership` (its state and threads are
described there; only the coordination thread calls these methods).

The signals, raised by the member's requests and acted on by the coordination thread's loop:

* :class:`CoordinatorLostError`: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT, or no
  coordinator known: forget it and find it again (after ``retry_backoff_ms``);
* :class:`RejoinError`: the generation is over or the member unknown: prepare and join again (step 2);
* :class:`CommitRefusedError`: a commit refused for another reason: the member goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.client.errors import ClientError, GroupError
from broker.client.groups.kafka.group_coordinator_lookup import (
    CoordinatorNotFoundError,
    find_group_coordinator,
)
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.protocol import ErrorCode

log = logging.getLogger(__name__)

#: Errors that say the coordinator moved or is not there: find it again.
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)


class CoordinatorLostError(ClientError):
    """The coordinator moved, is not there or is unreachable: find it again."""


class RejoinError(GroupError):
    """The generation is over (or the member unknown): prepare and join again."""


class CommitRefusedError(ClientError):
    """The coordinator refused a commit for a reason other than the generation (the member goes on)."""


class KafkaCoordinatorLink:
    """The coordinator-finding and request-sending part of a Kafka-protocol member (see the module
    docstring)."""

    # The member's state these methods use (set by KafkaGroupMembership.__init__).
    group: str
    _pool: BrokerPool
    _join_pool: BrokerPool
    _metadata: ClusterMetadata
    _coordinator: BrokerAddress | None

    # ------------------------------------------------------------------------------ 1. the coordinator

    def _find_coordinator(self) -> None:
        if self._coordinator is not None:
            return
        try:
            self._coordinator = find_group_coordinator(self._pool, self._metadata, self.group)
        except CoordinatorNotFoundError as exc:
            raise CoordinatorLostError(str(exc)) from exc
        log.info("group %s: coordinator is %s", self.group, self._coordinator)

    def _request(self, body: Any, *, join: bool = False, version: int | None = None) -> Any:
        """Send ``body`` to the coordinator and wait for the answer."""
        coordinator = self._coordinator
        if coordinator is None:
            raise CoordinatorLostError("not known")
        pool = self._join_pool if join else self._pool
        connection = pool.get(coordinator)
        return connection.request(body, version=version)

    def _check(self, error_code: int, what: str) -> None:
        """Raise for a coordinator error code (the caller handles the others)."""
        if error_code in _COORDINATOR_ERRORS:
            raise CoordinatorLostError(f"{what}: {ErrorCode.name_of(error_code)}")
