"""The mirror: embedded consumers that copy topics of one cluster into another (paper section 4).

LinkedIn ran one cluster per live datacenter and one beside Hadoop; the offline cluster "runs a set of
embedded consumers to pull data from the Kafka instances in the live datacenters". A :class:`Mirror` is a
member of consumer group ``group`` on the *source* cluster and a producer on the *target* cluster::

    mirror = Mirror(MirrorConfig(topics="page_view|click"), source_zookeeper="zk-live:2181",
                    target_zookeeper="zk-offline:2181")
    mirror.start()          # topics made on the target, the group joined, one thread per stream
    ...
    mirror.close()          # finish the records in hand, commit them, publish the last audit counts

Run it with ``lumber mirror`` (:mod:`pipeline.cli.mirror`).

**Topics.** The source topics whose whole name matches ``topics`` when :meth:`Mirror.start` runs are
mirrored (a topic created later needs a restart). Each is created on the target with the same partition
count (an existing one must have it: :class:`~broker.mirror_errors.TopicMismatchError`), and each record
goes to the same partition with its key, timestamp and headers. The records are re-sent one by one through
the :class:`~broker.client.producer.Producer`, which re-batches them: it has no pass-through of raw record
batches. A record without a ``host`` header gets the mirror's host (the producer adds one).

**Delivery: at least once.** Each stream (``streams`` per topic, each on its own thread) repeats:

1. ``poll`` up to ``max_records_per_poll`` records; this marks the previous ones as *consumed*;
2. send them to the target with ``acks=all`` and one request in flight per broker (so a partition's
   records land in order), ``flush``, and check every record's outcome;
3. if the target failed some (after the producer's own retries), send again from the first failure on, after
   ``send_retry_backoff_ms``, until all are acknowledged; only then count them for the audit and go back
   to 1.

The group commits only consumed offsets (``[group] auto_commit_interval_ms``, and when a partition moves),
so an offset is committed only after the target acknowledged its record, and a killed mirror loses
nothing: the partition's next owner starts at the last committed offset and copies again what was copied
since (duplicates on the target, at most one commit interval plus one poll per partition). Several mirror
processes in one group share the partitions; when one dies its partitions move to the others after its
ZooKeeper session expires. A target failure that outlasts :meth:`Mirror.close` leaves the process without
committing (the group is not left cleanly, the session expires): the next owner copies again.

**Throughput.** A stream waits for the target's acknowledgement of each poll before the next one, and a
Lumber broker acknowledges ``acks=all`` once the records are flushed (``[log] flush_ms`` /
``flush_messages`` on the target), so each stream copies at most about ``max_records_per_poll`` records
per target flush interval: raise ``streams`` (up to the partition count) and ``max_records_per_poll``, or
lower the target's ``flush_ms``, for more.

**Audit.** With ``audit_interval_ms`` > 0, what the target acknowledged is counted per topic and window
and published to ``audit_topic`` on the target as tier ``mirror`` (:mod:`broker.mirror_audit`).

Thread safety: :meth:`start` and :meth:`close` from one controlling thread; the properties from any.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.consumer_config import ConsumerConfig
from broker.client.consumer_record import ConsumerRecord
from broker.client.errors import ClientError, GroupClosedError
from broker.client.group_config import GroupConfig
from broker.client.group_consumer import GroupConsumer
from broker.client.message_stream import MessageStream
from broker.client.producer import Producer
from broker.client.producer_batch import RecordFuture
from broker.client.producer_config import ProducerConfig
from broker.cluster.errors import TopicExistsError, ZooKeeperError
from broker.cluster.topic_admin import TopicAdmin
from broker.mirror_audit import MirrorAuditEmitter
from broker.mirror_config import MirrorConfig
from broker.mirror_errors import MirrorError, TopicMismatchError

log = logging.getLogger(__name__)

_ZK_TIMEOUT_S = 15.0


class _UnacknowledgedError(MirrorError):
    """A stream stopped while the target had not acknowledged records it holds."""


class Mirror:
    """Copies the matching topics of a source cluster into a target cluster; see the module docstring."""

    def __init__(
        self,
        config: MirrorConfig,
        *,
        source_zookeeper: str,
        target_zookeeper: str,
        consumer_config: ConsumerConfig | None = None,
        group_config: GroupConfig | None = None,
        producer_config: ProducerConfig | None = None,
    ) -> None:
        self.config = config
        self.source_zookeeper = source_zookeeper
        self.target_zookeeper = target_zookeeper
        consumer = consumer_config if consumer_config is not None else ConsumerConfig()
        # The source is named by its ZooKeeper: bootstrap servers in the config are the other cluster's.
        self.consumer_config = dataclasses.replace(consumer, bootstrap_servers=[])
        self.group_config = group_config if group_config is not None else GroupConfig()
        producer = producer_config if producer_config is not None else ProducerConfig()
        self._host = producer.host_name or socket.gethostname()
        self.producer_config = dataclasses.replace(
            producer,
            bootstrap_servers=[],
            acks="all",
            max_in_flight_requests_per_connection=1,  # a partition's records land in order
            audit_interval_ms=0,  # the mirror counts as its own tier, never as the producer tier
            host_name=self._host,
        )
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._group: GroupConsumer | None = None
        self._producer: Producer | None = None
        self._audit: MirrorAuditEmitter | None = None
        self._topics: dict[str, int] = {}
        self._copied = 0
        self._unacknowledged = False
        self._failure: BaseException | None = None
        self._closed = False

    # ------------------------------------------------------------------------------ starting

    def start(self) -> dict[str, int]:
        """Create the topics on the target, join the group, start the streams; returns topic -> partitions."""
        if self._group is not None or self._closed:
            raise MirrorError("a Mirror starts once")
        topics = self._prepare_topics()
        if not topics:
            raise MirrorError(
                f"no topic of the source cluster ({self.source_zookeeper}) matches {self.config.topics!r}"
            )
        self._topics = topics
        self._producer = Producer(self.producer_config, zookeeper_connect=self.target_zookeeper)
        if self.config.audit_interval_ms > 0:
            audit_settings = dataclasses.replace(
                self.producer_config,
                client_id=f"mirror-{self.config.group}",
                audit_interval_ms=self.config.audit_interval_ms,
                audit_window_ms=self.config.audit_window_ms,
                audit_topic=self.config.audit_topic,
                audit_registry_url=self.config.audit_registry_url,
            )
            self._audit = MirrorAuditEmitter(self._producer, audit_settings, self._host)
        self._group = GroupConsumer(
            self.config.group,
            zookeeper_connect=self.source_zookeeper,
            config=self.group_config,
            consumer_config=self.consumer_config,
        )
        streams = self._group.create_message_streams(dict.fromkeys(topics, self.config.streams))
        for topic_streams in streams.values():
            for stream in topic_streams:
                thread = threading.Thread(
                    target=self._run_stream, args=(stream,), name=f"lumber-mirror-{stream.name}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        log.info(
            "mirror %s: copying %s from %s to %s",
            self.config.group,
            ", ".join(f"{t} ({n} partitions)" for t, n in sorted(topics.items())),
            self.source_zookeeper,
            self.target_zookeeper,
        )
        return dict(topics)

    def _prepare_topics(self) -> dict[str, int]:
        """The matching source topics with their partition counts, each present on the target alike."""
        with _admin(self.source_zookeeper) as source:
            topics = {
                t: len(source.describe_topic(t)) for t in source.list_topics() if self.config.matches(t)
            }
        with _admin(self.target_zookeeper) as target:
            existing = set(target.list_topics())
            for topic, partitions in sorted(topics.items()):
                if topic not in existing:
                    try:
                        target.create_topic(topic, partitions)
                        log.info("mirror: created %s with %d partitions on the target", topic, partitions)
                        continue
                    except TopicExistsError:
                        pass  # another mirror process created it meanwhile
                found = len(target.describe_topic(topic))
                if found != partitions:
                    raise TopicMismatchError(
                        f"topic {topic!r} has {partitions} partitions on the source "
                        f"({self.source_zookeeper}) but {found} on the target ({self.target_zookeeper}); the "
                        "mirror keeps partitions, "
                        "so the counts must be equal"
                    )
        return topics

    # ------------------------------------------------------------------------------ copying

    def _run_stream(self, stream: MessageStream) -> None:
        config = self.config
        try:
            while not self._stopping.is_set():
                try:
                    records = stream.poll(
                        timeout_ms=config.poll_timeout_ms, max_records=config.max_records_per_poll
                    )
                except GroupClosedError:
                    return
                if records:
                    self._copy(records)
        except _UnacknowledgedError as exc:
            log.error("mirror stream %s: %s", stream.name, exc)  # noqa: TRY400 - expected, no traceback
            with self._lock:
                self._unacknowledged = True
        except BaseException as exc:
            log.exception("mirror stream %s failed; the mirror stops", stream.name)
            with self._lock:
                self._unacknowledged = True
                if self._failure is None:
                    self._failure = exc
            self._stopping.set()

    def _copy(self, records: Sequence[ConsumerRecord]) -> None:
        """Send ``records`` until the target acknowledged all of them (see the module docstring)."""
        producer = self._producer
        if producer is None:  # pragma: no cover - threads start after the producer
            raise MirrorError("the mirror is not started")
        pending = records
        while True:
            futures: list[RecordFuture] = []
            error: BaseException | None = None
            for record in pending:
                try:
                    futures.append(
                        producer.send(
                            record.topic,
                            record.value,
                            record.key,
                            partition=record.partition,
                            headers=record.headers,
                            timestamp_ms=record.timestamp_ms,
                        )
                    )
                except ClientError as exc:
                    error = exc
                    break
            producer.flush()
            failed = len(futures)
            for index, future in enumerate(futures):
                outcome = future.exception()
                if outcome is not None:
                    failed, error = index, outcome
                    break
            if error is None:
                break
            pending = pending[failed:]
            log.warning(
                "mirror: the target did not take %d records (from %s-%d offset %d): %s; sending them again",
                len(pending),
                pending[0].topic,
                pending[0].partition,
                pending[0].offset,
                error,
            )
            if self._stopping.wait(self.config.send_retry_backoff_ms / 1000):
                raise _UnacknowledgedError(
                    f"stopped with {len(pending)} records not acknowledged by the target; their offsets are "
                    "not committed"
                )
        if self._audit is not None:
            self._audit.mirror_counter.copied(records)
        with self._lock:
            self._copied += len(records)

    # ------------------------------------------------------------------------------ state

    @property
    def topics(self) -> dict[str, int]:
        """The mirrored topics and their partition counts (after :meth:`start`)."""
        return dict(self._topics)

    @property
    def copied(self) -> int:
        """Records the target acknowledged so far (duplicates included)."""
        with self._lock:
            return self._copied

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped a stream, if one did (the mirror then stops: call :meth:`close`)."""
        with self._lock:
            return self._failure

    @property
    def group(self) -> GroupConsumer:
        if self._group is None:
            raise MirrorError("the mirror is not started")
        return self._group

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until a stream fails (``True``) or ``timeout_s`` passes (``False``)."""
        return self._stopping.wait(timeout_s)

    # ------------------------------------------------------------------------------ closing

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop the streams once their records in hand are acknowledged, commit, publish the last audit
        counts, leave the group. If some records could not be acknowledged, nothing more is committed and
        the group is not left cleanly (its session expires). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        with self._lock:
            unsafe = self._unacknowledged or bool(stuck)
        try:
            if self._audit is not None:
                self._audit.close(max(0.0, deadline - time.monotonic()))
        finally:
            try:
                if self._group is not None:
                    if unsafe:
                        log.error(
                            "mirror %s: leaving without a final commit (records not acknowledged by the "
                            "target%s); the next owners copy them again",
                            self.config.group,
                            f"; streams still running: {stuck}" if stuck else "",
                        )
                        self._group.zookeeper.stop()
                    else:
                        self._group.close()
            finally:
                if self._producer is not None:
                    self._producer.close(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Mirror:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@contextmanager
def _admin(connect: str) -> Iterator[TopicAdmin]:
    """A :class:`TopicAdmin` over a kazoo client of its own, stopped on exit."""
    client = KazooClient(hosts=connect, timeout=_ZK_TIMEOUT_S)
    try:
        client.start(timeout=_ZK_TIMEOUT_S)
    except (KazooTimeoutError, KazooException) as exc:
        client.close()
        raise ZooKeeperError(
            f"zookeeper {connect}: cannot connect: {exc!r}", path="/", retriable=True
        ) from exc
    try:
        yield TopicAdmin(client)
    finally:
        client.stop()
        client.close()
