"""The consumer group's settings: the ``[group]`` section of ``lumber.toml``.

Where a partition without a committed offset starts is the consumer's ``auto_offset_reset``
(``[consumer]``), as in Kafka; fetching is configured there too. This module must not import
:mod:`pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from broker.client.errors import ClientConfigError
from broker.client.settings import check_limits

AssignmentStrategy = Literal["range", "roundrobin"]


@dataclass(frozen=True)
class GroupConfig:
    """A member of a ZooKeeper-coordinated consumer group: session, commits, assignment, handover."""

    session_timeout_ms: int = field(
        default=6000,
        metadata={
            "doc": "The member's ZooKeeper session timeout: a member that dies loses its partitions this "
            "long after it stopped answering. A member stops fetching as soon as its connection is lost "
            "(after 2/3 of this), before its session can expire.",
            "min": 1000,
        },
    )
    connect_timeout_ms: int = field(
        default=15_000,
        metadata={"doc": "How long joining waits for the first ZooKeeper connection.", "min": 100},
    )
    auto_commit_enable: bool = field(
        default=True,
        metadata={"doc": "Commit the consumed offsets every auto_commit_interval_ms (else only commit())."},
    )
    auto_commit_interval_ms: int = field(
        default=1000,
        metadata={
            "doc": "How often consumed offsets are committed to ZooKeeper; a crash re-delivers at most "
            "what was consumed in this window.",
            "min": 10,
        },
    )
    partition_assignment_strategy: AssignmentStrategy = field(
        default="range",
        metadata={
            "doc": "'range' (the paper's Algorithm 1: contiguous chunks per topic) or 'roundrobin' "
            "(partitions of all topics dealt in turn).",
            "choices": ("range", "roundrobin"),
        },
    )
    release_timeout_ms: int = field(
        default=3000,
        metadata={
            "doc": "When a partition moves away, how long to wait for the application to come back for "
            "more (so the records it is processing count as consumed) before committing without them "
            "(they are then delivered again to the next owner).",
            "min": 0,
        },
    )
    retry_backoff_ms: int = field(
        default=100,
        metadata={
            "doc": "First pause before a failed ZooKeeper step is retried (jittered, doubling).",
            "min": 1,
        },
    )
    retry_backoff_max_ms: int = field(
        default=2000, metadata={"doc": "Longest pause between retries of a failed ZooKeeper step.", "min": 1}
    )
    member_id_prefix: str = field(
        default="",
        metadata={
            "doc": "Start of every member id (the rest is pid and a random suffix, new at each join); "
            "empty: the host name."
        },
    )

    def __post_init__(self) -> None:
        check_limits(self)
        if "/" in self.member_id_prefix:
            raise ClientConfigError(
                f"GroupConfig.member_id_prefix must not contain '/': {self.member_id_prefix!r}"
            )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ClientConfigError(
                f"GroupConfig.retry_backoff_max_ms ({self.retry_backoff_max_ms}) must be at least "
                f"retry_backoff_ms ({self.retry_backoff_ms})"
            )
