"""One partition this broker holds a replica of (Kafka's ``Partition``): its log and its replica state.

The :class:`~broker.server.replica_manager.ReplicaManager` keeps one :class:`Partition` per local log and
reaches the log only through it: :meth:`Partition.append_records_to_leader` is the one call of
:meth:`broker.log.log.Log.append` in the broker (Produce, and the processors' pipelined ``acks=0`` runs);
reads go through :meth:`Partition.read` and :meth:`Partition.fetch_offset_for_timestamp`.

The offsets a partition answers with::

    log_start_offset <= high_watermark <= log_end_offset      acknowledged_offset <= log_end_offset

* ``high_watermark``: what consumers may read. Today it is the log's exposure point (the flushed offset
  with ``[log] expose = "flushed"``, the log end with ``"appended"``). With replication (issue 19) it is
  the lowest log end offset of the ISR, which the leader advances as followers report their fetch
  offsets (Kafka's ``maybeIncrementLeaderHW``), capped by the exposure point, since the paper's flush rule
  still applies on top of it.
* ``acknowledged_offset``: every offset below it is held by every in-sync replica, so an ``acks=-1``
  Produce whose batches end at or below it is answered (Kafka's ``checkEnoughReplicasReachOffset``).
  Today the ISR is the leader alone, so it is the log end offset, or the flushed offset with
  ``[log] flush_on_ack`` (acks=-1 waits for the fsync, group commit). With replication it is the
  high watermark; the same method then refuses with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR has
  shrunk below ``min_insync_replicas`` meanwhile.

Where replication lands here (issue 19): the leader epoch and the ISR, both from the partition's state
znode (written by the controller and, for ISR changes, by this leader with a conditional update); the
remote replicas' log end offsets and last caught-up times (updated by the followers' Fetch requests, read
by the ISR shrink check); ``append_records_to_leader`` first refuses an ``acks=-1`` append with
NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min_insync_replicas`` and stamps the leader epoch in the
batches; a follower's appends (the leader's batches, offsets unchanged) get their own method beside it,
so that the leader path keeps its validation and offset assignment.

Concurrency: a partition holds no lock of its own. Its log is thread-safe (one append lock; readers take
none, see :mod:`broker.log.log`); the partition's fields are set once, in the constructor. Replica state
added with replication must be guarded where it is written (Kafka: the partition's leader-ISR read-write
lock, taken for reading by appends and for writing by leadership and ISR changes).
"""

from __future__ import annotations

from broker.log.file_region import FileRegion
from broker.log.log import AppendInfo, Buffer, Log
from broker.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from broker.record.topic_partition import TopicPartition
from broker.server.errors import InvalidRequestError


class Partition:
    """The replica of ``log``'s partition on this broker, which leads it (see the module docstring)."""

    __slots__ = ("log", "topic_partition")

    def __init__(self, log: Log) -> None:
        self.log = log
        self.topic_partition: TopicPartition = log.topic_partition

    @property
    def high_watermark(self) -> int:
        """Consumers read below it (see the module docstring)."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def closed(self) -> bool:
        """The log was closed or deleted (its topic deleted, or the broker stopping)."""
        return self.log.closed

    @property
    def flush_on_ack(self) -> bool:
        """Whether an ``acks=-1`` append waits for the fsync of its batches (``[log] flush_on_ack``)."""
        return self.log.config.flush_on_ack

    def append_records_to_leader(self, records: Buffer) -> AppendInfo:
        """Append a producer's batches: validated, offsets assigned from the log end (the one path into
        :meth:`Log.append`; it raises the log's errors, with nothing appended)."""
        return self.log.append(records)

    def acknowledged_offset(self) -> int:
        """Every in-sync replica holds the offsets below it (see the module docstring)."""
        log = self.log
        return log.flushed_offset if log.config.flush_on_ack else log.log_end_offset

    def request_flush(self, offset: int) -> None:
        """Ask for the offsets below ``offset`` to be fsynced now (``flush_on_ack``: group commit)."""
        self.log.request_flush(offset)

    def read(self, fetch_offset: int, max_bytes: int) -> FileRegion | None:
        """Whole batches from ``fetch_offset``, below the high watermark (:meth:`Log.read`)."""
        return self.log.read(fetch_offset, max_bytes)

    def fetch_offset_for_timestamp(self, timestamp: int) -> int:
        """ListOffsets: the log start for -2, the high watermark for -1, else the first offset whose
        timestamp is at or after ``timestamp`` (-1 when there is none)."""
        log = self.log
        if timestamp == EARLIEST_TIMESTAMP:
            return log.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return log.high_watermark
        if timestamp < 0:
            raise InvalidRequestError(f"timestamp {timestamp} is not -1, -2 or a time")
        found = log.offset_for_timestamp(timestamp)
        return -1 if found is None else found

    def __repr__(self) -> str:
        return f"Partition({self.log!r})"
