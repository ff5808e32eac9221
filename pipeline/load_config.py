"""The hourly load job's settings: the ``[load]`` section of ``lumber.toml``.

The load job (:mod:`pipeline.load_job`) reads exact offset ranges of the topics that match ``topics_allow``
and none of ``topics_deny`` into Parquet below ``warehouse_url`` and commits data, offsets and audit counts
in one atomic step (:mod:`pipeline.commit`). ``job`` names the job: its lock in ZooKeeper, its metadata
below ``<warehouse>/_lumber/<job>/`` and its committed offsets are its own, so two jobs with different names
load the same topics independently.

This section holds the data settings only. How ``lumber etl run`` deploys the job is the ``[spark]``
section (:mod:`pipeline.spark_config`); the audit window is ``[audit] window_ms`` and the registry
``[registry] url``, the one key each for every tier. ``window_ms``, ``registry_url``, ``spark_master``,
``spark_submit``, ``spark_conf`` and ``python`` stay attributes of this section, derived from those keys, so
that the load reads its own section; the old ``[load]`` keys of those names are read as the new ones with
a warning.

The security keys (``security_protocol``, ``sasl_*``, ``ssl_*``: :mod:`broker.client.security_settings`) are
how every connection of the load reaches the cluster: the driver's planner, the Spark tasks' consumers, the
audit and completeness publishers (they replace those of ``[consumer]`` and ``[producer]`` there). A task
gets them inside its pickled settings, never in Spark's conf or on the ``spark-submit`` command line; a
secret given in ``lumber.toml`` reaches the driver in the effective config ``lumber etl run`` writes, a
file of mode 0600 passed by its path (:mod:`pipeline.load_submit`).

``fault_injection`` is a test hook (see :mod:`pipeline.faults`), set by tests in Python or by
``LUMBER_LOAD__FAULT_INJECTION``; ``lumber config defaults`` does not list it.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import model_validator

from broker.client.security_settings import SecuritySettings
from broker.config_section import setting

StartPolicy = Literal["earliest", "latest"]
OutOfRangePolicy = Literal["fail", "earliest"]
ParquetCompression = Literal["snappy", "zstd", "gzip", "none"]
#: How Python reaches an hdfs:// warehouse (:func:`pipeline.fs.open_filesystem`).
HdfsClient = Literal["auto", "libhdfs", "hdfs-native", "webhdfs"]

_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class LoadConfig(SecuritySettings):
    """The hourly Spark load: which topics, where to, and how to start, cap and fail."""

    job: str = setting(
        "hourly",
        "Name of the load job: its ZooKeeper lock, its metadata folder <warehouse>/_lumber/<job>/ and its "
        "committed offsets. Letters, digits, '_', '.', '-'.",
    )
    topics_allow: list[str] = setting(
        [".*"], "Load the topics whose whole name matches one of these regular expressions."
    )
    topics_deny: list[str] = setting(
        ["_.*"],
        "Never load the topics whose whole name matches one of these (default: internal topics such as "
        "_audit and _schemas). Deny wins over allow.",
    )
    warehouse_url: str = setting(
        ".lumber/warehouse",
        "Where the Parquet output and the job's metadata live: hdfs://nn:8020/warehouse (through "
        "hdfs_client) or file:///data/warehouse; a plain path is a local folder, relative to the working "
        "directory of the command.",
    )
    start: StartPolicy = setting(
        "earliest",
        "Where a partition the job never loaded starts: 'earliest' (its log start) or 'latest' (its log end "
        "when first planned: only newer messages are loaded).",
    )
    on_out_of_range: OutOfRangePolicy = setting(
        "fail",
        "When retention deleted offsets the job has not loaded yet (committed offset < log start): 'fail' "
        "(stop, naming the partition and the gap) or 'earliest' (skip to the log start and record the gap "
        "as loss in the manifest, for the audit).",
    )
    max_records_per_partition: int = setting(
        0,
        "At most this many records of one partition per run; the rest waits for the next run. 0: no cap.",
        ge=0,
    )
    max_records_per_task: int = setting(
        500_000,
        "Ranges larger than this are split into several Spark tasks (smaller retries, better balance).",
        ge=1,
    )
    min_partitions: int = setting(
        2, "Split the largest ranges until the run has at least this many Spark tasks.", ge=1
    )
    event_time_fields: list[str] = setting(
        [],
        "Where a topic's event time comes from, as 'TOPIC=FIELD' (a long or int payload field in ms since "
        "the epoch, or an Avro timestamp). Topics not listed use the record timestamp (CreateTime). The "
        "event time picks the output folder dt=YYYY-MM-DD/hr=HH (UTC); a null field falls back to the "
        "record timestamp.",
    )
    window_ms: int = setting(
        600_000,
        "Width of the audit windows: the manifest counts committed and quarantined records per topic, "
        "partition and window of this many ms (by record timestamp).",
        ge=1000,
        derived="audit.window_ms",
    )
    registry_url: str = setting("", "Schema registry URL.", derived="registry.url")
    bootstrap_servers: list[str] = setting(
        [], "Brokers (host:port) to learn the cluster from. Empty: ZooKeeper ([zookeeper] connect)."
    )
    lock_timeout_ms: int = setting(
        0,
        "How long a run waits for the job's ZooKeeper lock held by another run before it gives up with a "
        "message naming the holder. 0: give up at once.",
        ge=0,
    )
    arrow_batch_records: int = setting(
        20_000, "Records a reading task decodes into one Arrow batch before writing it.", ge=1
    )
    parquet_compression: ParquetCompression = setting(
        "zstd",
        "Parquet compression codec of the output: zstd (smaller, what new tables should use), snappy "
        "(Spark's default), gzip, none.",
    )
    parquet_row_group_rows: int = setting(
        250_000,
        "Rows per Parquet row group (a task buffers this many rows per open hour before writing them).",
        ge=1,
    )
    target_file_bytes: int = setting(
        128 * 1024 * 1024,
        "A task starts a new file of an hour once its current one reaches this size.",
        ge=1024,
    )
    hdfs_client: HdfsClient = setting(
        "auto",
        "How Python reaches an hdfs:// warehouse: 'auto' (libhdfs where it loads, else hdfs-native), "
        "'libhdfs' (Hadoop's own, through pyarrow), 'hdfs-native' (a Rust client of HDFS's RPC, no JVM) or "
        "'webhdfs' (HTTP, at webhdfs_url). Spark's own Hadoop client is not used for the warehouse.",
    )
    webhdfs_url: str = setting(
        "",
        "The NameNode's WebHDFS address (http://namenode:9870), for hdfs_client = 'webhdfs' (clusters that "
        "only open HTTP). Empty: none.",
    )
    metrics_textfile: str = setting(
        "",
        "After each run, write its figures (records, rows, quarantined, lost, bytes, lag left behind, "
        "seconds per phase) in the Prometheus text format to this file, replaced in one rename: a *.prom "
        "file in node_exporter's --collector.textfile.directory. Empty: none.",
    )
    spark_master: str = setting("local[*]", "Spark master.", derived="spark.master")
    spark_submit: str = setting("", "The spark-submit to run.", derived="spark.submit")
    spark_conf: list[str] = setting([], "Extra Spark settings, as 'key=value'.", derived="spark.conf")
    python: str = setting("", "Python of the driver and the executors' workers.", derived="spark.python")
    fault_injection: list[str] = setting(
        [],
        "TEST HOOK, leave empty: failures to inject, e.g. 'commit:manifest' or 'task:3' (see "
        "pipeline/faults.py).",
        hidden=True,
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not _JOB_NAME.fullmatch(self.job):
            raise ValueError(
                f"load.job must be 1-100 letters, digits, '_', '.' or '-' (not starting with one of the "
                f"last three), got {self.job!r}"
            )
        for key, patterns in (("topics_allow", self.topics_allow), ("topics_deny", self.topics_deny)):
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"load.{key}: {pattern!r} is not a regular expression: {exc}") from exc
        self.event_time_by_topic()
        if not self.warehouse_url.strip():
            raise ValueError("load.warehouse_url must not be empty")
        return self

    def event_time_by_topic(self) -> dict[str, str]:
        """``event_time_fields`` as ``{topic: field}``."""
        found: dict[str, str] = {}
        for entry in self.event_time_fields:
            topic, sep, name = entry.partition("=")
            if not sep or not topic or not _FIELD_NAME.fullmatch(name):
                raise ValueError(f"load.event_time_fields: expected 'TOPIC=FIELD', got {entry!r}")
            if topic in found:
                raise ValueError(f"load.event_time_fields: topic {topic!r} is listed twice")
            found[topic] = name
        return found

    def topic_selected(self, topic: str) -> bool:
        """True when ``topic`` matches an allow pattern and no deny pattern (whole-name matches)."""
        if any(re.fullmatch(p, topic) for p in self.topics_deny):
            return False
        return any(re.fullmatch(p, topic) for p in self.topics_allow)
