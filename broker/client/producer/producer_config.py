"""The producer's settings: the ``[producer]`` section of ``lumber.toml``.

Names and defaults follow Apache Kafka's producer where Lumber has the same knob (``batch.size`` is
``batch_size``), except ``batch_size`` and ``linger_ms``, which default higher so that a Python producer
under load sends fewer, larger requests. This module must not import :mod:`pipeline`.

The security keys (``security_protocol``, ``sasl_*``, ``ssl_*``) are :mod:`broker.client.security_settings`'s,
shared by every client section.

The audit keys the producer needs are one key each elsewhere: ``audit_topic``, ``audit_window_ms`` and
``audit_topic_partitions`` and ``audit_state_dir`` are ``[audit] topic``, ``window_ms``,
``topic_partitions`` and ``state_dir``;
``audit_registry_url`` is ``[registry] url``. They are derived keys
(:func:`~broker.config_section.setting`): the composite config fills them in, and the old ``[producer]``
keys in a file are read as the new ones with a warning.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from broker.client.errors import ClientConfigError
from broker.client.security_settings import SecuritySettings
from broker.client.settings import check_servers
from broker.config_section import codec_level, setting

Acks = Literal["0", "1", "all"]
CompressionName = Literal["none", "gzip", "snappy", "lz4", "zstd"]

MIB = 1024 * 1024
#: Kafka's bound for an idempotent producer: the broker remembers a producer's last five batches.
MAX_IDEMPOTENT_IN_FLIGHT = 5


class ProducerConfig(SecuritySettings):
    """Lumber's producer: batching, acknowledgements, compression, buffering and retries."""

    error_type = ClientConfigError

    bootstrap_servers: list[str] = setting(
        [],
        "Brokers (host:port) to learn the cluster from with Metadata requests. Empty: learn it "
        "from ZooKeeper ([zookeeper] connect), the paper's way.",
    )
    client_id: str = setting("lumber-producer", "Client id sent with every request.")
    acks: Acks = setting(
        "all",
        "'0': no response (the paper's asynchronous producer, offsets unknown); '1': the leader "
        "appended the batch; 'all': every in-sync replica has it (Kafka's default; idempotence needs "
        "it).",
    )
    enable_idempotence: bool = setting(
        True,
        "Kafka's idempotent producer (KIP-98, on by default as in Kafka): the producer gets a "
        "producer id from the brokers and stamps a sequence number on every batch, so that a retried "
        "batch is stored once and a partition's batches stay in order. Needs acks = 'all' and "
        "max_in_flight_requests_per_connection <= 5; set false to use acks '0' or '1'.",
    )
    compression_type: CompressionName = setting(
        "none", "Codec of every batch: none, gzip, snappy, lz4 or zstd."
    )
    compression_gzip_level: int = setting(
        -1,
        "The level of gzip batches (Kafka's compression.gzip.level, KIP-390): 1 (fastest) to 9 (smallest), "
        "or -1, zlib's default (6).",
        ge=-1,
        le=9,
    )
    compression_lz4_level: int = setting(
        9,
        "The level of lz4 batches (Kafka's compression.lz4.level): 1 to 17; the default 9 is lz4's fast "
        "compressor (Kafka's), another level its high compressor.",
        ge=1,
        le=17,
    )
    compression_zstd_level: int = setting(
        3,
        "The level of zstd batches (Kafka's compression.zstd.level): -131072 (fastest) to 22 (smallest).",
        ge=-131072,
        le=22,
    )
    batch_size: int = setting(
        128 * 1024,
        "A partition's batch is sent once its records reach this many bytes (uncompressed). A "
        "record larger than this gets a batch of its own.",
        ge=1,
        le=2**31 - 1,
    )
    linger_ms: int = setting(
        5, "How long a batch that is not full waits for more records before it is sent.", ge=0
    )
    buffer_memory: int = setting(
        32 * MIB,
        "Bytes of records the producer holds before they are acknowledged; send() blocks when "
        "they are all taken (backpressure) and raises after max_block_ms.",
        ge=1024,
    )
    max_block_ms: int = setting(
        60_000, "How long send() waits for buffer space or for a topic's metadata before raising.", ge=0
    )
    max_request_size: int = setting(
        MIB,
        "Largest Produce request in bytes; also the largest record the producer accepts.",
        ge=1024,
        le=2**31 - 1,
    )
    max_in_flight_requests_per_connection: int = setting(
        5,
        "Produce requests sent to one broker without waiting for their responses. Without "
        "idempotence and with more than 1, a retried batch may land after a later one; with it, at most "
        "5, and a partition has one batch in flight at a time, so its order holds.",
        ge=1,
    )
    request_timeout_ms: int = setting(
        30_000,
        "How long to wait for a response; then the connection is closed and the request retried.",
        ge=1,
    )
    delivery_timeout_ms: int = setting(
        120_000, "A record not acknowledged this long after send() fails with DeliveryTimeoutError.", ge=1
    )
    retries: int = setting(
        2**31 - 1, "How often a batch is resent after a retriable error (within delivery_timeout_ms).", ge=0
    )
    retry_backoff_ms: int = setting(100, "Pause before a failed batch or metadata request is retried.", ge=0)
    connect_timeout_ms: int = setting(10_000, "How long connecting to a broker may take.", ge=1)
    metadata_max_age_ms: int = setting(
        300_000, "Learn the cluster again at least this often, even without errors.", ge=0
    )
    allow_auto_topic_creation: bool = setting(
        True,
        "Ask brokers to create a topic the producer writes to that does not exist (brokers "
        "still apply their own auto-create switch).",
    )
    host_name: str = setting(
        "", "Value of the 'host' header on every record. Empty: this machine's host name."
    )
    audit_interval_ms: int = setting(
        0,
        "Publish this producer's audit counts (paper section 4: messages the brokers confirmed, "
        "per topic and window of creation time) to [audit] topic every this many ms, and on close. 0: "
        "the producer does not audit.",
        ge=0,
    )
    audit_window_ms: int = setting(
        600_000, "Width of the audit windows (by record timestamp).", ge=1000, derived="audit.window_ms"
    )
    audit_topic: str = setting(
        "_audit", "Topic the audit events go to (never counted itself).", derived="audit.topic"
    )
    audit_topic_partitions: int = setting(
        1,
        "Partitions of the audit topic when an audit publisher creates it.",
        ge=1,
        le=10_000,
        derived="audit.topic_partitions",
    )
    audit_registry_url: str = setting(
        "http://127.0.0.1:8081",
        "Schema registry where the audit event schema is registered.",
        derived="registry.url",
    )
    audit_state_dir: str = setting(
        "",
        "Directory of the audit outbox's journal (one file per client_id); empty: counts in memory only.",
        derived="audit.state_dir",
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        check_servers("producer", self.bootstrap_servers)
        if self.compression_gzip_level == 0:
            raise ValueError(
                "ProducerConfig: compression_gzip_level must be from 1 to 9, or -1 (zlib's default), not 0"
            )
        if self.enable_idempotence and self.acks != "all":
            raise ValueError(
                f"ProducerConfig: enable_idempotence = true needs acks = 'all', got acks = '{self.acks}'; "
                "set enable_idempotence = false to produce with acks '0' or '1'"
            )
        if self.enable_idempotence and self.max_in_flight_requests_per_connection > MAX_IDEMPOTENT_IN_FLIGHT:
            raise ValueError(
                "ProducerConfig: enable_idempotence = true allows at most "
                f"{MAX_IDEMPOTENT_IN_FLIGHT} max_in_flight_requests_per_connection, got "
                f"{self.max_in_flight_requests_per_connection}; lower it or set enable_idempotence = false"
            )
        if self.audit_interval_ms > 0 and not (self.audit_topic and self.audit_registry_url):
            raise ValueError(
                "ProducerConfig: audit_interval_ms > 0 needs an audit_topic and an audit_registry_url"
            )
        return self

    @property
    def compression_level(self) -> int | None:
        """The level of ``compression_type`` (None: a codec without levels)."""
        return codec_level(self, self.compression_type)

    @property
    def acks_value(self) -> int:
        """``acks`` as the Produce request's int16: 0, 1 or -1."""
        return -1 if self.acks == "all" else int(self.acks)
