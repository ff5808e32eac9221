"""The consumer group's settings: the ``[group]`` section of ``lumber.toml``.

``protocol`` chooses how the group is coordinated: ``"zookeeper"`` (the default: the paper's groups,
:mod:`broker.client.groups.zookeeper.group_membership`) or ``"kafka"`` (Kafka's classic group protocol through
the brokers' group coordinator, :mod:`broker.client.groups.kafka.kafka_group_membership`, so Lumber members
and unmodified Kafka clients can share a group). Most keys mean the same for both; ``heartbeat_interval_ms``,
``max_poll_interval_ms`` and ``group_instance_id`` are the Kafka protocol's only, ``retry_backoff_max_ms``
and ``member_id_prefix`` ZooKeeper's only. ``session_timeout_ms`` defaults to 6000 for ZooKeeper groups
(the member's ZooKeeper session) and to Kafka's 45000 for Kafka groups (the coordinator's session).

Where a partition without a committed offset starts is the consumer's ``auto_offset_reset``
(``[consumer]``), as in Kafka; fetching is configured there too. This module must not import
:mod:`pipeline`.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import model_validator

from broker.client.errors import ClientConfigError
from broker.config_section import ConfigSection, setting

AssignmentStrategy = Literal["range", "roundrobin"]
GroupProtocol = Literal["zookeeper", "kafka"]

#: ``session_timeout_ms`` when the section does not set it, by protocol (Kafka's default for Kafka groups)
DEFAULT_SESSION_TIMEOUT_MS: dict[str, int] = {"zookeeper": 6000, "kafka": 45_000}


class GroupConfig(ConfigSection):
    """A member of a ZooKeeper-coordinated consumer group: session, commits, assignment, handover."""

    error_type = ClientConfigError

    protocol: GroupProtocol = setting(
        "zookeeper",
        "How the group is coordinated: 'zookeeper' (the paper's groups, in ZooKeeper) or 'kafka' "
        "(Kafka's group protocol through the brokers' group coordinator: Kafka clients can join).",
    )
    session_timeout_ms: int = setting(
        6000,
        "How long after a member stopped answering it loses its partitions. zookeeper: the member's "
        "ZooKeeper session timeout (a member stops fetching as soon as its connection is lost, after "
        "2/3 of this, before its session can expire); kafka: the coordinator's session timeout (the "
        "default is then Kafka's 45000).",
        ge=1000,
    )
    heartbeat_interval_ms: int = setting(
        3000,
        "kafka: how often the member heartbeats to the coordinator (and so how soon it learns of a "
        "rebalance); below session_timeout_ms, usually a third of it.",
        ge=1,
    )
    max_poll_interval_ms: int = setting(
        300_000,
        "kafka: the rebalance timeout sent with JoinGroup: how long the coordinator waits for every "
        "member to rejoin once a rebalance started (Kafka's max.poll.interval.ms).",
        ge=1,
    )
    group_instance_id: str = setting(
        "",
        "kafka: a static member's instance id (KIP-345): a member that restarts with the same id "
        "within session_timeout_ms gets its partitions back without a rebalance. Empty: dynamic.",
    )
    connect_timeout_ms: int = setting(
        15_000, "How long joining waits for the first ZooKeeper connection.", ge=100
    )
    auto_commit_enable: bool = setting(
        True, "Commit the consumed offsets every auto_commit_interval_ms (else only commit())."
    )
    auto_commit_interval_ms: int = setting(
        1000,
        "How often consumed offsets are committed to ZooKeeper; a crash re-delivers at most "
        "what was consumed in this window.",
        ge=10,
    )
    partition_assignment_strategy: AssignmentStrategy = setting(
        "range",
        "'range' (the paper's Algorithm 1: contiguous chunks per topic) or 'roundrobin' "
        "(partitions of all topics dealt in turn).",
    )
    release_timeout_ms: int = setting(
        3000,
        "When a partition moves away, how long to wait for the application to come back for "
        "more (so the records it is processing count as consumed) before committing without them "
        "(they are then delivered again to the next owner).",
        ge=0,
    )
    retry_backoff_ms: int = setting(
        100, "First pause before a failed ZooKeeper step is retried (jittered, doubling).", ge=1
    )
    retry_backoff_max_ms: int = setting(
        2000, "Longest pause between retries of a failed ZooKeeper step.", ge=1
    )
    member_id_prefix: str = setting(
        "",
        "Start of every member id (the rest is pid and a random suffix, new at each join); "
        "empty: the host name.",
    )

    @model_validator(mode="before")
    @classmethod
    def _session_default(cls, data: Any) -> Any:
        """Kafka's session timeout default for Kafka groups (the key is one, its default per protocol)."""
        if isinstance(data, dict) and "session_timeout_ms" not in data:
            protocol = data.get("protocol", "zookeeper")
            if isinstance(protocol, str) and protocol in DEFAULT_SESSION_TIMEOUT_MS:
                return {**data, "session_timeout_ms": DEFAULT_SESSION_TIMEOUT_MS[protocol]}
        return data

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.protocol == "kafka" and self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"GroupConfig.heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if "/" in self.member_id_prefix:
            raise ValueError(f"GroupConfig.member_id_prefix must not contain '/': {self.member_id_prefix!r}")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ValueError(
                f"GroupConfig.retry_backoff_max_ms ({self.retry_backoff_max_ms}) must be at least "
                f"retry_backoff_ms ({self.retry_backoff_ms})"
            )
        return self
