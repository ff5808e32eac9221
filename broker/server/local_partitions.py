"""This broker's share of the cluster: the logs of the partitions ZooKeeper assigns to it.

The cluster watcher calls :meth:`LocalPartitions.apply` after every change it sees; this creates the log
of every partition newly assigned to this broker and deletes the logs of topics that were deleted. At
start-up, :meth:`LocalPartitions.remove_strays` deletes local partitions that ZooKeeper no longer assigns
to this broker (their topic was deleted while the broker was down), naming each in the log, so that a
topic created again under the same name starts from offset 0. Thread-safe (the log manager is).
"""

from __future__ import annotations

import logging

from broker.cluster.cluster_view import ClusterView
from broker.log.errors import LogError
from broker.log.log_manager import LogManager
from broker.record.errors import RecordError
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class LocalPartitions:
    """Keeps ``log_manager`` in step with the partitions assigned to ``broker_id``."""

    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self._broker_id = broker_id
        self._logs = log_manager

    def remove_strays(self, view: ClusterView) -> list[TopicPartition]:
        """Delete the local partitions ``view`` does not assign to this broker; returns them."""
        assigned = set(view.partitions_of(self._broker_id))
        strays = [log.topic_partition for log in self._logs.all_logs() if log.topic_partition not in assigned]
        for tp in strays:
            logger.warning(
                "broker %d: deleting local partition %s: ZooKeeper does not assign it to this broker "
                "(its topic was deleted while the broker was down)",
                self._broker_id,
                tp,
            )
            self._logs.delete_log(tp.topic, tp.partition)
        return strays

    def apply(self, old: ClusterView, new: ClusterView) -> None:
        """Create the logs of newly assigned partitions; delete those of deleted topics."""
        for topic in sorted(set(old.topics) - set(new.topics)):
            try:
                deleted = self._logs.delete_topic(topic)
            except (LogError, RecordError):
                logger.exception("broker %d: deleting topic %s failed", self._broker_id, topic)
                continue
            if deleted:
                logger.info("broker %d: deleted %d partitions of topic %s", self._broker_id, deleted, topic)
        for tp in new.partitions_of(self._broker_id):
            if self._logs.get_log(tp.topic, tp.partition) is None:
                try:
                    self._logs.get_or_create_log(tp.topic, tp.partition)
                except (LogError, RecordError):
                    logger.exception("broker %d: creating the log of %s failed", self._broker_id, tp)
