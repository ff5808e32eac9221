"""The broker's Prometheus metrics, named as the Kafka JMX exporter names Kafka's MBeans, so that existing
dashboards map over. Served by ``prometheus_client``'s WSGI application at
``http://<[broker] host>:<metrics port>/metrics`` (``[broker] metrics_port``, default 9308 + broker id; 0
turns them off), through :class:`~broker.web.wsgi_server.WsgiServer`: HTTPS with ``[broker]
metrics_ssl_certfile``, HTTP Basic users with ``metrics_users_file``, and a ``host`` beyond 127.0.0.1 refused
without users unless ``metrics_allow_unauthenticated = true`` (docs/security.md, "Console and metrics").

================================================================================ ===========================
metric                                                                            what (where it comes from)
================================================================================ ===========================
``kafka_server_brokertopicmetrics_messagesin_total{topic}``                       messages appended (log end
                                                                                  offset growth)
``kafka_server_brokertopicmetrics_bytesin_total{topic}``                          bytes appended (segment
                                                                                  growth)
``kafka_server_brokertopicmetrics_bytesout_total{topic}``                         log bytes sent to fetchers
``kafka_network_requestmetrics_requests_total{request}``                          requests answered, per API
``kafka_network_requestmetrics_totaltime_seconds{request}``                       received -> answer queued
``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="All"}``  watched Produce/Fetch (*)
``kafka_log_log_size{topic,partition}``                                           partition bytes on disk
``kafka_log_log_numlogsegments{topic,partition}``                                 segments
``kafka_log_log_logstartoffset`` / ``_logendoffset`` / ``_highwatermark``          offsets
``kafka_log_logflushstats_logflush_seconds``                                       flusher's flush time
``kafka_server_replicamanager_partitioncount`` / ``_leadercount``                 partitions hosted / led
``kafka_server_replicamanager_underreplicatedpartitions``                         led here, ISR < replicas
                                                                                  (those being added not
                                                                                  counted, as Kafka)
``kafka_server_replicamanager_underminisrpartitioncount``                          led here, ISR <
                                                                                  min.insync.replicas
``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``                  the most messages a
                                                                                  partition followed here
                                                                                  is behind its leader's
                                                                                  high watermark
``kafka_controller_kafkacontroller_offlinepartitionscount``                       on the controller:
                                                                                  partitions without a live
                                                                                  leader
``kafka_controller_controllerstats_leaderelections_total``                        on the controller: leaders
                                                                                  it elected (Kafka's
                                                                                  LeaderElectionRateAndTimeMs
                                                                                  count)
``kafka_server_replicamanager_reassigningpartitions``                             led here and moving
``lumber_reassignment_bytes_left{topic,partition,replica}``                       a new replica's copy left
``lumber_replication_throttle_rate_bytes{side}``                                  throttle rate (0: none)
``lumber_replication_throttled_bytes_total{side}``                                copied under the throttle
``kafka_server_replicamanager_isrshrinks_total`` / ``_isrexpands_total``           ISR changes this leader
                                                                                  wrote
``kafka_controller_kafkacontroller_activecontrollercount``                        1 on the controller
``kafka_server_socketservermetrics_connection_count``                             open client connections
``kafka_server_socketservermetrics_network_io_total{direction}``                  request / response bytes
``kafka_server_fetchsessioncache_numincrementalfetchsessions``                      fetch sessions (KIP-227)
``kafka_server_fetchsessioncache_numincrementalfetchpartitionscached``              their partitions
``kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total``           sessions evicted
================================================================================ ===========================

(*) as Kafka's purgatory size: a completed operation stays counted until its deadline passes (Kafka: until
the next purge).

Cost on the hot paths: nothing on Produce. Appends are counted at scrape time from the logs themselves
(:class:`BrokerCollector`: the growth of each partition's log end offset and of each segment since the
previous scrape; a log already on disk when the broker started counts from where it was then), so the
produce path carries no hook. Answered requests are counted where every answer passes,
:meth:`MeteredRequestChannel.send_response`: one observation of the time histogram per answer and one
counter increment per log region a Fetch answer sends, each a couple of list updates in numbers of the
answering thread's own (:mod:`broker.server.thread_cells`), summed when scraped; "requests answered" is
the histogram's count. Requests answered by no response (``acks=0`` produce runs served inline) are not
counted there; their messages are, in ``messagesin``.

Lumber differs from Kafka: messages in is counted when they reach the log of a partition led here (Kafka
counts on append too, but per request), time is measured until the answer is queued for its connection
(Kafka's TotalTimeMs ends when it is sent), and there is one purgatory for Produce and Fetch.

Thread safety: :class:`BrokerMetrics` is written by the processor and handler threads that answer, and by
the flusher, without a lock: each thread writes numbers of its own, and a scrape (the HTTP server's
thread) sums them (why that is safe: :mod:`broker.server.thread_cells`); its caches of label values are
filled by whichever thread first needs an entry, with one atomic dict store of a value any thread would
compute alike. The collector's baselines are guarded by its lock (scrapes may overlap).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.cluster.partition_reassignment import PartitionReassignment
from broker.log.file_handle import FileHandle
from broker.log.file_region import FileRegion
from broker.log.log_manager import LogManager
from broker.network.request_channel import NetworkResponse, RequestChannel
from broker.protocol.api_key import ApiKey
from broker.record.topic_partition import TopicPartition
from broker.server.controller import ControllerStats
from broker.server.fetch_session_cache import FetchSessionCache
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager
from broker.server.thread_counter import ThreadCounter
from broker.server.thread_histogram import ThreadHistogram

#: Request-time buckets (seconds): 100 µs to 30 s, a long-poll Fetch waits up to its max wait
TIME_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)


def request_name(api_key: int) -> str:
    """Kafka's name of an API (``Produce``, ``ListOffsets``), as the JMX exporter's ``request`` label."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


class BrokerMetrics(Collector):
    """The broker's registry and what the request channel and the flusher count, as a collector of it.

    The per-answer counting (:meth:`answered`, :meth:`sent_region`) and the flush times are
    :class:`~broker.server.thread_histogram.ThreadHistogram` and
    :class:`~broker.server.thread_counter.ThreadCounter`: each thread adds to numbers of its own, with no
    lock, and a scrape sums them (:mod:`broker.server.thread_cells`); they expose exactly what
    prometheus_client's ``Histogram`` and ``Counter`` would. "Requests answered" is the time histogram's
    count, exposed as a counter of its own (every answered request is timed once).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.total_time = ThreadHistogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's last byte to its answer being queued for its connection",
            ["request"],
            buckets=TIME_BUCKETS,
        )
        self.bytes_out = ThreadCounter(
            "kafka_server_brokertopicmetrics_bytesout", "Log bytes sent to fetchers, per topic", ["topic"]
        )
        self.flush_time = ThreadHistogram(
            "kafka_log_logflushstats_logflush_seconds",
            "Time of each flush of a partition's log by the flusher thread",
            buckets=TIME_BUCKETS,
        )
        #: api key -> its ``request`` label values (a race fills an entry twice with equal values)
        self._per_api: dict[int, tuple[str]] = {}
        #: id of a segment file -> (a weak reference to it, its ``topic`` label values): written by the
        #: first thread to send from the file, dropped by the reference's callback when the file is
        #: released (retention deleted the segment); read without a lock (one dict lookup, atomic). A
        #: lookup checks that the reference still points at the file, so an id reused after the file's
        #: release never finds the old file's topic. (A WeakKeyDictionary's lookup makes a weak reference
        #: each time: twice the cost.)
        self._per_file: dict[int, tuple[weakref.ref[FileHandle], tuple[str]]] = {}
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        yield self.total_time.count_family(
            "kafka_network_requestmetrics_requests", "Requests answered, per API"
        )
        yield self.total_time.family()
        yield self.bytes_out.family()
        yield self.flush_time.family()

    def answered(self, api_key: int, seconds: float) -> None:
        labels = self._per_api.get(api_key)
        if labels is None:
            labels = self._per_api[api_key] = (request_name(api_key),)
        self.total_time.observe(labels, seconds)

    def flushed(self, _partition: TopicPartition, seconds: float) -> None:
        self.flush_time.observe((), seconds)

    def sent_region(self, region: FileRegion) -> None:
        file = region.file
        found = self._per_file.get(id(file))
        if found is None or found[0]() is not file:
            found = self._remember_file(file)
        self.bytes_out.inc(found[1], region.size_bytes)

    def _remember_file(self, file: FileHandle) -> tuple[weakref.ref[FileHandle], tuple[str]]:
        key = id(file)
        per_file = self._per_file

        def forget(ref: weakref.ref[FileHandle]) -> None:
            # runs while the file is being released, before its id can be reused: no newer entry yet
            if per_file.get(key, (None,))[0] is ref:
                per_file.pop(key, None)

        topic = file.path.parent.name.rsplit("-", 1)[0]  # <topic>-<partition>/<segment>.log
        found = per_file[key] = (weakref.ref(file, forget), (topic,))
        return found


class MeteredRequestChannel(RequestChannel):
    """A :class:`RequestChannel` that counts and times every answer, and the log bytes Fetch answers send."""

    def __init__(self, metrics: BrokerMetrics, queue_size: int = 500) -> None:
        super().__init__(queue_size)
        self.metrics = metrics

    def send_response(self, response: NetworkResponse) -> None:
        request = response.request
        frame = request.frame
        if len(frame) >= 2:
            self.metrics.answered(
                int.from_bytes(frame[:2], "big", signed=True),
                (time.monotonic_ns() - request.received_ns) / 1e9,
            )
        for chunk in response.chunks:
            if type(chunk) is FileRegion:
                self.metrics.sent_region(chunk)
        super().send_response(response)


class BrokerCollector(Collector):
    """What the broker holds, read at scrape time: appends since start, logs, purgatory, connections."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        purgatory: Purgatory,
        network_stats: Callable[[], dict[str, int]],
        *,
        replicas: ReplicaManager | None = None,
        controller_active: Callable[[], bool] = lambda: False,
        fetch_sessions: FetchSessionCache | None = None,
        controller_stats: Callable[[], ControllerStats | None] = lambda: None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.purgatory = purgatory
        self.network_stats = network_stats
        self.replicas = replicas
        self.controller_active = controller_active
        self.controller_stats = controller_stats
        self.fetch_sessions = fetch_sessions
        self._lock = threading.Lock()
        #: per partition: the log end offset and {segment base offset: size} seen last
        self._seen: dict[TopicPartition, tuple[int, dict[int, int]]] = {}
        self._messages_in: dict[str, int] = {}
        self._bytes_in: dict[str, int] = {}
        for log in logs.all_logs():  # what was there before this broker started is not "in"
            self._seen[log.topic_partition] = (
                log.log_end_offset,
                {s.base_offset: s.size_bytes for s in log.segments},
            )

    def _led(self) -> set[TopicPartition]:
        """The partitions this broker leads (all of them when it has no replica manager: tests)."""
        if self.replicas is None:
            return {log.topic_partition for log in self.logs.all_logs()}
        return {p.topic_partition for p in self.replicas.partitions() if p.is_leader}

    def _count_appends(self) -> None:
        led = self._led()
        live: set[TopicPartition] = set()
        for log in self.logs.all_logs():
            tp = log.topic_partition
            live.add(tp)
            end = log.log_end_offset
            sizes = {s.base_offset: s.size_bytes for s in log.segments}
            seen_end, seen_sizes = self._seen.get(tp, (log.log_start_offset, {}))
            self._seen[tp] = (end, sizes)
            if tp not in led:
                continue  # a follower's appends are the leader's messages in, counted there
            grown = sum(max(size - seen_sizes.get(base, 0), 0) for base, size in sizes.items())
            self._messages_in[tp.topic] = self._messages_in.get(tp.topic, 0) + max(end - seen_end, 0)
            self._bytes_in[tp.topic] = self._bytes_in.get(tp.topic, 0) + grown
        for gone in [tp for tp in self._seen if tp not in live]:
            del self._seen[gone]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            self._count_appends()
            messages_in = dict(self._messages_in)
            bytes_in = dict(self._bytes_in)
        topic_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin", "Messages appended, per topic", labels=["topic"]
        )
        topic_bytes = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin", "Bytes appended, per topic", labels=["topic"]
        )
        for topic in sorted(messages_in):
            topic_in.add_metric([topic], messages_in[topic])
            topic_bytes.add_metric([topic], bytes_in[topic])
        yield topic_in
        yield topic_bytes
        yield from self._logs()
        labels = ["broker"]
        broker = [str(self.broker_id)]
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Produce and Fetch requests waiting in the purgatory",
            labels=["delayedOperation"],
        )
        purgatory.add_metric(["All"], self.purgatory.pending())
        yield purgatory
        stats = self.network_stats()
        connections = GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count", "Open client connections", labels=labels
        )
        connections.add_metric(broker, stats.get("connections_open", 0))
        yield connections
        io = CounterMetricFamily(
            "kafka_server_socketservermetrics_network_io",
            "Bytes of requests received and responses sent, size prefixes included",
            labels=["direction"],
        )
        io.add_metric(["in"], stats.get("request_bytes", 0))
        io.add_metric(["out"], stats.get("response_bytes", 0))
        yield io
        if self.fetch_sessions is not None:
            yield from self._fetch_sessions(self.fetch_sessions)

    @staticmethod
    def _fetch_sessions(cache: FetchSessionCache) -> Iterator[Metric]:
        sessions = GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions", "Fetch sessions (KIP-227) cached"
        )
        sessions.add_metric([], cache.size)
        yield sessions
        partitions = GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions in the cached fetch sessions",
        )
        partitions.add_metric([], cache.partitions_cached)
        yield partitions
        evictions = CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Fetch sessions evicted to make room for others",
        )
        evictions.add_metric([], cache.evictions)
        yield evictions

    def _reassignments(
        self, moves: dict[Partition, tuple[PartitionReassignment, dict[int, int]]]
    ) -> Iterator[Metric]:
        """Moves of partitions led here (Kafka's ReassigningPartitions), each new replica's bytes left to
        copy, and the replication throttle (rates and bytes copied under it)."""
        reassigning = GaugeMetricFamily(
            "kafka_server_replicamanager_reassigningpartitions",
            "Partitions led here that are being reassigned",
        )
        reassigning.add_metric([], len(moves))
        left = GaugeMetricFamily(
            "lumber_reassignment_bytes_left",
            "Bytes a replica being added still has to copy (estimated from its offsets), partitions led here",
            labels=["topic", "partition", "replica"],
        )
        for partition, (_r, by_replica) in sorted(moves.items(), key=lambda m: m[0].topic_partition):
            tp = partition.topic_partition
            for replica, size in sorted(by_replica.items()):
                left.add_metric([tp.topic, str(tp.partition), str(replica)], size)
        rate = GaugeMetricFamily(
            "lumber_replication_throttle_rate_bytes",
            "The replication throttle's rate on this broker, bytes/s (0: none)",
            labels=["side"],
        )
        copied = CounterMetricFamily(
            "lumber_replication_throttled_bytes",
            "Bytes copied under the replication throttle",
            labels=["side"],
        )
        replicas = self.replicas
        if replicas is not None:
            throttle = replicas.throttle
            snapshot = throttle.snapshot if throttle is not None else None
            rate.add_metric(["leader"], (snapshot.leader_rate or 0) if snapshot else 0)
            rate.add_metric(["follower"], (snapshot.follower_rate or 0) if snapshot else 0)
            copied.add_metric(["leader"], replicas.leader_quota.recorded_bytes)
            copied.add_metric(["follower"], replicas.follower_quota.recorded_bytes)
        yield from (reassigning, left, rate, copied)

    def _cleaner(self) -> Iterator[Metric]:
        """The log cleaner's figures, under the JMX exporter's names of Kafka's LogCleaner metrics."""
        cleaner = self.logs.cleaner
        totals = cleaner.totals
        dirty = GaugeMetricFamily(
            "kafka_log_logcleanermanager_max_dirty_percent",
            "The largest dirty share of a compacted log at the cleaner's last choice",
        )
        dirty.add_metric([], 100.0 * cleaner.manager.max_dirty_ratio)
        recopy = GaugeMetricFamily(
            "kafka_log_logcleaner_cleaner_recopy_percent", "Bytes written as a share of bytes read, last pass"
        )
        recopy.add_metric([], totals.last.recopy_percent)
        passes = CounterMetricFamily("lumber_log_cleaner_passes", "Cleaning passes finished")
        passes.add_metric([], totals.passes)
        yield from (dirty, recopy, passes)

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log", labels=labels)
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of the partition's log", labels=labels
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "The partition's log start offset", labels=labels
        )
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset", labels=labels)
        high = GaugeMetricFamily(
            "kafka_log_log_highwatermark", "The partition's high watermark", labels=labels
        )
        logs = sorted(self.logs.all_logs(), key=lambda log: log.topic_partition)
        for log in logs:
            tp = log.topic_partition
            values = [tp.topic, str(tp.partition)]
            size.add_metric(values, log.size_bytes)
            segments.add_metric(values, len(log.segments))
            start.add_metric(values, log.log_start_offset)
            end.add_metric(values, log.log_end_offset)
            high.add_metric(values, log.high_watermark)
        yield from (size, segments, start, end, high)
        yield from self._cleaner()
        count = GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions on this broker")
        count.add_metric([], len(logs))
        partitions = [] if self.replicas is None else self.replicas.partitions()
        led = [p for p in partitions if p.is_leader]
        leaders = GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions this broker leads")
        leaders.add_metric([], len(led) if self.replicas is not None else len(logs))
        under = GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here with fewer in-sync replicas than replicas",
        )
        moves = {} if self.replicas is None else self.replicas.reassignments_led()
        adding = {p.topic_partition: len(r.adding) for p, (r, _left) in moves.items()}
        under.add_metric(
            [], sum(1 for p in led if len(p.isr) < len(p.replicas) - adding.get(p.topic_partition, 0))
        )
        under_min = GaugeMetricFamily(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas (acks=all refused)",
        )
        under_min.add_metric([], sum(1 for p in led if len(p.isr) < p.min_insync_replicas))
        max_lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "The most messages a partition followed here is behind its leader's high watermark",
            labels=["clientId"],
        )
        max_lag.add_metric(
            ["Replica"], max((p.follower_lag for p in partitions if not p.is_leader), default=0)
        )
        stats = self.controller_stats()
        offline = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "On the active controller: partitions without a live leader (0 on the other brokers)",
        )
        offline.add_metric([], 0 if stats is None else stats.offline_partitions)
        elections = CounterMetricFamily(
            "kafka_controller_controllerstats_leaderelections",
            "Leaders this broker elected as controller (a partition given a new live leader)",
        )
        elections.add_metric([], 0 if stats is None else stats.leader_elections)
        yield from self._reassignments(moves)
        shrinks = CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks this broker wrote as leader"
        )
        expands = CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands", "ISR expansions this broker wrote as leader"
        )
        shrinks.add_metric([], 0 if self.replicas is None else self.replicas.isr_shrinks)
        expands.add_metric([], 0 if self.replicas is None else self.replicas.isr_expands)
        active = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount", "1 while this broker is the controller"
        )
        active.add_metric([], 1 if self.controller_active() else 0)
        yield from (count, leaders, under, under_min, max_lag, shrinks, expands, active, offline, elections)
