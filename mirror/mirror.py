"""The mirror: embedded consumers that copy topics of one cluster into another (paper section 4).

LinkedIn ran one cluster per live datacenter and one beside Hadoop; the offline cluster "runs a set of
embedded consumers to pull data from the Kafka instances in the live datacenters". A :class:`Mirror` is a
member of consumer group ``group`` on the *source* cluster and a producer on the *target* cluster::

    mirror = Mirror(MirrorConfig(topics="page_view|click"), source_zookeeper="zk-live:2181",
                    target_zookeeper="zk-offline:2181")
    mirror.start()          # topics made on the target, the group joined, one thread per stream
    ...
    mirror.close()          # finish the sends in flight, commit what the target acknowledged, audit, leave

Run it with ``lumber mirror`` (:mod:`lumber.cli.mirror`).

**Topics.** The source topics whose whole name matches ``topics`` are mirrored: those there when
:meth:`Mirror.start` runs, and those created later, found every ``topic_refresh_ms`` (each new set joins
the group as one more member of this process, with ``streams`` streams per topic). Each is created on the
target with the same partition count (an existing one must have it:
:class:`~mirror.mirror_errors.TopicMismatchError`; partitions added to a source topic later are not
followed), and each record goes to the same partition.

**Batches pass through.** Each stream (:class:`~mirror.mirror_stream.MirrorStream`, on its own thread)
takes whole fetched batches from the source and sends each, byte for byte, to the same partition of the
target (:meth:`~broker.client.producer.producer.Producer.send_batch`): keys, values, timestamps, headers and
compression are kept because nothing is decoded; the target assigns the offsets. The source's producer
ids mean nothing on the target (and could collide with the target's own), so a batch that carries one is
sent with its producer id, epoch and sequence cleared (-1, the CRC recomputed). The mirror's producer is
not idempotent: a request carries many batches per partition, more than the five a broker remembers per
idempotent producer, and at-least-once is the mirror's contract anyway (see below). Only a batch that cannot
go as it is (the committed position falls inside it, too large for the producer, refused by the target)
is re-encoded, with the same record fields. The mirror adds no header.

**Delivery: at least once, pipelined.** A stream never waits for one send before the next: it keeps taking
batches while earlier ones are in flight, up to ``max_in_flight_records`` / ``max_in_flight_bytes`` not
yet acknowledged. The target acknowledges with ``acks=all`` (one request in flight per broker, so a
partition's batches land in order); per partition, in the order sent, the position after the last
*contiguous* acknowledged record is what the group may commit (the streams have explicit positions,
:mod:`broker.client.consumer.message_stream`): every ``[group] auto_commit_interval_ms``, when a partition
moves (the group first waits ``release_timeout_ms`` for the partition's sends in flight; what is still not
acknowledged then is not committed), and on close. So a killed mirror loses nothing: the partition's next
owner starts at the last committed offset and copies again what was copied since (duplicates on the
target, at most one commit interval plus the in-flight window per stream). A send that fails after the
producer's retries is sent again, with the partition's later ones, after ``send_retry_backoff_ms``, until
the target takes it. Several mirror processes in one group share the partitions; when one dies its
partitions move to the others after its ZooKeeper session expires.

**Throughput.** A Lumber broker acknowledges ``acks=all`` once the records are flushed (``[log] flush_ms``
/ ``flush_messages`` on the target), and answers one request per connection at a time: each round trip
carries every partition's queued batches (consecutive raw batches of a partition travel together up to
``[producer] batch_size``, a request up to ``max_request_size``). Raise those two for the mirror's
producer, and ``streams`` up to the partition count, for more.

**Audit.** With ``audit_interval_ms`` > 0, what the target acknowledged is counted per topic and window of
each record's timestamp, once per source offset (journaled under ``[audit] state_dir``, so exact across a
``kill -9``: :mod:`mirror.mirror_audit` says what it cannot count), and published to ``audit_topic`` on
the target as tier ``mirror``, which the audit emitter creates on the target if it is missing (``[audit]
topic_partitions``: ``producer_config.audit_topic_partitions``; :mod:`broker.client.producer.internal_topic`).

Thread safety: :meth:`start` and :meth:`close` from one controlling thread; the properties from any.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.message_stream import MessageStream
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.cluster.errors import ClusterError, TopicExistsError, ZooKeeperError
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zookeeper_auth import new_zookeeper_client
from mirror.mirror_audit import MirrorAuditEmitter
from mirror.mirror_config import MirrorConfig
from mirror.mirror_errors import MirrorConfigError, MirrorError, TopicMismatchError
from mirror.mirror_stream import MirrorStream
from schemas.client import RegistryClientSettings

log = logging.getLogger(__name__)

_ZK_TIMEOUT_S = 15.0


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
        registry: RegistryClientSettings | None = None,
    ) -> None:
        """``registry`` (``[registry]``) makes the audit's registry client (its credentials and CA file;
        the URL is ``config.audit_registry_url``): needed when ``config.audit_interval_ms`` is above 0."""
        config.check_audit()
        if config.audit_interval_ms > 0 and registry is None:
            raise MirrorConfigError(
                "MirrorConfig: audit_interval_ms > 0 needs the registry's client settings ([registry]: "
                "registry=)"
            )
        self.registry = registry
        if not config.topics:
            raise MirrorConfigError("MirrorConfig.topics: no topics to mirror (an empty regular expression)")
        self.config = config
        self.source_zookeeper = source_zookeeper
        self.target_zookeeper = target_zookeeper
        consumer = consumer_config if consumer_config is not None else ConsumerConfig()
        # The source is named by its ZooKeeper: bootstrap servers in the config are the other cluster's.
        self.consumer_config = consumer.replace(bootstrap_servers=[])
        self.group_config = group_config if group_config is not None else GroupConfig()
        producer = producer_config if producer_config is not None else ProducerConfig()
        self._host = producer.host_name or socket.gethostname()
        self.producer_config = producer.replace(
            bootstrap_servers=[],
            acks="all",
            enable_idempotence=False,  # many batches per partition and request (see the module docstring)
            max_in_flight_requests_per_connection=1,  # a partition's batches land in order
            audit_interval_ms=0,  # the mirror counts as its own tier, never as the producer tier
            host_name=self._host,
        )
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._streams: list[MirrorStream] = []
        self._members: list[GroupConsumer] = []
        self._producer: Producer | None = None
        self._audit: MirrorAuditEmitter | None = None
        self._topics: dict[str, int] = {}
        self._refresher: threading.Thread | None = None
        self._copied = 0
        self._failure: BaseException | None = None
        self._drain_deadline = float("inf")
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------------------ starting

    def start(self) -> dict[str, int]:
        """Create the topics on the target, join the group, start the streams (and the topic refresh);
        returns topic -> partitions of the topics mirrored from the start."""
        if self._started or self._closed:
            raise MirrorError("a Mirror starts once")
        self._started = True
        topics = self._matching_topics()
        if not topics and self.config.topic_refresh_ms == 0:
            raise MirrorError(
                f"no topic of the source cluster ({self.source_zookeeper}) matches {self.config.topics!r}"
            )
        self._producer = Producer(self.producer_config, zookeeper_connect=self.target_zookeeper)
        if self.config.audit_interval_ms > 0:
            audit_settings = self.producer_config.replace(
                client_id=f"mirror-{self.config.group}",
                audit_interval_ms=self.config.audit_interval_ms,
                audit_window_ms=self.config.audit_window_ms,
                audit_topic=self.config.audit_topic,
                audit_registry_url=self.config.audit_registry_url,
                audit_state_dir=self.config.audit_state_dir,
            )
            if self.registry is None:  # pragma: no cover - refused in __init__
                raise MirrorConfigError("MirrorConfig: an audit needs the registry's client settings")
            self._audit = MirrorAuditEmitter(
                self._producer, audit_settings, self._host, registry=self.registry
            )
        if topics:
            self._mirror_topics(topics)
        else:
            log.warning(
                "mirror %s: no topic of %s matches %r yet; looking again every %d ms",
                self.config.group,
                self.source_zookeeper,
                self.config.topics,
                self.config.topic_refresh_ms,
            )
        if self.config.topic_refresh_ms > 0:
            self._refresher = threading.Thread(
                target=self._refresh_topics, name="lumber-mirror-topics", daemon=True
            )
            self._refresher.start()
        return dict(topics)

    def _matching_topics(self) -> dict[str, int]:
        """The source topics matching ``topics``, with their partition counts."""
        with _admin(self.source_zookeeper) as source:
            return {t: len(source.describe_topic(t)) for t in source.list_topics() if self.config.matches(t)}

    def _mirror_topics(self, topics: dict[str, int]) -> None:
        """Create ``topics`` on the target, then join the group for them with a member of their own."""
        self._create_on_target(topics)
        member = GroupConsumer(
            self.config.group,
            zookeeper_connect=self.source_zookeeper,
            config=self.group_config,
            consumer_config=self.consumer_config,
        )
        streams = member.create_message_streams(
            dict.fromkeys(topics, self.config.streams), explicit_positions=True
        )
        with self._lock:
            self._members.append(member)
            self._topics.update(topics)
        for topic_streams in streams.values():
            for stream in topic_streams:
                self._start_stream(stream)
        log.info(
            "mirror %s: copying %s from %s to %s",
            self.config.group,
            ", ".join(f"{t} ({n} partitions)" for t, n in sorted(topics.items())),
            self.source_zookeeper,
            self.target_zookeeper,
        )

    def _create_on_target(self, topics: dict[str, int]) -> None:
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

    def _start_stream(self, stream: MessageStream) -> None:
        producer = self._producer
        if producer is None:  # pragma: no cover - streams start after the producer
            raise MirrorError("the mirror is not started")
        copier = MirrorStream(
            stream,
            producer,
            self.config,
            stopping=self._stopping,
            audit=None if self._audit is None else self._audit.mirror_counter,
            on_copied=self._count_copied,
            drain_deadline=lambda: self._drain_deadline,
        )
        thread = threading.Thread(
            target=self._run_stream, args=(copier,), name=f"lumber-mirror-{stream.name}", daemon=True
        )
        with self._lock:
            self._streams.append(copier)
            self._threads.append(thread)
        thread.start()

    def _refresh_topics(self) -> None:
        """The refresher thread: mirror the source topics that appeared since the last look."""
        interval_s = self.config.topic_refresh_ms / 1000
        while not self._stopping.wait(interval_s):
            try:
                found = self._matching_topics()
                new = {t: n for t, n in found.items() if t not in self._topics}
                if new and not self._stopping.is_set():
                    self._mirror_topics(new)
            except TopicMismatchError as exc:
                self._fail(exc)
                return
            except (ClusterError, KazooException, KazooTimeoutError, MirrorError) as exc:
                log.warning(
                    "mirror %s: looking for new topics failed: %s; trying again", self.config.group, exc
                )
            except Exception as exc:  # the thread's top loop: the mirror stops, never silently
                log.exception("mirror %s: looking for new topics failed", self.config.group)
                self._fail(exc)
                return

    # ------------------------------------------------------------------------------ copying

    def _run_stream(self, copier: MirrorStream) -> None:
        try:
            copier.run()
        except BaseException as exc:
            log.exception("mirror stream %s failed; the mirror stops", copier.stream.name)
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = exc
        self._stopping.set()

    def _count_copied(self, records: int) -> None:
        with self._lock:
            self._copied += records

    # ------------------------------------------------------------------------------ state

    @property
    def topics(self) -> dict[str, int]:
        """The mirrored topics and their partition counts (after :meth:`start`)."""
        with self._lock:
            return dict(self._topics)

    @property
    def copied(self) -> int:
        """Records the target acknowledged so far (duplicates included)."""
        with self._lock:
            return self._copied

    @property
    def streams(self) -> list[MirrorStream]:
        """Every stream of this process (one per topic set joined and stream number)."""
        with self._lock:
            return list(self._streams)

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped a stream, if one did (the mirror then stops: call :meth:`close`)."""
        with self._lock:
            return self._failure

    @property
    def group(self) -> GroupConsumer:
        """The group member of the topics mirrored from the start (the first one joined)."""
        with self._lock:
            if not self._members:
                raise MirrorError("the mirror has not joined the group yet")
            return self._members[0]

    @property
    def members(self) -> list[GroupConsumer]:
        """This process's group members: one per set of topics found (at the start, then by the refresh)."""
        with self._lock:
            return list(self._members)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the mirror stops by itself (a stream failed: ``True``) or ``timeout_s`` passes."""
        return self._stopping.wait(timeout_s)

    # ------------------------------------------------------------------------------ closing

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop taking from the source, wait (up to ``timeout_s``) for the sends in flight, commit what the
        target acknowledged (never more), publish the last audit counts, leave the group. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self._drain_deadline = deadline
        self._stopping.set()
        if self._refresher is not None:
            self._refresher.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            threads = list(self._threads)
            members = list(self._members)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            log.error("mirror %s: streams still running at close: %s", self.config.group, stuck)
        try:
            if self._audit is not None:
                self._audit.close(max(0.0, deadline - time.monotonic()))
                recopied = self._audit.counter.recopied
                if recopied:
                    log.info(
                        "mirror %s: %d records copied again after a restart were not counted again "
                        "(the target holds them twice; the audit counts source records once)",
                        self.config.group,
                        recopied,
                    )
        finally:
            try:
                for member in members:
                    member.close()  # commits the acknowledged positions only (explicit positions)
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
    client = new_zookeeper_client(hosts=connect, timeout=_ZK_TIMEOUT_S)
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
