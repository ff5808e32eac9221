"""Rows of numbers per label set, each thread adding to rows of its own, summed when read: the storage of the
broker's cheap metrics (:class:`~broker.server.thread_counter.ThreadCounter`,
:class:`~broker.server.thread_histogram.ThreadHistogram`).

Why: ``prometheus_client``'s counters and histograms take a lock per value they touch (a histogram
observation: the sum's and the bucket's, plus a linear walk of the buckets), about 1.4 us per answered
request in the broker, where a Fetch answer's own work is a few microseconds. Here a write is two list
updates in a list only its own thread writes, found through a ``threading.local``; the cost moves to the
reader, which sums every thread's rows at scrape time (BENCHMARKS.md, "Metrics cost").

State and concurrency (CPython with the GIL):

* ``_shards``: one dict ``label values -> row`` per thread that wrote (a row: a ``list`` of ``width``
  numbers), created by that thread on its first write, appended to ``_shards`` under ``_lock``. Only its
  own thread adds rows to a shard's dict and adds to its rows' numbers, without a lock: no other thread
  writes them, so no update is lost. A read of ``row[i]`` by another thread sees the number before or
  after a concurrent ``+=`` (one list item load or store is atomic under the GIL), never a torn value.
* ``_created``: ``label values -> wall-clock time`` of their first write by any thread (the
  ``_created`` sample prometheus_client gives a child), written under ``_lock`` *before* the writing
  thread puts the row in its shard. The reader iterates ``_created`` (under the lock), never a shard's
  dict (another thread may be inserting into it: that would raise "dictionary changed size"), and looks
  each label set up in each shard with ``dict.get`` (atomic): a row not yet inserted counts as zeros.
* ``_retired``: the rows of threads that have ended, folded in at read time (under ``_lock``) so that a
  broker that starts and ends threads does not keep one shard per thread it ever ran. A dead thread
  writes no more, so its rows are final when folded.

A read is not a snapshot across threads (nor is prometheus_client's, one lock per value): numbers written
while a scrape sums may or may not be in it; every number read is one that was written, and every write
is in the next scrape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from prometheus_client import metrics as prometheus_metrics

LabelValues = tuple[str, ...]
Row = list[float]


def created_series_enabled() -> bool:
    """Whether prometheus_client exposes ``_created`` samples (``PROMETHEUS_DISABLE_CREATED_SERIES``,
    ``disable_created_metrics()``): read from its module at each scrape, as its own metrics do."""
    return bool(getattr(prometheus_metrics, "_use_created", True))


class _Shard(threading.local):
    """A thread's rows; ``__init__`` runs in each thread on its first access (``threading.local``)."""

    def __init__(self, owner: ThreadCells) -> None:
        self.rows: dict[LabelValues, Row] = {}
        owner._add_shard(threading.current_thread(), self.rows)


class ThreadCells:
    """``width`` numbers per label set, added to per thread, summed by :meth:`totals`: the base of the
    metrics kept this way. A write (inline in the subclass, for speed) finds its thread's row with
    ``self._local.rows.get(labels)``, or makes it with :meth:`_new_row`, and adds to its items in place.

    With no label names the one row (label values ``()``) exists from the start, at zeros, as
    prometheus_client's unlabelled metrics do.
    """

    def __init__(self, name: str, labelnames: Sequence[str], width: int) -> None:
        self.name = name
        self.labelnames = tuple(labelnames)
        self.width = width
        self._lock = threading.Lock()
        self._shards: list[tuple[threading.Thread, dict[LabelValues, Row]]] = []
        self._retired: dict[LabelValues, Row] = {}
        self._created: dict[LabelValues, float] = {}
        self._local = _Shard(self)
        if not self.labelnames:
            self._created[()] = time.time()

    def _add_shard(self, thread: threading.Thread, rows: dict[LabelValues, Row]) -> None:
        with self._lock:
            self._shards.append((thread, rows))

    def _new_row(self, labels: LabelValues) -> Row:
        """A row of zeros for ``labels`` in this thread's shard (the first write of ``labels`` here)."""
        if len(labels) != len(self.labelnames):
            raise ValueError(
                f"{self.name}: label values {labels!r} do not match the label names {self.labelnames!r} "
                f"(expected {len(self.labelnames)}, got {len(labels)})"
            )
        with self._lock:
            self._created.setdefault(labels, time.time())
        found = self._local.rows[labels] = [0] * self.width
        return found

    def thread_count(self) -> int:
        """How many threads' rows are kept apart (not folded yet)."""
        with self._lock:
            return len(self._shards)

    def totals(self) -> list[tuple[LabelValues, Row, float]]:
        """Every label set written so far (first written first), its row summed over all threads, and
        when it was first written."""
        with self._lock:
            self._retire_ended_threads()
            result = []
            for labels, created in self._created.items():
                total: Row = list(self._retired.get(labels) or [0] * self.width)
                for _thread, rows in self._shards:
                    found = rows.get(labels)
                    if found is not None:
                        for i, value in enumerate(found):
                            total[i] += value
                result.append((labels, total, created))
            return result

    def _retire_ended_threads(self) -> None:
        """Fold the rows of threads that have ended into ``_retired`` (under ``_lock``)."""
        ended = [shard for shard in self._shards if not shard[0].is_alive()]
        for shard in ended:
            self._shards.remove(shard)
            for labels, row in shard[1].items():
                retired = self._retired.setdefault(labels, [0] * self.width)
                for i, value in enumerate(row):
                    retired[i] += value
