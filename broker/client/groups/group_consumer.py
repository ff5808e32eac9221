"""A member of a consumer group (ZooKeeper's, paper section 3.2, or Kafka's): the application's API.

Two ways to consume, as in the paper and as in later Kafka::

    with GroupConsumer("audit", zookeeper_connect="127.0.0.1:2181", consumer_config=settings) as member:
        streams = member.create_message_streams({"events": 2})   # {"events": [stream, stream]}
        for record in streams["events"][0]:                       # never ends: blocks for new messages
            handle(record)

    with GroupConsumer("audit", zookeeper_connect="127.0.0.1:2181") as member:
        member.subscribe(["events", "clicks"])
        while True:
            for record in member.poll(timeout_ms=1000):           # the records of the last poll() count
                handle(record)                                    # as consumed at the next poll()
            member.commit()                                       # optional: auto-commit is on by default

The group gives each partition of the subscribed topics to exactly one stream of one member; members join
and leave at any time, and partitions move between them with their committed offsets (how, and what is
guaranteed: :mod:`broker.client.groups.zookeeper.group_membership`). A partition without a committed offset
starts where the consumer's ``auto_offset_reset`` says (``earliest`` or ``latest``).

Delivery is at least once: offsets are committed every ``auto_commit_interval_ms`` (consumed records
only: those handed out before the application came back for more), by :meth:`GroupConsumer.commit`, and
whenever a partition moves; a member that crashes has its uncommitted records delivered again to the next
owner. An application that finishes records out of step with its polls (the mirror: sends in flight)
creates its streams with ``explicit_positions=True`` and says how far it got, per partition, with
:meth:`MessageStream.acknowledge` or ``commit(offsets)``; only those positions are ever committed
(:mod:`broker.client.consumer.message_stream`). Rewinding (:meth:`GroupConsumer.seek`,
:meth:`GroupConsumer.seek_to_time`) moves the whole group's offsets, whoever owns the partitions.

With ``[group] protocol = "kafka"`` (``GroupConfig(protocol="kafka")``) the same API speaks Kafka's group
protocol to the brokers' group coordinator instead (:mod:`broker.client.groups.kafka.kafka_group_membership`),
so Lumber members and Kafka clients can share a group; offsets are then committed to ``__consumer_offsets``,
and ``zookeeper_connect`` may be left out when ``[consumer] bootstrap_servers`` names the brokers.
What differs: :meth:`GroupConsumer.seek` moves this member's own position only (Kafka's ``seek``: the
next commit stores it), of partitions it owns; :attr:`GroupConsumer.zookeeper` and
:attr:`GroupConsumer.generation` are the ZooKeeper member's only (:attr:`GroupConsumer.generation_id` is
both's).

Thread safety: each stream is read by one application thread at a time; the other methods may be called
from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType

from kazoo.client import KazooClient

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import GroupClosedError, GroupError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.kafka.kafka_group_membership import KafkaGroupMembership
from broker.client.groups.partition_assignor import StreamKey
from broker.client.groups.rebalance_listener import RebalanceListener
from broker.client.groups.zookeeper.group_assignment import GroupAssignment
from broker.client.groups.zookeeper.group_membership import GroupMembership
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.cluster import zk_paths
from broker.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition


class GroupConsumer:
    """One member of consumer group ``group`` (see the module docstring)."""

    def __init__(
        self,
        group: str,
        *,
        zookeeper_connect: str | None = None,
        config: GroupConfig | None = None,
        consumer_config: ConsumerConfig | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        try:
            zk_paths.group_path(group)
        except ValueError as exc:
            raise GroupError(str(exc)) from None
        self.group = group
        self.config = config if config is not None else GroupConfig()
        self.consumer_config = consumer_config if consumer_config is not None else ConsumerConfig()
        if not zookeeper_connect and (
            self.config.protocol == "zookeeper" or not self.consumer_config.bootstrap_servers
        ):
            raise GroupError(
                f"group {group}: needs zookeeper_connect (a zookeeper group, or no [consumer] "
                "bootstrap_servers to learn the cluster from)"
            )
        self._zookeeper_connect = zookeeper_connect
        self._listener = listener
        self._cond = threading.Condition(threading.RLock())
        self._membership: GroupMembership | KafkaGroupMembership | None = None
        self._streams: list[MessageStream] = []
        self._poll_stream: MessageStream | None = None
        self._subscription: dict[str, int] = {}
        self._closed = False

    # ------------------------------------------------------------------------------ subscribing

    def create_message_streams(
        self, topic_counts: Mapping[str, int], *, explicit_positions: bool = False
    ) -> dict[str, list[MessageStream]]:
        """Join the group with ``topic_counts[t]`` streams of each topic ``t``; returns them by topic.

        Each stream is an iterator that never ends (it blocks until new messages arrive); read each from
        its own thread. Call once per member. With ``explicit_positions`` a record counts as consumed
        only once acknowledged (:meth:`MessageStream.acknowledge`, :meth:`commit` with offsets), never by
        coming back for more.
        """
        counts = dict(topic_counts)
        explicit = explicit_positions
        for topic, count in counts.items():
            validate_topic_name(topic)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise GroupError(f"topic {topic!r}: need at least one stream, got {count!r}")
        keyed: dict[StreamKey, MessageStream] = {}
        for topic, count in sorted(counts.items()):
            for number in range(count):
                keyed[(topic, number)] = MessageStream(
                    f"{topic}-{number}", self._new_consumer(), self._cond, explicit_positions=explicit
                )
        self._start(counts, keyed)
        return {topic: [keyed[(topic, number)] for number in range(count)] for topic, count in counts.items()}

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join the group for ``topics``, to be read with :meth:`poll` (one stream over all of them)."""
        names = [topics] if isinstance(topics, str) else sorted(set(topics))
        if not names:
            raise GroupError("subscribe() needs at least one topic")
        for topic in names:
            validate_topic_name(topic)
        stream = MessageStream("poll", self._new_consumer(), self._cond)
        self._poll_stream = stream
        self._start(dict.fromkeys(names, 1), {(topic, 0): stream for topic in names})

    def _start(self, subscription: dict[str, int], streams: dict[StreamKey, MessageStream]) -> None:
        if self._closed:
            raise GroupClosedError(f"group {self.group}: the member is closed")
        if self._membership is not None:
            raise GroupError(f"group {self.group}: this member is already subscribed to {self._subscription}")
        self._subscription = subscription
        self._streams = list({id(s): s for s in streams.values()}.values())
        membership: GroupMembership | KafkaGroupMembership
        if self.config.protocol == "kafka":
            membership = KafkaGroupMembership(
                self.group,
                self.config,
                self.consumer_config,
                self._zookeeper_connect,
                subscription,
                streams,
                self._cond,
                self._listener,
            )
        else:
            if self._zookeeper_connect is None:  # checked in __init__
                raise GroupError(f"group {self.group}: needs zookeeper_connect")
            membership = GroupMembership(
                self.group,
                self.config,
                self._zookeeper_connect,
                subscription,
                streams,
                self._cond,
                self._listener,
            )
        self._membership = membership
        try:
            membership.start()
        except GroupError:
            self._close_streams()
            self._membership = None
            raise

    def _new_consumer(self) -> Consumer:
        settings = self.consumer_config
        return Consumer(
            settings, zookeeper_connect=None if settings.bootstrap_servers else self._zookeeper_connect
        )

    # ------------------------------------------------------------------------------ reading (poll style)

    def poll(self, timeout_ms: int | None = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records of the subscribed topics (see :meth:`MessageStream.poll`); needs :meth:`subscribe`."""
        return self._the_poll_stream().poll(timeout_ms, max_records)

    def messages(self, timeout_ms: int | None = None) -> Iterator[ConsumerRecord]:
        """Every record of the subscribed topics as it arrives (see :meth:`MessageStream.messages`)."""
        return self._the_poll_stream().messages(timeout_ms)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return iter(self._the_poll_stream())

    def _the_poll_stream(self) -> MessageStream:
        if self._poll_stream is None:
            raise GroupError(f"group {self.group}: poll() needs subscribe() (streams are read on their own)")
        return self._poll_stream

    # ------------------------------------------------------------------------------ offsets

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit every record handed out so far, on every stream; with ``offsets``, commit exactly
        those positions instead (each partition's next offset to consume: it is acknowledged on its
        stream first, see :meth:`MessageStream.acknowledge`), and the consumed positions of the other
        partitions. Raises :class:`~broker.client.errors.GroupError` for a partition this member's
        streams do not have or an offset past what was handed out, and
        :class:`~broker.client.errors.CommitFailedError` if the member's session expired since the last
        commit (those records go to the partitions' next owners) or ZooKeeper is unreachable."""
        membership = self._member()
        if offsets is None:
            membership.commit()
            return
        with self._cond:
            by_stream: dict[int, tuple[MessageStream, dict[TopicPartition, int]]] = {}
            for tp, offset in offsets.items():
                stream = next((s for s in self._streams if tp in s.partitions()), None)
                if stream is None:
                    raise GroupError(
                        f"group {self.group}: cannot commit {tp} at offset {offset}: none of this member's "
                        f"streams has it (it owns {sorted(self._member().owned())})"
                    )
                by_stream.setdefault(id(stream), (stream, {}))[1][tp] = offset
        for stream, stream_offsets in by_stream.values():
            stream.acknowledge(stream_offsets)
        membership.commit(mark_consumed=False)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Rewind (or skip) the whole group's consumption of ``tp`` to ``offset``."""
        self.seek_many({tp: offset})

    def seek_many(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Set the whole group's offsets; every owner goes on from them (this member before returning).
        A kafka-protocol member moves its own position in partitions it owns (Kafka's ``seek``)."""
        membership = self._member()
        if isinstance(membership, KafkaGroupMembership):
            membership.seek(dict(offsets))
            return
        membership.offsets.rewind(dict(offsets), requested_by=f"rewind by {membership.member_id}")
        membership.reload_offsets()

    def seek_to_beginning(self, *partitions: TopicPartition) -> dict[TopicPartition, int]:
        """Rewind the group to the log start of ``partitions`` (default: every subscribed partition; a
        kafka-protocol member: its own partitions)."""
        return self._seek_to(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *partitions: TopicPartition) -> dict[TopicPartition, int]:
        """Move the group to the end of ``partitions`` (default: every subscribed partition)."""
        return self._seek_to(partitions, LATEST_TIMESTAMP)

    def seek_to_time(self, timestamp_ms: int, *partitions: TopicPartition) -> dict[TopicPartition, int]:
        """Rewind the group to the first record at or after ``timestamp_ms`` of each partition (default:
        every subscribed partition; the log end where there is none). Returns the new offsets."""
        if timestamp_ms < 0:
            raise GroupError(f"seek_to_time needs a timestamp >= 0, got {timestamp_ms}")
        return self._seek_to(partitions, timestamp_ms)

    def _seek_to(self, partitions: tuple[TopicPartition, ...], timestamp: int) -> dict[TopicPartition, int]:
        if isinstance(self._member(), KafkaGroupMembership):  # Kafka's: the member's own partitions
            targets = list(partitions) or self.assignment()
        else:
            targets = list(partitions) or self.subscribed_partitions()
        lookup = self._lookup()
        if timestamp >= 0:
            found = lookup.offsets_for_times(dict.fromkeys(targets, timestamp))
            missing = [tp for tp, offset in found.items() if offset is None]
            ends = lookup.end_offsets(missing) if missing else {}
            offsets = {tp: (ends[tp] if offset is None else offset) for tp, offset in found.items()}
        elif timestamp == EARLIEST_TIMESTAMP:
            offsets = lookup.beginning_offsets(targets)
        else:
            offsets = lookup.end_offsets(targets)
        self.seek_many(offsets)
        return dict(sorted(offsets.items()))

    def subscribed_partitions(self) -> list[TopicPartition]:
        """Every partition of the subscribed topics, as the brokers know them now."""
        lookup = self._lookup()
        return sorted(tp for topic in sorted(self._subscription) for tp in lookup.partitions_for(topic))

    def _lookup(self) -> Consumer:
        self._member()
        return self._streams[0].consumer

    # ------------------------------------------------------------------------------ state

    @property
    def member_id(self) -> str:
        """This member's id in the group (a new one after its session expired and it joined again)."""
        return self._member().member_id

    @property
    def generation(self) -> GroupAssignment | None:
        """The latest generation this member has read (ZooKeeper groups)."""
        return self._zookeeper_member().generation

    @property
    def generation_id(self) -> int:
        """The number of this member's generation (-1: none yet)."""
        membership = self._member()
        if isinstance(membership, KafkaGroupMembership):
            return membership.generation_id
        generation = membership.generation
        return -1 if generation is None else generation.generation

    @property
    def coordinator(self) -> BrokerAddress | None:
        """The broker coordinating a kafka-protocol group, as this member last found it (None: looking)."""
        membership = self._member()
        if not isinstance(membership, KafkaGroupMembership):
            raise GroupError(f"group {self.group}: a zookeeper group has no coordinator broker")
        return membership.coordinator

    @property
    def is_leader(self) -> bool:
        return self._member().is_leader

    def assignment(self) -> list[TopicPartition]:
        """The partitions this member owns (their owner nodes are its own)."""
        return sorted(self._member().owned())

    def target(self) -> dict[TopicPartition, int]:
        """What the latest generation gives this member: partition -> stream number."""
        return self._member().target()

    def fetching(self) -> set[TopicPartition]:
        """What this member's streams are fetching right now."""
        with self._cond:
            found: set[TopicPartition] = set()
            for stream in self._streams:
                found |= stream.fetching()
            return found

    @property
    def streams(self) -> list[MessageStream]:
        """This member's streams (one, over every subscribed topic, after :meth:`subscribe`)."""
        return list(self._streams)

    @property
    def condition(self) -> threading.Condition:
        """The member's condition: the member changes what it fetches only while holding it, so holding it
        freezes :meth:`fetching` (for invariant checkers). Never hold it across a blocking call."""
        return self._cond

    @property
    def zookeeper(self) -> KazooClient:
        """The member's kazoo client (its session is the member's)."""
        return self._zookeeper_member().client

    def _zookeeper_member(self) -> GroupMembership:
        membership = self._member()
        if isinstance(membership, KafkaGroupMembership):
            raise GroupError(
                f'group {self.group}: a [group] protocol = "kafka" member has no zookeeper state'
            )
        return membership

    def _member(self) -> GroupMembership | KafkaGroupMembership:
        if self._closed:
            raise GroupClosedError(f"group {self.group}: the member is closed")
        if self._membership is None:
            raise GroupError(
                f"group {self.group}: not subscribed yet (create_message_streams() or subscribe())"
            )
        return self._membership

    # ------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Commit what was handed out, release the partitions, leave the group. Idempotent; readers
        blocked on a stream get :class:`~broker.client.errors.GroupClosedError` (iterators end)."""
        if self._closed:
            return
        self._closed = True
        membership = self._membership
        if membership is not None:
            membership.close()
        self._close_streams()

    def _close_streams(self) -> None:
        for stream in self._streams:
            stream.close_consumer()

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
