"""A producer's librdkafka statistics over one phase: what the client sent, how it batched, what waited.

librdkafka emits a JSON document every ``statistics.interval.ms`` to the ``stats_cb`` (served by
``poll()`` and ``flush()``). Its fields come in three kinds (librdkafka's STATISTICS.md):

* **counters**, ever increasing: a broker's ``tx`` (requests sent), ``txbytes``, ``req`` by request type
  (``req["Produce"]``), ``wakeups`` (its thread's poll wake-ups); a partition's ``txmsgs``. A phase's figure
  is the last emission's value less the first's (:meth:`RdkafkaStats.mark` records the first).
* **rolling windows**, reset at each emission: a topic's ``batchcnt`` (records per message set) and
  ``batchsize`` (bytes per message set), a broker's ``rtt`` (request to response), ``int_latency`` (a
  record's time in librdkafka's queues before it is put into a request) and ``outbuf_latency`` (a request's
  time in the output buffer before it is written). Each window has ``cnt`` and ``sum`` (microseconds for the
  latencies); a phase's figure sums ``cnt`` and ``sum`` over every emission after the mark.
* **gauges**, the value at the emission: a broker's ``outbuf_cnt`` (requests waiting to be written) and
  ``waitresp_cnt`` (requests written, awaiting their response: in flight). A phase's figure is their mean
  over the emissions after the mark.

Only brokers with ``nodeid >= 0`` count (the bootstrap entries have ``-1``). Message sets per Produce
request = the windows' ``batchcnt`` samples / ``req["Produce"]``: librdkafka writes one partition's message
set per Produce request (its issue 1700), so this is 1.0 unless that changes. Not thread-safe: the
callback and the readers run on the thread that polls the producer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_COUNTERS = ("tx", "txbytes", "wakeups")
_BROKER_WINDOWS = ("rtt", "int_latency", "outbuf_latency")
_TOPIC_WINDOWS = ("batchcnt", "batchsize")
_GAUGES = ("outbuf_cnt", "waitresp_cnt")


@dataclass
class Window:
    """The samples a rolling window held over the phase: how many, and their sum."""

    count: int = 0
    total: float = 0.0

    def add(self, window: dict[str, Any]) -> None:
        self.count += int(window.get("cnt", 0))
        self.total += float(window.get("sum", 0))

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass
class RdkafkaStats:
    """One producer's statistics for ``topic`` from :meth:`mark` on; :meth:`callback` is its ``stats_cb``."""

    topic: str
    emissions: int = 0
    _first: dict[str, int] | None = None
    _last: dict[str, int] = field(default_factory=dict)
    _first_txmsgs: dict[int, int] = field(default_factory=dict)
    _last_txmsgs: dict[int, int] = field(default_factory=dict)
    windows: dict[str, Window] = field(default_factory=dict)
    _gauges: dict[str, list[int]] = field(default_factory=dict)
    _latest: dict[str, Any] | None = None

    def callback(self, document: str) -> None:
        stats = json.loads(document)
        self.emissions += 1
        if self._first is None:
            self._latest = stats  # before the mark: nothing of the phase
            return
        self._last, self._last_txmsgs = self._counters(stats), self._txmsgs(stats)
        for broker in self._brokers(stats):
            for name in _BROKER_WINDOWS:
                self.windows.setdefault(name, Window()).add(broker.get(name) or {})
            for name in _GAUGES:
                self._gauges.setdefault(name, []).append(int(broker.get(name, 0)))
        topic = stats.get("topics", {}).get(self.topic, {})
        for name in _TOPIC_WINDOWS:
            self.windows.setdefault(name, Window()).add(topic.get(name) or {})

    def mark(self) -> None:
        """Start the phase at the latest emission (call it just before the clock starts)."""
        stats = self._latest
        if stats is None:
            raise ValueError(f"{self.topic}: no statistics were emitted before the phase")
        self._first = self._counters(stats)
        self._last = dict(self._first)
        self._first_txmsgs = self._txmsgs(stats)
        self._last_txmsgs = dict(self._first_txmsgs)
        self.windows.clear()
        self._gauges.clear()

    @staticmethod
    def _brokers(stats: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for b in stats.get("brokers", {}).values() if int(b.get("nodeid", -1)) >= 0]

    def _counters(self, stats: dict[str, Any]) -> dict[str, int]:
        totals = dict.fromkeys((*_COUNTERS, "Produce"), 0)
        for broker in self._brokers(stats):
            for name in _COUNTERS:
                totals[name] += int(broker.get(name, 0))
            totals["Produce"] += int(broker.get("req", {}).get("Produce", 0))
        return totals

    def _txmsgs(self, stats: dict[str, Any]) -> dict[int, int]:
        partitions = stats.get("topics", {}).get(self.topic, {}).get("partitions", {})
        return {int(p): int(v.get("txmsgs", 0)) for p, v in partitions.items() if int(p) >= 0}

    def counter(self, name: str) -> int:
        """A counter's growth over the phase (``tx``, ``txbytes``, ``wakeups``, ``Produce``)."""
        if self._first is None:
            raise ValueError(f"{self.topic}: no emission was marked as the phase's start")
        return self._last[name] - self._first[name]

    def records_by_partition(self) -> dict[int, int]:
        return {p: n - self._first_txmsgs.get(p, 0) for p, n in sorted(self._last_txmsgs.items())}

    def gauge_mean(self, name: str) -> float:
        values = self._gauges.get(name, [])
        return sum(values) / len(values) if values else 0.0

    def window(self, name: str) -> Window:
        return self.windows.get(name, Window())

    def summary(self) -> dict[str, float]:
        """The phase's figures: Produce requests, records and bytes per request, message sets per request,
        records per message set, the mean round trip and queue times in ms, requests in flight."""
        requests = self.counter("Produce")
        records = sum(self.records_by_partition().values())
        sets = self.window("batchcnt").count
        return {
            "produce_requests": float(requests),
            "records_per_request": records / requests if requests else 0.0,
            "bytes_per_request": self.counter("txbytes") / self.counter("tx") if self.counter("tx") else 0.0,
            "sets_per_request": sets / requests if requests else 0.0,
            "records_per_set": self.window("batchcnt").mean,
            "rtt_ms": self.window("rtt").mean / 1000,
            "int_latency_ms": self.window("int_latency").mean / 1000,
            "outbuf_latency_ms": self.window("outbuf_latency").mean / 1000,
            "in_flight": self.gauge_mean("waitresp_cnt"),
            "waiting_to_send": self.gauge_mean("outbuf_cnt"),
            "wakeups_per_request": self.counter("wakeups") / requests if requests else 0.0,
        }
