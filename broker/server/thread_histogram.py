"""A Prometheus histogram whose observations cost two list updates: :class:`ThreadHistogram`.

It exposes exactly what ``prometheus_client.Histogram`` with the same name, label names and buckets
exposes (``_bucket`` samples cumulative with ``le`` after the other labels, ``_count``, ``_sum``,
``_created`` unless prometheus_client's created series are disabled), so dashboards and scrapers cannot
tell them apart; it is not a registry collector by itself: its owner's collector yields
:meth:`ThreadHistogram.family` (and, for a count that is also a counter of its own, such as "requests
answered" beside "their time", :meth:`ThreadHistogram.count_family`). Where the numbers live and why
writes need no lock: :mod:`broker.server.thread_cells`.

A row is ``[sum, count in bucket 0, ..., count in bucket n]`` (per bucket, not cumulative; the last
bucket is ``+Inf``); an observation ``v`` goes into the first bucket whose upper bound ``le >= v``, found
by ``bisect_left`` over the bounds, as prometheus_client's walk finds it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from broker.server.thread_cells import LabelValues, ThreadCells, created_series_enabled


class ThreadHistogram(ThreadCells):
    """A labelled histogram (label values given as a tuple per observation) kept in per-thread rows."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"histogram {name}: buckets not in ascending order: {list(buckets)}")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        if len(bounds) < 2:
            raise ValueError(f"histogram {name}: needs at least one bucket below +Inf, got {list(buckets)}")
        self.documentation = documentation
        self.bounds = tuple(bounds)
        self._le = [floatToGoString(b) for b in bounds]  # type: ignore[no-untyped-call]
        super().__init__(name, labelnames, 1 + len(bounds))

    def observe(self, labels: LabelValues, value: float) -> None:
        """Count ``value`` under ``labels`` (label values, in the order of the label names)."""
        row = self._local.rows.get(labels)  # ThreadCells.row, inlined
        if row is None:
            row = self._new_row(labels)
        row[0] += value
        row[1 + bisect_left(self.bounds, value)] += 1

    def family(self) -> Metric:
        """The histogram's samples, summed over the threads."""
        created = created_series_enabled()
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, row, created_at in self.totals():
            cumulative = 0.0
            buckets = []
            for le, count in zip(self._le, row[1:], strict=True):
                cumulative += count
                buckets.append((le, cumulative))
            family.add_metric(list(labels), buckets, float(row[0]))
            if created:
                family.samples.append(
                    Sample(
                        self.name + "_created", dict(zip(self.labelnames, labels, strict=True)), created_at
                    )
                )
        return family

    def count_family(self, name: str, documentation: str) -> Metric:
        """The observations' counts as a counter of their own (``<name>_total``, ``<name>_created``)."""
        created = created_series_enabled()
        family = CounterMetricFamily(name, documentation, labels=self.labelnames)
        for labels, row, created_at in self.totals():
            family.add_metric(list(labels), float(sum(row[1:])), created_at if created else None)
        return family
