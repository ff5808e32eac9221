"""A Prometheus counter whose increments cost one list update: :class:`ThreadCounter`.

It exposes exactly what ``prometheus_client.Counter`` with the same name and label names exposes
(``<name>_total`` and, unless prometheus_client's created series are disabled, ``<name>_created`` per
label set); its owner's collector yields :meth:`ThreadCounter.family`. Where the numbers live and why
increments need no lock: :mod:`broker.server.thread_cells`.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import CounterMetricFamily, Metric

from broker.server.thread_cells import LabelValues, ThreadCells, created_series_enabled


class ThreadCounter(ThreadCells):
    """A labelled counter (label values given as a tuple per increment) kept in per-thread rows."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name.removesuffix("_total"), labelnames, 1)
        self.documentation = documentation

    def inc(self, labels: LabelValues, amount: float = 1) -> None:
        """Add ``amount`` (not negative: a counter only goes up) under ``labels``."""
        if amount < 0:
            raise ValueError(f"counter {self.name}: increments must not be negative, got {amount}")
        row = self._local.rows.get(labels)  # ThreadCells.row, inlined
        if row is None:
            row = self._new_row(labels)
        row[0] += amount

    def family(self) -> Metric:
        """The counter's samples, summed over the threads."""
        created = created_series_enabled()
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, row, created_at in self.totals():
            family.add_metric(list(labels), float(row[0]), created_at if created else None)
        return family
