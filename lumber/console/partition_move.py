"""A partition being reassigned, as the console shows it: its replicas being added and removed (RS, AR, RR
from the topic's node in ZooKeeper, :mod:`broker.cluster.partition_reassignment`), whether its copy is
throttled (``/config/throttled_replicas``), and the bytes each new replica still has to copy.

Bytes left are estimated as Cruise Control does: the partition's log on its leader minus the log the new
replica holds so far, both from DescribeLogDirs (:mod:`lumber.cli.partition_sizes`, one request per broker
asked, only when some partition moves); a new replica with no log yet has the whole log left. When the
brokers do not tell the sizes (unreachable, DESCRIBE on the cluster refused) the move is shown without them,
never as an error. The leader's own estimate, from its followers' offsets, is in its metrics
(``lumber_reassignment_bytes_left``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from broker.cluster import replication_throttle, zk_reads
from broker.cluster.broker_info import BrokerInfo
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.record.topic_partition import TopicPartition
from lumber.cli.partition_row import move_text
from lumber.cli.partition_sizes import PartitionSizes
from lumber.console.sources import Sources


@dataclass(frozen=True)
class PartitionMove:
    """One moving partition (see the module docstring); ``bytes_left`` is None when unknown."""

    reassignment: PartitionReassignment
    throttled: bool
    bytes_left: Mapping[int, int] | None

    @property
    def text(self) -> str:
        """The move in words, as ``lumber topics describe`` says it."""
        return move_text(self.reassignment, self.throttled, self.bytes_left)

    def to_json(self) -> dict[str, object]:
        r, left = self.reassignment, self.bytes_left
        return {
            "target_replicas": list(r.target_replicas),
            "adding_replicas": list(r.adding),
            "removing_replicas": list(r.removing),
            "throttled": self.throttled,
            "bytes_left": None if left is None else {str(b): n for b, n in left.items()},
        }


def read_moves(
    sources: Sources,
    topic: str,
    node: zk_reads.TopicNode,
    leaders: Mapping[int, int],
    brokers: Mapping[int, BrokerInfo],
    throttle_node: bytes | None,
) -> dict[int, PartitionMove]:
    """The moving partitions of ``topic`` (partition -> move) from its node; ``leaders`` are the live
    leaders (partition -> broker), ``throttle_node`` the data of ``/config/throttled_replicas`` (None: no
    such node)."""
    moves = {
        p: PartitionReassignment(node.assignment[p], adding, removing)
        for p, (adding, removing) in node.moving.items()
        if p in node.assignment and (adding or removing)
    }
    if not moves:
        return {}
    throttled = (
        set() if throttle_node is None else replication_throttle.throttled_partitions_of(throttle_node, topic)
    )
    left = _bytes_left(sources, topic, moves, leaders, brokers)
    return {
        p: PartitionMove(r, throttled is None or p in throttled, None if left is None else left.get(p, {}))
        for p, r in moves.items()
    }


def _bytes_left(
    sources: Sources,
    topic: str,
    moves: Mapping[int, PartitionReassignment],
    leaders: Mapping[int, int],
    brokers: Mapping[int, BrokerInfo],
) -> dict[int, dict[int, int]] | None:
    """partition -> new replica -> bytes it still has to copy; None when the brokers do not tell."""
    adding = {p: r.adding for p, r in moves.items() if r.adding}
    if not adding:
        return {}
    if any(p not in leaders for p in adding):
        return None  # no live leader: nothing copies now, and no size to measure against
    settings = sources.consumer_settings()
    on_leader = PartitionSizes.read({TopicPartition(topic, p): leaders[p] for p in adding}, brokers, settings)
    if on_leader.unknown_because:
        return None
    left: dict[int, dict[int, int]] = {p: {} for p in adding}
    for rank in range(max(len(r) for r in adding.values())):
        asked = {TopicPartition(topic, p): r[rank] for p, r in adding.items() if rank < len(r)}
        on_replica = PartitionSizes.read(asked, brokers, settings, all_required=False)
        if on_replica.unknown_because:
            return None
        for tp, replica in asked.items():
            have = on_replica.sizes.get(tp, 0)
            left[tp.partition][replica] = max(0, on_leader.sizes[tp] - have)
    return left
