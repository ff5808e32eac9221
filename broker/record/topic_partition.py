"""``TopicPartition``: the key of a partition, wherever one is named (logs, requests, clients, the load)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition of a topic. ``str()`` gives ``<topic>-<partition>``, the partition's folder name."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
