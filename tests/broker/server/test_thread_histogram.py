"""ThreadHistogram (broker/server/thread_histogram.py) against prometheus_client's own Histogram: the same
observations give the same exposition, byte for byte but for the ``_created`` times, and the text parser
reads back the exact bucket counts, sums and counts."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from broker.server.broker_metrics import TIME_BUCKETS
from broker.server.thread_histogram import ThreadHistogram

NAME = "kafka_network_requestmetrics_totaltime_seconds"
HELP = "Time from a request's last byte to its answer being queued for its connection"
#: every bucket bound itself (le is inclusive), values between bounds, zero, and one above the last bound
OBSERVED = [0.0, 0.00005, *TIME_BUCKETS, 0.0003, 0.003, 0.7, 7.5, 29.999, 31.0, 1000.0]


class Yields(Collector):
    def __init__(self, *families: ThreadHistogram) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for histogram in self.families:
            yield histogram.family()


def exposition(registry: CollectorRegistry) -> str:
    """The text format."""
    return generate_latest(registry).decode()


def masked(text: str) -> str:
    """``text`` with the ``_created`` values (times of creation) blanked."""
    return re.sub(r"(_created\{[^}]*\}|_created) \S+", r"\1 T", text)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_same_exposition_as_prometheus_client_for_the_same_observations() -> None:
    ours = ThreadHistogram(NAME, HELP, ["request"], buckets=TIME_BUCKETS)
    theirs_registry = CollectorRegistry()
    theirs = Histogram(NAME, HELP, ["request"], buckets=TIME_BUCKETS, registry=theirs_registry)
    for request, values in (("Fetch", OBSERVED), ("Produce", OBSERVED[::3]), ("ApiVersions", [0.00042])):
        for value in values:
            ours.observe((request,), value)
            theirs.labels(request).observe(value)
    ours_registry = CollectorRegistry()
    ours_registry.register(Yields(ours))

    text = exposition(ours_registry)
    assert masked(text) == masked(exposition(theirs_registry))
    assert text.count("_created{") == 3
    found = samples(text)
    fetch = (("request", "Fetch"),)
    assert found[(NAME + "_count", fetch)] == len(OBSERVED) == 26
    assert found[(NAME + "_sum", fetch)] == sum(OBSERVED)
    # cumulative: le is inclusive, so each bound counts itself; 0.0 and 0.00005 fall in the first bucket
    assert found[(NAME + "_bucket", (("le", "0.0001"), *fetch))] == 3
    assert found[(NAME + "_bucket", (("le", "0.00025"), *fetch))] == 4
    assert found[(NAME + "_bucket", (("le", "0.0005"), *fetch))] == 6  # 0.0003 and the bound
    assert found[(NAME + "_bucket", (("le", "30.0"), *fetch))] == 24  # all but 31 and 1000
    assert found[(NAME + "_bucket", (("le", "+Inf"), *fetch))] == 26
    assert found[(NAME + "_bucket", (("le", "+Inf"), ("request", "ApiVersions")))] == 1
    assert found[(NAME + "_sum", (("request", "ApiVersions"),))] == 0.00042


def test_an_unlabelled_histogram_shows_zeros_from_the_start_as_prometheus_client_does() -> None:
    ours = ThreadHistogram("flush_seconds", "Flush time", buckets=[0.1, 1])
    theirs_registry = CollectorRegistry()
    Histogram("flush_seconds", "Flush time", buckets=[0.1, 1], registry=theirs_registry)
    ours_registry = CollectorRegistry()
    ours_registry.register(Yields(ours))
    assert masked(exposition(ours_registry)) == masked(exposition(theirs_registry))
    found = samples(exposition(ours_registry))
    assert found[("flush_seconds_count", ())] == 0
    assert found[("flush_seconds_bucket", (("le", "+Inf"),))] == 0


def test_created_series_follow_prometheus_clients_switch() -> None:
    ours = ThreadHistogram("t_seconds", "T", ["api"], buckets=[1, 2])
    ours.observe(("Fetch",), 1.5)
    prometheus_metrics.disable_created_metrics()
    try:
        assert "_created" not in str(ours.family().samples)
        assert "_created" not in str(ours.count_family("t_requests", "R").samples)
    finally:
        prometheus_metrics.enable_created_metrics()
    assert [s.name for s in ours.family().samples][-1] == "t_seconds_created"


def test_observations_from_many_threads_all_counted_also_after_the_threads_end() -> None:
    threads, per_thread = 8, 5_000
    histogram = ThreadHistogram("t_seconds", "T", ["api"], buckets=[0.25, 0.5, 1])
    start = threading.Barrier(threads + 1)
    scraped: list[float] = []

    def write(i: int) -> None:
        start.wait()
        api = ("Fetch",) if i % 2 else ("Produce",)
        for n in range(per_thread):
            histogram.observe(api, (0.25, 0.5, 0.75, 2.0)[n % 4])  # sums exact in any order

    writers = [threading.Thread(target=write, args=(i,)) for i in range(threads)]
    for writer in writers:
        writer.start()
    start.wait()
    while any(w.is_alive() for w in writers):  # scrapes while they write: never an error, only growth
        count = sum(
            s.value for s in histogram.count_family("t_requests", "R").samples if s.name.endswith("_total")
        )
        assert not scraped or count >= scraped[-1]
        scraped.append(count)
    for writer in writers:
        writer.join()

    found = {(s.name, s.labels.get("api"), s.labels.get("le")): s.value for s in histogram.family().samples}
    half = threads // 2 * per_thread
    for api in ("Fetch", "Produce"):
        assert found[("t_seconds_count", api, None)] == half
        assert found[("t_seconds_sum", api, None)] == half / 4 * (0.25 + 0.5 + 0.75 + 2.0)
        assert found[("t_seconds_bucket", api, "0.25")] == half / 4
        assert found[("t_seconds_bucket", api, "0.5")] == half / 2
        assert found[("t_seconds_bucket", api, "1.0")] == half / 4 * 3
        assert found[("t_seconds_bucket", api, "+Inf")] == half
    # the ended threads' rows were folded at the last scrape; the one left is this thread's (a
    # threading.local makes its creating thread's at once), which wrote nothing
    assert histogram.thread_count() == 1
    requests = {
        s.labels["api"]: s.value
        for s in histogram.count_family("t_requests", "R").samples
        if s.name == "t_requests_total"
    }
    assert requests == {"Fetch": half, "Produce": half}


def test_bad_buckets_and_label_values_are_refused_with_what_and_where() -> None:
    with pytest.raises(ValueError, match=r"histogram h: buckets not in ascending order: \[2, 1\]"):
        ThreadHistogram("h", "H", buckets=[2, 1])
    with pytest.raises(ValueError, match="histogram h: needs at least one bucket below"):
        ThreadHistogram("h", "H", buckets=[float("inf")])
    histogram = ThreadHistogram("h", "H", ["api"], buckets=[1])
    with pytest.raises(
        ValueError, match=r"h: label values \('a', 'b'\) do not match the label names \('api',\)"
    ):
        histogram.observe(("a", "b"), 1.0)
