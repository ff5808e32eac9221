"""The consumer group's settings: the ``[group]`` section of ``lumber.toml``.

Where a partition without a committed offset starts is the consumer's ``auto_offset_reset``
(``[consumer]``), as in Kafka; fetching is configured there too. This module must not import
:mod:`pipeline`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from broker.client.errors import ClientConfigError
from broker.config_section import ConfigSection, setting

AssignmentStrategy = Literal["range", "roundrobin"]


class GroupConfig(ConfigSection):
    """A member of a ZooKeeper-coordinated consumer group: session, commits, assignment, handover."""

    error_type = ClientConfigError

    session_timeout_ms: int = setting(
        6000,
        "The member's ZooKeeper session timeout: a member that dies loses its partitions this "
        "long after it stopped answering. A member stops fetching as soon as its connection is lost "
        "(after 2/3 of this), before its session can expire.",
        ge=1000,
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

    @model_validator(mode="after")
    def _check(self) -> Self:
        if "/" in self.member_id_prefix:
            raise ValueError(f"GroupConfig.member_id_prefix must not contain '/': {self.member_id_prefix!r}")
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ValueError(
                f"GroupConfig.retry_backoff_max_ms ({self.retry_backoff_max_ms}) must be at least "
                f"retry_backoff_ms ({self.retry_backoff_ms})"
            )
        return self
