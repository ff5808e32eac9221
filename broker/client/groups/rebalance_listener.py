"""Callbacks a group member's application gets when partitions move (as Kafka's ConsumerRebalanceListener).

Both run on the member's coordination thread, in order, never concurrently; an exception is logged and
the handover goes on.

* :meth:`RebalanceListener.on_partitions_revoked`: the member has stopped fetching these partitions and
  hands out no more of their records; their offsets are not committed yet and the member still owns them.
  The last chance to save state keyed by these partitions.
* :meth:`RebalanceListener.on_partitions_assigned`: the member owns these partitions now and has started
  fetching them from their committed offsets.
"""

from __future__ import annotations

from broker.record.topic_partition import TopicPartition


class RebalanceListener:
    """Override either method; the defaults do nothing."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """After fetching of ``partitions`` stopped; before their offsets are committed and released."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        """Called after ``partitions`` were claimed and their fetching started."""
