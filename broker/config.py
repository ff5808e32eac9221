"""The broker's config sections (``[log]`` and ``[broker]`` in ``lumber.toml``).

Each section is a :class:`~broker.config_section.ConfigSection`: a frozen pydantic model whose fields are
the TOML keys, each with its default, documentation and bounds (:func:`~broker.config_section.setting`),
which :mod:`lumber.config` reads to check a file and to print ``lumber config defaults``. This module must
not import :mod:`pipeline`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from broker.config_section import ConfigSection, codec_level, setting
from broker.endpoint import Endpoint, InvalidListenerError, SecurityProtocol, parse_endpoints
from broker.group_config import BrokerGroupConfig
from broker.security_config import BrokerSecurityConfig

DAY_MS = 24 * 60 * 60 * 1000
GIB = 1024 * 1024 * 1024
#: Kafka's ``message.max.bytes`` default: 1 MiB of records plus the 12-byte log overhead of a batch.
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
#: Kafka's ``producer.id.expiration.ms`` default: one day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = DAY_MS

Expose = Literal["flushed", "appended"]
#: Kafka's ``cleanup.policy`` values: delete old segments, keep the last value of every key, or both.
CleanupPolicy = Literal["delete", "compact", "compact,delete"]
TimestampTypeName = Literal["CreateTime", "LogAppendTime"]
#: Kafka's ``compression.type`` values for a topic and a broker: keep the producer's codec, or store every
#: batch with this one (``uncompressed`` is Kafka's name for no codec).
TopicCompressionName = Literal["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
MIB = 1024 * 1024


class LogConfig(ConfigSection):
    """The broker's log storage: segments, indexes, flush policy and retention (paper section 3.1)."""

    log_dirs: list[str] = setting(
        [".lumber/logs"],
        "Folders holding the partitions (one sub-folder `<topic>-<partition>` each). Each is "
        "locked by one broker at a time; new partitions go to the folder with the fewest partitions.",
    )
    segment_bytes: int = setting(
        GIB,
        "A partition rolls to a new segment file when the next batch would grow the active one "
        "past this size (a single larger batch still gets a segment of its own).",
        ge=128,
        le=2**31 - 1,
    )
    segment_ms: int = setting(
        7 * DAY_MS,
        "A partition also rolls when a batch's max timestamp is this much later than the first "
        "batch of the active segment (Kafka's segment.ms).",
        ge=1,
    )
    index_interval_bytes: int = setting(
        4096, "Bytes of log between two entries of the sparse offset and time indexes.", ge=0
    )
    flush_messages: int = setting(
        10_000,
        "Flush (fsync) a partition once this many messages are unflushed: the paper's M. The "
        "default is the 10,000 of Kafka 0.7/0.8's shipped server.properties, the paper's era.",
        ge=1,
    )
    flush_ms: int = setting(
        1000,
        "Flush a partition whose oldest unflushed message is this old: the paper's S "
        "(1000 ms, as in that same sample server.properties).",
        ge=1,
    )
    expose: Expose = setting(
        "appended",
        "What consumers see: 'appended' (Kafka's rule, the default) exposes what every in-sync replica "
        "has (the high watermark), flushed or not: durability comes from replication, and a record is "
        "readable as soon as its acks=-1 produce is answered. 'flushed' is the paper's semantics, for "
        "single-copy deployments that want a consumer never to see what a crash could lose: a message is "
        "exposed only once it is also flushed, so consumers see it up to flush_ms later. Producers never "
        "wait for it.",
    )
    flush_on_ack: bool = setting(
        False,
        "Answer an acks=-1 produce only once its batches are fsynced. Done as group commit: a "
        "waiting request wakes the flusher, and one fsync answers every request waiting on it.",
    )
    validate_records: bool = setting(
        True,
        "Walk every record of every produced batch before appending it (Kafka's LogValidator). "
        "Turn off only to measure its cost: without it a CRC-valid batch of garbage can be stored and "
        "stop every consumer of its partition.",
    )
    retention_ms: int = setting(
        7 * DAY_MS,
        "Delete a whole non-active segment once its largest record timestamp is older than "
        "this; -1 keeps segments forever.",
        ge=-1,
    )
    retention_bytes: int = setting(
        -1,
        "Delete a partition's oldest non-active segment while what remains is still at least this "
        "large (Kafka's rule: the log stays within one segment of this size); -1 is off.",
        ge=-1,
    )
    retention_check_interval_ms: int = setting(
        5 * 60 * 1000, "How often the retention thread looks for segments to delete.", ge=1
    )
    recovery_checkpoint_interval_ms: int = setting(
        60_000,
        "How often each log dir's recovery-point checkpoint is rewritten (also at shutdown); "
        "after a crash, recovery validates every batch after it.",
        ge=1,
    )
    max_message_bytes: int = setting(
        DEFAULT_MAX_MESSAGE_BYTES,
        "Largest record batch a partition accepts, header included (Kafka's message.max.bytes).",
        ge=61,
    )

    message_timestamp_type: TimestampTypeName = setting(
        "CreateTime",
        "Whose time a record carries (Kafka's log.message.timestamp.type): 'CreateTime' keeps the "
        "producer's; 'LogAppendTime' stamps each batch with the leader's clock as it appends it (the "
        "records then read the batch's time). A topic's own message.timestamp.type overrides it.",
    )
    compression_type: TopicCompressionName = setting(
        "producer",
        "The codec of stored batches (Kafka's compression.type): 'producer' keeps each batch as its "
        "producer compressed it; 'uncompressed', 'gzip', 'snappy', 'lz4' or 'zstd' make the leader "
        "recompress every produced batch of another codec before appending it (Kafka's LogValidator; "
        "followers copy the leader's bytes). A topic's own compression.type overrides it.",
    )
    compression_gzip_level: int = setting(
        -1,
        "The level of a gzip topic's recompression (Kafka's compression.gzip.level): 1 (fastest) to 9 "
        "(smallest), or -1, zlib's default (6). A batch the producer already compressed with gzip is kept "
        "as it is, whatever its level, as Kafka keeps it. A topic's own compression.gzip.level overrides it.",
        ge=-1,
        le=9,
    )
    compression_lz4_level: int = setting(
        9,
        "The level of an lz4 topic's recompression (Kafka's compression.lz4.level): 1 to 17; the default "
        "9 is lz4's fast compressor (Kafka's), another level its high compressor. A topic's own "
        "compression.lz4.level overrides it.",
        ge=1,
        le=17,
    )
    compression_zstd_level: int = setting(
        3,
        "The level of a zstd topic's recompression (Kafka's compression.zstd.level): -131072 (fastest) "
        "to 22 (smallest). A topic's own compression.zstd.level overrides it.",
        ge=-131072,
        le=22,
    )

    cleanup_policy: CleanupPolicy = setting(
        "delete",
        "What happens to old data (Kafka's cleanup.policy): 'delete' removes whole segments by "
        "retention_ms and retention_bytes; 'compact' keeps the last value of every key (the log cleaner); "
        "'compact,delete' does both. A topic's own cleanup.policy overrides it.",
    )
    min_cleanable_dirty_ratio: float = setting(
        0.5,
        "The cleaner takes a compacted log once its dirty (not yet cleaned) part is at least this "
        "share of the log (Kafka's min.cleanable.dirty.ratio), dirtiest log first.",
    )
    delete_retention_ms: int = setting(
        DAY_MS,
        "A tombstone (a null value) is kept this long after the segment holding it was cleaned, so "
        "a consumer reading from the start sees the delete, then dropped (Kafka's delete.retention.ms).",
        ge=0,
    )
    min_compaction_lag_ms: int = setting(
        0,
        "A record younger than this (by its timestamp) is never compacted away "
        "(Kafka's min.compaction.lag.ms).",
        ge=0,
    )
    cleaner_threads: int = setting(
        1, "Background threads compacting logs (Kafka's log.cleaner.threads); 0 turns the cleaner off.", ge=0
    )
    cleaner_dedupe_buffer_bytes: int = setting(
        128 * MIB,
        "Memory for the cleaners' key -> last offset maps, shared by all cleaner threads (Kafka's "
        "log.cleaner.dedupe.buffer.size). A log whose dirty part holds more keys than fit is cleaned in "
        "several passes, never with more memory.",
        ge=64 * 1024,
    )
    cleaner_io_buffer_bytes: int = setting(
        512 * 1024,
        "Each cleaner thread reads segments in blocks of this size, raised to at least 1 MiB (Kafka's "
        "log.cleaner.io.buffer.size, whose reads are of this size); a batch larger than a block is read "
        "across several.",
        ge=4096,
    )
    cleaner_nice: int = setting(
        10,
        "The cleaner threads' CPU priority, as a Unix nice increment over the broker's (Linux only: a "
        "thread's own nice value): request handling goes first when the cores are busy, the cleaner takes "
        "the rest. 0 runs them at the broker's priority, as Kafka does.",
        ge=0,
        le=19,
    )
    cleaner_backoff_ms: int = setting(
        15_000, "How long a cleaner thread sleeps when no log needs cleaning (log.cleaner.backoff.ms).", ge=1
    )
    file_delete_delay_ms: int = setting(
        60_000,
        "How long the segments a cleaning pass replaced stay open before their descriptors are closed, on "
        "a thread of the cleaner's (Kafka's log.segment.delete.delay.ms; file.delete.delay.ms per topic): "
        "their files are unlinked at the swap, and the close frees their page cache and disk space off "
        "the cleaning thread; 0 closes them as the pass lets go of them.",
        ge=0,
    )
    cleaner_io_max_bytes_per_second: int = setting(
        0,
        "Caps the bytes per second all cleaner threads together read and write (Kafka's "
        "log.cleaner.io.max.bytes.per.second); 0 means no cap. The cleaner shares the broker's Python "
        "interpreter lock with request handling; it does its work in compiled loops that release it, so "
        "uncapped it costs produce little (BENCHMARKS.md), and a cap bounds its disk traffic.",
        ge=0,
    )

    @property
    def compression_level(self) -> int | None:
        """The level ``compression_type`` recompresses with (None: ``producer``, or a codec without one)."""
        return codec_level(self, self.compression_type)

    @model_validator(mode="after")
    def _check_log_dirs(self) -> Self:
        if not self.log_dirs:
            raise ValueError("log.log_dirs must name at least one folder")
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ValueError(f"log.log_dirs names a folder twice: {self.log_dirs!r}")
        if any(not d for d in self.log_dirs):
            raise ValueError(f"log.log_dirs has an empty folder name: {self.log_dirs!r}")
        if self.compression_gzip_level == 0:
            raise ValueError("log.compression_gzip_level must be from 1 to 9, or -1 (zlib's default), not 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"log.min_cleanable_dirty_ratio must be from 0 to 1, not {self.min_cleanable_dirty_ratio!r}"
            )
        return self


class BrokerConfig(BrokerSecurityConfig, BrokerGroupConfig):
    """One broker process (``lumber broker start``): its id, listeners, threads and topic defaults.

    The authorization keys are :class:`~broker.security_config.BrokerSecurityConfig`'s, the group
    coordinator's :class:`~broker.group_config.BrokerGroupConfig`'s."""

    broker_id: int = setting(
        0,
        "The broker's id, unique in the cluster: it registers /brokers/ids/<id> in ZooKeeper and "
        "refuses to start while another live broker holds the id.",
        ge=0,
        le=2**31 - 1,
    )
    host: str = setting("127.0.0.1", "Address the broker listens on (127.0.0.1 keeps it on this machine).")
    port: int = setting(9092, "Port the broker listens on; 0 picks a free one.", ge=0, le=65535)
    advertised_host: str = setting(
        "", "Host clients are told to connect to (ZooKeeper and Metadata); empty: `host`."
    )
    rack: str = setting(
        "",
        "The broker's rack (Kafka's broker.rack), in its /brokers/ids node: `lumber cluster rebalance` and "
        "`decommission` spread a partition's replicas over racks when every live broker declares one; "
        "empty: none.",
    )
    listeners: list[str] = setting(
        [],
        "The listeners, Kafka's syntax: NAME://host:port, NAME a security protocol (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL) or a name of listener_security_protocol_map, e.g. "
        '["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://0.0.0.0:9094"]. Empty: one PLAINTEXT listener on '
        "host:port (and then host, port and advertised_host are the listener).",
    )
    advertised_listeners: list[str] = setting(
        [],
        "What clients are told for each listener (Metadata answers with the listener the client came in "
        "on; ZooKeeper's broker node lists them all), same syntax and names as listeners; port 0: the "
        "bound port. A listener not named here is advertised as it listens (0.0.0.0 refused: give its "
        "address). Empty: every listener as it listens.",
    )
    listener_security_protocol_map: dict[str, str] = setting(
        {},
        "Security protocols of listener names of one's own (Kafka's listener.security.protocol.map), "
        'e.g. {INTERNAL = "SSL", EXTERNAL = "SASL_SSL"}.',
    )
    inter_broker_listener_name: str = setting(
        "",
        "The listener other brokers reach this one on (replication); empty: the first of listeners.",
    )
    ssl_certfile: str = setting(
        "",
        "PEM file of the broker's certificate (and chain), for its SSL and SASL_SSL listeners.",
    )
    ssl_keyfile: str = setting(
        "", "PEM file of the broker's private key (unencrypted); empty: in ssl_certfile."
    )
    ssl_cafile: str = setting(
        "",
        "PEM file of the CA certificates client certificates are checked against (ssl_client_auth); the "
        "broker's own replication client trusts it too.",
    )
    ssl_client_auth: Literal["none", "requested", "required"] = setting(
        "none",
        "Client certificates on TLS listeners (Kafka's ssl.client.auth): 'none' asks for none; 'requested' "
        "checks one that is sent; 'required' refuses a client without one. A client with a certificate is "
        "User:<its subject, RFC 2253> (e.g. User:CN=alice,O=Lumber), one without User:ANONYMOUS.",
    )
    ssl_ciphers: str = setting(
        "", "OpenSSL cipher list for TLS 1.2 (Kafka's ssl.cipher.suites); empty: Python's defaults."
    )
    sasl_enabled_mechanisms: list[str] = setting(
        ["SCRAM-SHA-256", "SCRAM-SHA-512"],
        "SASL mechanisms the SASL_PLAINTEXT and SASL_SSL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
        " "
        "(Kafka's sasl.enabled.mechanisms; Kafka's default GSSAPI Lumber has not). Every mechanism checks "
        "the users of `lumber users add` (ZooKeeper /config/users); PLAIN sends the password itself, so "
        "offer it on SASL_SSL only.",
    )
    sasl_max_failed_authentications: int = setting(
        10,
        "A client host whose SASL authentication failed this many times within "
        "sasl_failed_authentication_window_ms is refused without its password being checked until the "
        "oldest of those failures leaves the window (throttles password guessing).",
        ge=1,
    )
    sasl_failed_authentication_window_ms: int = setting(
        60_000, "The window of sasl_max_failed_authentications.", ge=1000
    )
    ssl_min_version: Literal["TLSv1.2", "TLSv1.3"] = setting(
        "TLSv1.2", "Oldest TLS version the TLS listeners accept (never below 1.2)."
    )
    num_network_threads: int = setting(
        3, "Processor threads, each with its own selector, doing the socket I/O.", ge=1
    )
    num_io_threads: int = setting(4, "Request handler threads (decode, append, read, encode).", ge=1)
    inline_requests: bool = setting(
        True,
        "Answer Produce, Fetch, ListOffsets, ApiVersions, OffsetCommit, OffsetFetch and Heartbeat on the "
        "network thread that read them "
        "(no hand-over to a handler thread, which under Python's GIL costs more than the request); "
        "false: every request goes to the handler threads, as in Kafka.",
    )
    queued_max_requests: int = setting(
        500, "Requests waiting for a handler before the processors stop reading.", ge=1
    )
    socket_request_max_bytes: int = setting(
        100 * 1024 * 1024,
        "Largest request accepted; a larger size prefix closes the connection before anything of "
        "the request is buffered (Kafka's socket.request.max.bytes).",
        ge=1024,
        le=2**31 - 1,
    )
    connections_max_idle_ms: int = setting(600_000, "Close connections idle for this long.", ge=1000)
    auto_create_topics: bool = setting(
        False,
        "Create a topic the first time a client asks for it in a Metadata request that allows it "
        "(Kafka's auto.create.topics.enable). Off by default, as production Kafka sets it: a typo in a "
        "topic name is an error, not a new topic; create topics with `lumber topics create`.",
    )
    num_partitions: int = setting(
        1,
        "Partitions of an auto-created topic, and of a CreateTopics request that asks for the "
        "broker default (-1).",
        ge=1,
        le=10_000,
    )
    producer_id_expiration_ms: int = setting(
        DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        "A partition forgets an idempotent producer's sequence state once its last batch's "
        "timestamp is this old (Kafka's producer.id.expiration.ms); checked with retention, every "
        "[log] retention_check_interval_ms.",
        ge=1,
    )
    shutdown_timeout_ms: int = setting(
        30_000, "How long a clean shutdown waits for in-flight requests.", ge=100
    )
    metrics_port: int = setting(
        -1,
        "Port of the broker's Prometheus metrics (GET /metrics on `host`, names in the Kafka JMX "
        "exporter's style; broker/server/broker_metrics.py). -1: 9308 + broker_id; 0: no metrics.",
        ge=-1,
        le=65535,
    )
    metrics_users_file: str = setting(
        "",
        "A file of name:role:hash lines (`lumber http-users add`): a scrape of the metrics needs one of "
        "its users (HTTP Basic, Prometheus' basic_auth; either role). Empty: no authentication; then "
        "a `host` beyond 127.0.0.1 needs metrics_allow_unauthenticated.",
    )
    metrics_ssl_certfile: str = setting("", "PEM certificate chain: serve the metrics over HTTPS.")
    metrics_ssl_keyfile: str = setting("", "PEM private key of metrics_ssl_certfile (empty: in it).")
    metrics_allow_unauthenticated: bool = setting(
        False,
        "Serve the metrics on a `host` beyond 127.0.0.1 without metrics_users_file (refused otherwise).",
    )

    default_replication_factor: int = setting(
        1,
        "Replicas of an auto-created topic, and of a CreateTopics request or `lumber topics create` that "
        "asks for the broker default (Kafka's default.replication.factor). `lumber dev up --brokers N` "
        "sets it to min(N, 3).",
        ge=1,
        le=32,
    )
    min_insync_replicas: int = setting(
        1,
        "An acks=all produce is refused with NOT_ENOUGH_REPLICAS while a partition's ISR is smaller "
        "than this (Kafka's min.insync.replicas); a topic's own `min.insync.replicas` config wins.",
        ge=1,
        le=32,
    )
    unclean_leader_election: bool = setting(
        False,
        "Let the controller elect a live replica outside the ISR when no ISR member is live: the "
        "partition comes back, losing what only the dead ISR held (Kafka's "
        "unclean.leader.election.enable). Off: the partition stays offline until an ISR member returns.",
    )
    replica_lag_time_max_ms: int = setting(
        10_000,
        "A follower that has not caught up with the leader's log end for this long leaves the ISR; "
        "it rejoins once caught up (Kafka's replica.lag.time.max.ms).",
        ge=100,
    )
    replica_fetch_wait_max_ms: int = setting(
        500,
        "How long a follower's Fetch waits at the leader for new data (Kafka's replica.fetch.wait.max.ms); "
        "keep it well below replica_lag_time_max_ms.",
        ge=1,
    )
    replica_fetch_max_bytes: int = setting(
        1024 * 1024,
        "Bytes a follower asks for per partition in one Fetch (Kafka's replica.fetch.max.bytes; one "
        "larger batch is still returned whole).",
        ge=1024,
    )
    replica_fetch_backoff_ms: int = setting(
        1000,
        "How long a follower waits before fetching again after an error (Kafka's replica.fetch.backoff.ms).",
        ge=1,
    )
    max_incremental_fetch_session_cache_slots: int = setting(
        1000,
        "Fetch sessions (KIP-227) the broker keeps: a follower or consumer in a session names only the "
        "partitions whose fetch position changed, and is answered only the partitions with news; when "
        "all slots are taken a new session evicts an idle, smaller or (for a follower) a consumer's one, "
        "else the client fetches without a session (Kafka's max.incremental.fetch.session.cache.slots). "
        "0: no sessions.",
        ge=0,
    )
    num_replica_fetchers: int = setting(
        1, "Fetcher threads per leader broker that this broker follows (Kafka's num.replica.fetchers).", ge=1
    )
    auto_leader_rebalance: bool = setting(
        True,
        "The controller moves leadership back to each partition's preferred (first) replica when it is "
        "live and in the ISR, every leader_imbalance_check_interval_ms "
        "(Kafka's auto.leader.rebalance.enable).",
    )
    leader_imbalance_check_interval_ms: int = setting(
        300_000,
        "How often the controller checks for partitions led by another replica than their preferred "
        "one (Kafka's leader.imbalance.check.interval.seconds).",
        ge=100,
    )
    controlled_shutdown: bool = setting(
        True,
        "On SIGTERM, move leadership of this broker's partitions to other in-sync replicas before "
        "stopping, so that clients see no failed request (Kafka's controlled.shutdown.enable); waits "
        "at most shutdown_timeout_ms.",
    )

    @model_validator(mode="after")
    def _check_listeners(self) -> Self:
        try:
            endpoints = self.listener_endpoints
            advertised = self.advertised_endpoints
        except InvalidListenerError as exc:
            raise ValueError(f"broker.listeners / advertised_listeners: {exc}") from None
        names = {e.listener_name for e in endpoints}
        for endpoint in advertised if self.listeners else ():
            if endpoint.host in ("", "0.0.0.0", "::"):  # noqa: S104 - refusing it, not binding it
                raise ValueError(
                    f"broker.advertised_listeners: {endpoint} cannot be advertised (an address that "
                    "accepts connections is not one clients can reach); give the host in "
                    "advertised_listeners"
                )
        tls = [str(e) for e in endpoints if e.security_protocol.uses_tls]
        if tls and not self.ssl_certfile:
            raise ValueError(
                f"broker.listeners {', '.join(tls)} use TLS: set broker.ssl_certfile (and ssl_keyfile)"
            )
        if self.ssl_client_auth != "none" and not self.ssl_cafile:
            raise ValueError(
                f"broker.ssl_client_auth = {self.ssl_client_auth!r} needs broker.ssl_cafile to check client "
                "certificates against"
            )
        unknown = sorted(set(self.sasl_enabled_mechanisms) - {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
        if unknown:
            raise ValueError(
                f"broker.sasl_enabled_mechanisms: {', '.join(unknown)} not supported (PLAIN, SCRAM-SHA-256, "
                "SCRAM-SHA-512)"
            )
        sasl = [str(e) for e in endpoints if e.security_protocol.uses_sasl]
        if sasl and not self.sasl_enabled_mechanisms:
            raise ValueError(f"broker.listeners {', '.join(sasl)} use SASL: enable a mechanism")
        inter_broker = next(
            (e for e in endpoints if e.listener_name == self.inter_broker_listener), endpoints[0]
        )
        if inter_broker.security_protocol.uses_sasl and not self.inter_broker_sasl_username:
            raise ValueError(
                f"broker.inter_broker_listener_name: {inter_broker} uses SASL: set "
                "broker.inter_broker_sasl_username and inter_broker_sasl_password_file (the brokers' login)"
            )
        if self.inter_broker_listener_name and self.inter_broker_listener_name.upper() not in names:
            raise ValueError(
                f"broker.inter_broker_listener_name {self.inter_broker_listener_name!r} is not a listener "
                f"({', '.join(sorted(names))})"
            )
        return self

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    @property
    def listener_endpoints(self) -> list[Endpoint]:
        """The listeners (``host:port`` as one PLAINTEXT listener when ``listeners`` is empty)."""
        if not self.listeners:
            return [Endpoint("PLAINTEXT", self.host, self.port, SecurityProtocol.PLAINTEXT)]
        return parse_endpoints(self.listeners, self.listener_security_protocol_map)

    @property
    def advertised_endpoints(self) -> list[Endpoint]:
        """What each listener is advertised as, in the order of :attr:`listener_endpoints` (port 0: bound)."""
        listening = self.listener_endpoints
        if not self.listeners:
            return [listening[0].replace_host(self.advertised)]
        given = {
            e.listener_name: e
            for e in parse_endpoints(self.advertised_listeners, self.listener_security_protocol_map)
        }
        unknown = sorted(set(given) - {e.listener_name for e in listening})
        if unknown:
            raise InvalidListenerError(
                f"advertised listener(s) {', '.join(unknown)} are not among the listeners {self.listeners!r}"
            )
        return [given.get(e.listener_name, e) for e in listening]

    @property
    def inter_broker_listener(self) -> str:
        """The listener name brokers replicate through."""
        return (self.inter_broker_listener_name or self.listener_endpoints[0].listener_name).upper()

    @property
    def metrics_listen_port(self) -> int | None:
        """The metrics port in effect (``None``: metrics off)."""
        if self.metrics_port == 0:
            return None
        return 9308 + self.broker_id if self.metrics_port < 0 else self.metrics_port
