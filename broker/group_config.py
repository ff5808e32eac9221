"""The ``[broker]`` keys of the group coordinator and its ``__consumer_offsets`` topic (Kafka's
``offsets.*`` and ``group.*`` broker configs).

:class:`BrokerGroupConfig` is a base of :class:`~broker.config.BrokerConfig` (one ``[broker]`` table; the
keys are kept here so that each module stays one concern), read by :mod:`broker.server.group`.

This module must import nothing of Lumber's but the config section base.
"""

from __future__ import annotations

from broker.config_section import ConfigSection, setting


class BrokerGroupConfig(ConfigSection):
    """The group coordinator: the offsets topic, offset retention and commits, session timeouts."""

    offsets_topic_partitions: int = setting(
        50,
        "Partitions of the internal topic __consumer_offsets, created when a group first looks for its "
        "coordinator (Kafka's offsets.topic.num.partitions); a group's coordinator is the leader of "
        "partition abs(Java String.hashCode(group id)) % this. Read once, when the topic is created.",
        ge=1,
        le=10_000,
    )
    offsets_topic_replication_factor: int = setting(
        3,
        "Replicas of each __consumer_offsets partition (Kafka's offsets.topic.replication.factor); "
        "Lumber creates the topic with min(this, live brokers) replicas, so a one-broker dev stack works.",
        ge=1,
        le=32,
    )
    offsets_topic_segment_bytes: int = setting(
        100 * 1024 * 1024,
        "segment.bytes of __consumer_offsets, set when the topic is created (Kafka's "
        "offsets.topic.segment.bytes): smaller than other topics' so that compaction, which never touches "
        "the active segment, reaches its records sooner and a new coordinator loads fewer bytes.",
        ge=128,
        le=2**31 - 1,
    )
    offsets_retention_ms: int = setting(
        7 * 24 * 60 * 60 * 1000,  # 7 days
        "A group's committed offsets are deleted (tombstones in __consumer_offsets) once the group has "
        "been empty for this long (Kafka's offsets.retention.minutes, 7 days).",
        ge=1,
    )
    offsets_retention_check_interval_ms: int = setting(
        600_000,
        "How often the coordinator looks for expired offsets (Kafka's offsets.retention.check.interval.ms).",
        ge=1,
    )
    offsets_commit_timeout_ms: int = setting(
        5000,
        "An offset commit (or a group's metadata) not held by every in-sync replica of its "
        "__consumer_offsets partition within this fails with REQUEST_TIMED_OUT (Kafka's "
        "offsets.commit.timeout.ms).",
        ge=1,
    )
    offset_metadata_max_bytes: int = setting(
        4096,
        "Longest metadata string a commit may carry; longer: OFFSET_METADATA_TOO_LARGE "
        "(Kafka's offset.metadata.max.bytes).",
        ge=0,
    )
    group_min_session_timeout_ms: int = setting(
        6000,
        "Smallest session timeout a group member may ask for (Kafka's group.min.session.timeout.ms); "
        "outside the range: INVALID_SESSION_TIMEOUT.",
        ge=1,
    )
    group_max_session_timeout_ms: int = setting(
        1_800_000,
        "Largest session timeout a group member may ask for (Kafka's group.max.session.timeout.ms).",
        ge=1,
    )
    group_initial_rebalance_delay_ms: int = setting(
        3000,
        "How long the first rebalance of an empty group waits for more members to join, extended by "
        "as much for each one that does, up to the rebalance timeout (Kafka's "
        "group.initial.rebalance.delay.ms); 0: no wait.",
        ge=0,
    )
