"""The consumer's settings: the ``[consumer]`` section of ``lumber.toml``.

Names and defaults follow Apache Kafka's consumer where Lumber has the same knob (``fetch.max.wait.ms`` is
``fetch_max_wait_ms``); ``auto_offset_reset`` uses the paper-era words ``smallest`` and ``largest``. This
module must not import :mod:`pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from broker.client.errors import ClientConfigError
from broker.client.settings import check_limits, check_servers

OffsetReset = Literal["smallest", "largest", "none"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class ConsumerConfig:
    """Lumber's consumer of explicit partitions: fetch sizes, waiting, prefetching and offset resets."""

    bootstrap_servers: list[str] = field(
        default_factory=list,
        metadata={
            "doc": "Brokers (host:port) to learn the cluster from with Metadata requests. Empty: learn it "
            "from ZooKeeper ([zookeeper] connect)."
        },
    )
    client_id: str = field(default="lumber-consumer", metadata={"doc": "Client id sent with every request."})
    auto_offset_reset: OffsetReset = field(
        default="largest",
        metadata={
            "doc": "Where to start when a partition has no position or its position is outside the log: "
            "'smallest' (the log start), 'largest' (the end: only new messages) or 'none' (raise).",
            "choices": ("smallest", "largest", "none"),
        },
    )
    fetch_min_bytes: int = field(
        default=1,
        metadata={
            "doc": "The broker answers a fetch once it has this many bytes (or fetch_max_wait_ms).",
            "min": 0,
        },
    )
    fetch_max_wait_ms: int = field(
        default=500,
        metadata={
            "doc": "How long the broker may hold a fetch while fewer than fetch_min_bytes are there.",
            "min": 0,
        },
    )
    fetch_max_bytes: int = field(
        default=50 * MIB,
        metadata={"doc": "Bytes one fetch response may hold over all partitions.", "min": 1},
    )
    max_partition_fetch_bytes: int = field(
        default=MIB,
        metadata={
            "doc": "Bytes one fetch may return per partition; a single larger batch is fetched again with "
            "room for it (up to fetch_max_bytes).",
            "min": 1,
        },
    )
    max_prefetch_bytes: int = field(
        default=16 * MIB,
        metadata={
            "doc": "Fetched bytes the consumer buffers ahead of the caller; fetching pauses above this.",
            "min": 1,
        },
    )
    check_crcs: bool = field(
        default=True,
        metadata={"doc": "Verify each fetched batch's CRC-32C; a mismatch raises CorruptBatchError."},
    )
    iterator_timeout_ms: int = field(
        default=-1,
        metadata={
            "doc": "Iterating over the consumer ends after this long without a message; -1 waits forever.",
            "min": -1,
        },
    )
    request_timeout_ms: int = field(
        default=30_000,
        metadata={
            "doc": "How long to wait for a response before closing the connection and retrying.",
            "min": 1,
        },
    )
    retry_backoff_ms: int = field(
        default=100, metadata={"doc": "Pause before a failed fetch or metadata request is retried.", "min": 0}
    )
    connect_timeout_ms: int = field(
        default=10_000, metadata={"doc": "How long connecting to a broker may take.", "min": 1}
    )
    metadata_max_age_ms: int = field(
        default=300_000,
        metadata={"doc": "Learn the cluster again at least this often, even without errors.", "min": 0},
    )

    def __post_init__(self) -> None:
        check_limits(self)
        check_servers("consumer", self.bootstrap_servers)
        if self.request_timeout_ms <= self.fetch_max_wait_ms:
            raise ClientConfigError(
                f"consumer.request_timeout_ms ({self.request_timeout_ms}) must exceed "
                f"consumer.fetch_max_wait_ms ({self.fetch_max_wait_ms}), or every long poll times out"
            )
