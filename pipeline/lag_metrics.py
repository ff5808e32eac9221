"""Consumer lag as Prometheus metrics (``lumber groups lag --watch --metrics-port N``).

A collector over the latest :class:`~broker.client.groups.lag_evaluation.LagWindow` evaluation of each watched
group, with kafka_exporter's metric names so that its dashboards map over, plus Burrow's statuses:

========================================================= ===================================================
``kafka_consumergroup_lag{consumergroup,kind,topic,partition}``            log end offset - committed offset
                                                                             (no commit: - its reset position)
``kafka_consumergroup_current_offset{consumergroup,kind,topic,partition}`` the committed offset
``kafka_topic_partition_current_offset{topic,partition}``                  the log end offset
``lumber_consumergroup_partition_status{consumergroup,kind,topic,partition}`` 0 OK, 1 WARNING, 2 STALLED,
                                                                             3 STOPPED
``kafka_consumergroup_lag_sum{consumergroup,kind,topic}``                  the lag of the group's partitions
                                                                             of the topic, summed
``lumber_consumergroup_status{consumergroup,kind}``                         the worst partition status
========================================================= ===================================================

``kind`` is the group's kind, ``zookeeper`` or ``kafka`` (a label kafka_exporter does not have: two groups
of different kinds may share a name).

The collector also keeps each group's window of samples (:meth:`LagCollector.history`), which the
exporter serves as JSON beside the metrics (:mod:`pipeline.lag_exporter`): the lag history of ZooKeeper
groups, which ZooKeeper itself does not keep. Served on 127.0.0.1 unless told otherwise. Thread-safety: the
watcher thread replaces the whole evaluation and window of a group in one assignment
(:meth:`LagCollector.update`); the HTTP threads read whichever is current.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.client.groups.lag_evaluation import LagSample, PartitionLag, group_status
from broker.record.topic_partition import TopicPartition

Windows = Mapping[TopicPartition, Sequence[LagSample]]


class LagCollector(Collector):
    """The latest evaluation of each group, as metrics (see the module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], tuple[tuple[PartitionLag, ...], Windows]] = {}

    def update(
        self, group: str, kind: str, partitions: Sequence[PartitionLag], windows: Windows | None = None
    ) -> None:
        """``group``'s latest evaluation, and the samples it was judged on (``LagWindow.samples()``)."""
        found = (tuple(partitions), dict(windows or {}))
        self._groups = {**self._groups, (group, kind): found}

    def forget(self, group: str, kind: str) -> None:
        """``group`` of ``kind`` is gone: its series end."""
        self._groups = {key: found for key, found in self._groups.items() if key != (group, kind)}

    def history(self, group: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """The watched groups (those named ``group`` of ``kind`` when given) with each partition's window
        of samples, oldest first, as JSON: ``[{"group", "kind", "partitions": [{"topic", "partition",
        "samples": [{"observed_at_ms", "committed_offset", "committed_at_ms", "log_end_offset",
        "lag"}]}]}]``."""
        return [
            {
                "group": name,
                "kind": group_kind,
                "partitions": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "samples": [sample.to_json() for sample in samples],
                    }
                    for tp, samples in sorted(windows.items())
                ],
            }
            for (name, group_kind), (_, windows) in sorted(self._groups.items())
            if group in (None, name) and kind in (None, group_kind)
        ]

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
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The lag of the group's partitions of the topic, summed",
            labels=["consumergroup", "kind", "topic"],
        )
        seen_ends: set[tuple[str, str]] = set()
        for (group, kind), (partitions, _) in sorted(groups.items()):
            for p in partitions:
                values = [group, kind, p.partition.topic, str(p.partition.partition)]
                lag.add_metric(values, p.lag)  # a partition without a commit: from its reset position
                if not p.no_commit:
                    current.add_metric(values, p.latest.committed_offset)
                status.add_metric(values, int(p.status))
                key = (p.partition.topic, str(p.partition.partition))
                if key not in seen_ends:
                    seen_ends.add(key)
                    ends.add_metric(list(key), p.latest.log_end_offset)
            overall.add_metric([group, kind], int(group_status(partitions)))
            sums: dict[str, int] = {}
            for p in partitions:
                sums[p.partition.topic] = sums.get(p.partition.topic, 0) + p.lag
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([group, kind, topic], total)
        yield from (lag, current, ends, lag_sum, status, overall)
