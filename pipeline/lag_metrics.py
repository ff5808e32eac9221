"""Consumer lag as Prometheus metrics (``lumber groups lag --watch --metrics-port N``).

A collector over the latest :class:`~broker.client.lag_evaluation.LagWindow` evaluation of each watched
group, with kafka_exporter's metric names so that its dashboards map over, plus Burrow's statuses:

========================================================= ===================================================
``kafka_consumergroup_lag{consumergroup,kind,topic,partition}``            log end offset - committed offset
``kafka_consumergroup_current_offset{consumergroup,kind,topic,partition}`` the committed offset
``kafka_topic_partition_current_offset{topic,partition}``                  the log end offset
``lumber_consumergroup_partition_status{consumergroup,kind,topic,partition}`` 0 OK, 1 WARNING, 2 STALLED,
                                                                             3 STOPPED
``lumber_consumergroup_status{consumergroup,kind}``                         the worst partition status
========================================================= ===================================================

``kind`` is the group's kind, ``zookeeper`` or ``kafka`` (a label kafka_exporter does not have: two groups
of different kinds may share a name).

Served by ``prometheus_client``'s own HTTP server on 127.0.0.1 unless told otherwise. Thread-safety: the
watcher thread replaces the whole evaluation of a group in one assignment (:meth:`LagCollector.update`);
the HTTP thread reads whichever is current.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.client.lag_evaluation import PartitionLag, group_status


class LagCollector(Collector):
    """The latest evaluation of each group, as metrics (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], tuple[PartitionLag, ...]] = {}

    def update(self, group: str, kind: str, partitions: Sequence[PartitionLag]) -> None:
        self._groups = {**self._groups, (group, kind): tuple(partitions)}

    def forget(self, group: str, kind: str) -> None:
        """``group`` of ``kind`` is gone: its series end."""
        self._groups = {key: found for key, found in self._groups.items() if key != (group, kind)}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        groups = self._groups
        labels = ["consumergroup", "kind", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "Log end offset minus committed offset", labels=labels
        )
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "The group's committed offset", labels=labels
        )
        ends = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "The partition's log end offset",
            labels=["topic", "partition"],
        )
        status = GaugeMetricFamily(
            "lumber_consumergroup_partition_status",
            "Burrow's partition status: 0 OK, 1 WARNING, 2 STALLED, 3 STOPPED",
            labels=labels,
        )
        overall = GaugeMetricFamily(
            "lumber_consumergroup_status",
            "The group's worst partition status: 0 OK, 1 WARNING, 2 STALLED, 3 STOPPED",
            labels=["consumergroup", "kind"],
        )
        seen_ends: set[tuple[str, str]] = set()
        for (group, kind), partitions in sorted(groups.items()):
            for p in partitions:
                values = [group, kind, p.partition.topic, str(p.partition.partition)]
                lag.add_metric(values, p.lag)
                current.add_metric(values, p.latest.committed_offset)
                status.add_metric(values, int(p.status))
                key = (p.partition.topic, str(p.partition.partition))
                if key not in seen_ends:
                    seen_ends.add(key)
                    ends.add_metric(list(key), p.latest.log_end_offset)
            overall.add_metric([group, kind], int(group_status(partitions)))
        yield from (lag, current, ends, status, overall)
