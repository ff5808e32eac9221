"""Callbacks a group member's application gets when partitions move (as Kafka's ConsumerRebalanceListener).

Both run on the member's coordination thread, in order, never concurrently; an exception is logged and
the handover goes on (:func:`call_listener`, how both kinds of group call them).

* :meth:`RebalanceListener.on_partitions_revoked`: the member has stopped fetching these partitions and
  hands out no more of their records; their offsets are not committed yet and the member still owns them.
  The last chance to save state keyed by these partitions.
* :meth:`RebalanceListener.on_partitions_assigned`: the member owns these partitions now and has started
  fetching them from their committed offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.record.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class RebalanceListener:
    """Override either method; the defaults do nothing."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """After fetching of ``partitions`` stopped; before their offsets are committed and released."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        """Called after ``partitions`` were claimed and their fetching started."""


def call_listener(
    group: str, callback: Callable[[list[TopicPartition]], None], partitions: list[TopicPartition]
) -> None:
    """Run one of a listener's callbacks on ``partitions``; an exception is logged, not raised (the
    application's code must not stop the rebalance)."""
    try:
        callback(partitions)
    except Exception:
        log.exception("group %s: rebalance listener %s failed", group, callback.__name__)
