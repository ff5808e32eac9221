"""The fetcher's state of one assigned partition: positions, buffered chunks, retry and reset state.

``position <= fetch_offset``: the next offset the caller gets, and the next one to ask the broker for;
between them, the batches already fetched, as :class:`FetchChunk` s (what one fetch gave). The meaning of
every field and how responses change them is :mod:`broker.client.consumer.fetcher`'s docstring. Thread safety:
the fetcher's lock guards every instance.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from broker.client.errors import ClientError
from broker.record.record_batch import RecordBatch
from broker.record.topic_partition import TopicPartition

__all__ = ["FetchChunk", "PartitionFetchState"]


@dataclass
class FetchChunk:
    """What one fetch gave for one partition: whole batches, then maybe an error to raise after them."""

    epoch: int
    batches: deque[RecordBatch]
    size_bytes: int
    error: ClientError | None = None


class PartitionFetchState:
    """One assigned partition as the fetcher tracks it (see :mod:`broker.client.consumer.fetcher`)."""

    __slots__ = (
        "chunks",
        "epoch",
        "error_pending",
        "fetch_bytes",
        "fetch_offset",
        "high_watermark",
        "in_flight",
        "leaderless_at_version",
        "log_start_offset",
        "position",
        "reset",
        "retry_at",
        "tp",
    )

    def __init__(self, tp: TopicPartition, reset: str | None) -> None:
        self.tp = tp
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.epoch = 0
        self.chunks: deque[FetchChunk] = deque()
        self.in_flight = False
        #: 'smallest' or 'largest' while a reset is due; 'none' means the caller must seek
        self.reset = reset
        #: an error chunk is queued: do not fetch until the caller took it
        self.error_pending = False
        self.retry_at = 0.0
        self.fetch_bytes = 0
        self.high_watermark = -1
        self.log_start_offset = -1
        #: the metadata version in which no leader was found (-1: not waiting for one)
        self.leaderless_at_version = -1

    def fetchable(self, now: float) -> bool:
        return (
            self.fetch_offset is not None
            and not self.in_flight
            and not self.error_pending
            and self.reset is None
            and self.retry_at <= now
        )
