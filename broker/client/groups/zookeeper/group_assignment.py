"""The generation: one group's whole assignment, as the leader writes it to ``/consumers/<group>/assignment``.

The node holds (see :mod:`broker.cluster.zk_paths`)::

    {"version": 1, "generation": 7, "leader": "<consumer-id>", "strategy": "range", "timestamp_ms": ...,
     "assignment": {"<consumer-id>": {"events": [[0, 1], [2]]}}}

``generation`` goes up by one with every write; the znode's own version is what writers compare-and-set
on. Members act on the latest generation they read; partitions are handed over through the owner nodes,
so acting on an older one for a moment is safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.client.groups.partition_assignor import Assignment, stream_of
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition


@dataclass(frozen=True)
class GroupAssignment:
    """One generation of a group's assignment (member -> topic -> partitions per stream)."""

    generation: int
    leader: str
    strategy: str
    assignment: Assignment
    timestamp_ms: int = field(default=0, compare=False)

    def streams_of(self, member_id: str) -> dict[TopicPartition, int]:
        """The partitions of ``member_id`` in this generation, each with its stream number."""
        return {
            TopicPartition(topic, partition): number
            for topic, streams in self.assignment.get(member_id, {}).items()
            for number, partitions in enumerate(streams)
            for partition in partitions
        }

    def owners(self) -> dict[TopicPartition, tuple[str, int]]:
        """Every assigned partition's ``(member id, stream number)``."""
        return stream_of(self.assignment)

    def encode(self) -> bytes:
        return zk_paths.encode_json(
            {
                "generation": self.generation,
                "leader": self.leader,
                "strategy": self.strategy,
                "timestamp_ms": self.timestamp_ms,
                "assignment": self.assignment,
            }
        )

    @classmethod
    def decode(cls, path: str, data: bytes) -> GroupAssignment:
        value = zk_paths.decode_json(path, data)
        try:
            raw: Mapping[str, Any] = value["assignment"]
            assignment = {
                str(member): {
                    str(topic): [[int(p) for p in stream] for stream in streams]
                    for topic, streams in topics.items()
                }
                for member, topics in raw.items()
            }
            return cls(
                generation=int(value["generation"]),
                leader=str(value["leader"]),
                strategy=str(value.get("strategy", "range")),
                assignment=assignment,
                timestamp_ms=int(value.get("timestamp_ms", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise zk_paths.ZkDataError(f"{path}: is not a group assignment: {value!r}") from exc
