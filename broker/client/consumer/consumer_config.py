"""The consumer's settings: the ``[consumer]`` section of ``lumber.toml``.

Names and defaults follow Apache Kafka's consumer where Lumber has the same knob (``fetch.max.wait.ms`` is
``fetch_max_wait_ms``). ``auto_offset_reset`` says ``earliest`` and ``latest`` as Kafka does today (and as
``[load] start`` does); the paper-era ``smallest`` and ``largest`` are still read, with a warning. This
module must not import :mod:`pipeline`.

The security keys (``security_protocol``, ``sasl_*``, ``ssl_*``) are :mod:`broker.client.security_settings`'s,
shared by every client section.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import field_validator, model_validator

from broker.client.errors import ClientConfigError
from broker.client.security_settings import SecuritySettings
from broker.client.settings import check_servers
from broker.config_section import renamed_choice, setting

OffsetReset = Literal["earliest", "latest", "none"]
#: the paper-era names of the resets, still accepted with a warning
OLD_OFFSET_RESETS = {"smallest": "earliest", "largest": "latest"}

MIB = 1024 * 1024


class ConsumerConfig(SecuritySettings):
    """Lumber's consumer of explicit partitions: fetch sizes, waiting, prefetching and offset resets."""

    error_type = ClientConfigError

    bootstrap_servers: list[str] = setting(
        [],
        "Brokers (host:port) to learn the cluster from with Metadata requests. Empty: learn it "
        "from ZooKeeper ([zookeeper] connect).",
    )
    client_id: str = setting("lumber-consumer", "Client id sent with every request.")
    auto_offset_reset: OffsetReset = setting(
        "latest",
        "Where to start when a partition has no position or its position is outside the log: "
        "'earliest' (the log start), 'latest' (the end: only new messages) or 'none' (raise). The "
        "paper-era 'smallest' and 'largest' are read as 'earliest' and 'latest', with a warning.",
    )
    fetch_min_bytes: int = setting(
        1, "The broker answers a fetch once it has this many bytes (or fetch_max_wait_ms).", ge=0
    )
    fetch_max_wait_ms: int = setting(
        500, "How long the broker may hold a fetch while fewer than fetch_min_bytes are there.", ge=0
    )
    fetch_max_bytes: int = setting(50 * MIB, "Bytes one fetch response may hold over all partitions.", ge=1)
    max_partition_fetch_bytes: int = setting(
        MIB,
        "Bytes one fetch may return per partition; a single larger batch is fetched again with "
        "room for it (up to fetch_max_bytes).",
        ge=1,
    )
    max_prefetch_bytes: int = setting(
        16 * MIB, "Fetched bytes the consumer buffers ahead of the caller; fetching pauses above this.", ge=1
    )
    check_crcs: bool = setting(
        True, "Verify each fetched batch's CRC-32C; a mismatch raises CorruptBatchError."
    )
    iterator_timeout_ms: int = setting(
        -1, "Iterating over the consumer ends after this long without a message; -1 waits forever.", ge=-1
    )
    request_timeout_ms: int = setting(
        30_000, "How long to wait for a response before closing the connection and retrying.", ge=1
    )
    retry_backoff_ms: int = setting(100, "Pause before a failed fetch or metadata request is retried.", ge=0)
    connect_timeout_ms: int = setting(10_000, "How long connecting to a broker may take.", ge=1)
    metadata_max_age_ms: int = setting(
        300_000, "Learn the cluster again at least this often, even without errors.", ge=0
    )

    @field_validator("auto_offset_reset", mode="before")
    @classmethod
    def _old_reset_names(cls, value: object) -> object:
        return renamed_choice(value, OLD_OFFSET_RESETS, "consumer.auto_offset_reset")

    @model_validator(mode="after")
    def _check(self) -> Self:
        check_servers("consumer", self.bootstrap_servers)
        if self.request_timeout_ms <= self.fetch_max_wait_ms:
            raise ValueError(
                f"consumer.request_timeout_ms ({self.request_timeout_ms}) must exceed "
                f"consumer.fetch_max_wait_ms ({self.fetch_max_wait_ms}), or every long poll times out"
            )
        return self
