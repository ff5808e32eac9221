"""The producer's settings: the ``[producer]`` section of ``lumber.toml``.

Names and defaults follow Apache Kafka's producer where Lumber has the same knob (``batch.size`` is
``batch_size``), except ``batch_size`` and ``linger_ms``, which default higher so that a Python producer
under load sends fewer, larger requests. This module must not import :mod:`pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from broker.client.errors import ClientConfigError
from broker.client.settings import check_limits, check_servers

Acks = Literal["0", "1", "all"]
CompressionName = Literal["none", "gzip", "snappy", "lz4", "zstd"]

MIB = 1024 * 1024
#: Kafka's bound for an idempotent producer: the broker remembers a producer's last five batches.
MAX_IDEMPOTENT_IN_FLIGHT = 5


@dataclass(frozen=True)
class ProducerConfig:
    """Lumber's producer: batching, acknowledgements, compression, buffering and retries."""

    bootstrap_servers: list[str] = field(
        default_factory=list,
        metadata={
            "doc": "Brokers (host:port) to learn the cluster from with Metadata requests. Empty: learn it "
            "from ZooKeeper ([zookeeper] connect), the paper's way."
        },
    )
    client_id: str = field(default="lumber-producer", metadata={"doc": "Client id sent with every request."})
    acks: Acks = field(
        default="all",
        metadata={
            "doc": "'0': no response (the paper's asynchronous producer, offsets unknown); '1': the leader "
            "appended the batch; 'all': every in-sync replica has it (Kafka's default; idempotence needs "
            "it).",
            "choices": ("0", "1", "all"),
        },
    )
    enable_idempotence: bool = field(
        default=True,
        metadata={
            "doc": "Kafka's idempotent producer (KIP-98, on by default as in Kafka): the producer gets a "
            "producer id from the brokers and stamps a sequence number on every batch, so that a retried "
            "batch is stored once and a partition's batches stay in order. Needs acks = 'all' and "
            "max_in_flight_requests_per_connection <= 5; set false to use acks '0' or '1'.",
        },
    )
    compression_type: CompressionName = field(
        default="none",
        metadata={
            "doc": "Codec of every batch: none, gzip, snappy, lz4 or zstd.",
            "choices": ("none", "gzip", "snappy", "lz4", "zstd"),
        },
    )
    batch_size: int = field(
        default=128 * 1024,
        metadata={
            "doc": "A partition's batch is sent once its records reach this many bytes (uncompressed). A "
            "record larger than this gets a batch of its own.",
            "min": 1,
            "max": 2**31 - 1,
        },
    )
    linger_ms: int = field(
        default=5,
        metadata={
            "doc": "How long a batch that is not full waits for more records before it is sent.",
            "min": 0,
        },
    )
    buffer_memory: int = field(
        default=32 * MIB,
        metadata={
            "doc": "Bytes of records the producer holds before they are acknowledged; send() blocks when "
            "they are all taken (backpressure) and raises after max_block_ms.",
            "min": 1024,
        },
    )
    max_block_ms: int = field(
        default=60_000,
        metadata={
            "doc": "How long send() waits for buffer space or for a topic's metadata before raising.",
            "min": 0,
        },
    )
    max_request_size: int = field(
        default=MIB,
        metadata={
            "doc": "Largest Produce request in bytes; also the largest record the producer accepts.",
            "min": 1024,
            "max": 2**31 - 1,
        },
    )
    max_in_flight_requests_per_connection: int = field(
        default=5,
        metadata={
            "doc": "Produce requests sent to one broker without waiting for their responses. Without "
            "idempotence and with more than 1, a retried batch may land after a later one; with it, at most "
            "5, and a partition has one batch in flight at a time, so its order holds.",
            "min": 1,
        },
    )
    request_timeout_ms: int = field(
        default=30_000,
        metadata={
            "doc": "How long to wait for a response; then the connection is closed and the request retried.",
            "min": 1,
        },
    )
    delivery_timeout_ms: int = field(
        default=120_000,
        metadata={
            "doc": "A record not acknowledged this long after send() fails with DeliveryTimeoutError.",
            "min": 1,
        },
    )
    retries: int = field(
        default=2**31 - 1,
        metadata={
            "doc": "How often a batch is resent after a retriable error (within delivery_timeout_ms).",
            "min": 0,
        },
    )
    retry_backoff_ms: int = field(
        default=100, metadata={"doc": "Pause before a failed batch or metadata request is retried.", "min": 0}
    )
    connect_timeout_ms: int = field(
        default=10_000, metadata={"doc": "How long connecting to a broker may take.", "min": 1}
    )
    metadata_max_age_ms: int = field(
        default=300_000,
        metadata={"doc": "Learn the cluster again at least this often, even without errors.", "min": 0},
    )
    allow_auto_topic_creation: bool = field(
        default=True,
        metadata={
            "doc": "Ask brokers to create a topic the producer writes to that does not exist (brokers "
            "still apply their own auto-create switch)."
        },
    )
    host_name: str = field(
        default="",
        metadata={"doc": "Value of the 'host' header on every record. Empty: this machine's host name."},
    )
    audit_interval_ms: int = field(
        default=0,
        metadata={
            "doc": "Publish this producer's audit counts (paper section 4: messages the brokers confirmed, "
            "per topic and window of creation time) to audit_topic every this many ms, and on close. 0: "
            "the producer does not audit.",
            "min": 0,
        },
    )
    audit_window_ms: int = field(
        default=600_000,
        metadata={
            "doc": "Width of the audit windows (by record timestamp). Keep it equal to [load] window_ms "
            "(or a divisor of the window the audit reports in).",
            "min": 1000,
        },
    )
    audit_topic: str = field(
        default="_audit", metadata={"doc": "Topic the audit events go to (never counted itself)."}
    )
    audit_topic_partitions: int = field(
        default=1,
        metadata={
            "doc": "Partitions of audit_topic when an audit publisher creates it: producers, mirrors and "
            "load jobs create it if it is missing, as Kafka creates its internal topics, whatever [broker] "
            "auto_create_topics says. An existing audit topic is used as it is.",
            "min": 1,
            "max": 10_000,
        },
    )
    audit_registry_url: str = field(
        default="http://127.0.0.1:8081",
        metadata={
            "doc": "Schema registry where the audit event schema is registered (subject "
            "'<audit_topic>-value'); the same as [registry] url in a Lumber deployment."
        },
    )

    def __post_init__(self) -> None:
        check_limits(self)
        check_servers("producer", self.bootstrap_servers)
        if self.enable_idempotence and self.acks != "all":
            raise ClientConfigError(
                f"ProducerConfig: enable_idempotence = true needs acks = 'all', got acks = '{self.acks}'; "
                "set enable_idempotence = false to produce with acks '0' or '1'"
            )
        if self.enable_idempotence and self.max_in_flight_requests_per_connection > MAX_IDEMPOTENT_IN_FLIGHT:
            raise ClientConfigError(
                "ProducerConfig: enable_idempotence = true allows at most "
                f"{MAX_IDEMPOTENT_IN_FLIGHT} max_in_flight_requests_per_connection, got "
                f"{self.max_in_flight_requests_per_connection}; lower it or set enable_idempotence = false"
            )
        if self.audit_interval_ms > 0 and not (self.audit_topic and self.audit_registry_url):
            raise ClientConfigError(
                "ProducerConfig: audit_interval_ms > 0 needs an audit_topic and an audit_registry_url"
            )

    @property
    def acks_value(self) -> int:
        """``acks`` as the Produce request's int16: 0, 1 or -1."""
        return -1 if self.acks == "all" else int(self.acks)
