"""Where a new topic's partitions go: Kafka's round robin over the live brokers (one replica each).

Kafka's ``AdminUtils.assignReplicasToBrokers`` without racks and with replication factor 1: the broker ids
are sorted, and partition ``p`` goes to ``brokers[(start_index + p) % n]``. Every broker gets
``partitions // n`` or one more partition. A random ``start_index`` (the caller's choice) keeps partition 0
of successive topics from always landing on the same broker.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.cluster.errors import InvalidPartitionsError, NoLiveBrokersError


def assign_partitions(
    partitions: int, broker_ids: Sequence[int], *, start_index: int
) -> dict[int, tuple[int, ...]]:
    """Partition -> ``(broker,)`` for partitions ``0..partitions-1`` (see the module docstring)."""
    if partitions < 1:
        raise InvalidPartitionsError(f"{partitions} partitions: a topic needs at least 1")
    brokers = sorted(set(broker_ids))
    if len(brokers) != len(broker_ids):
        raise ValueError(f"broker ids {list(broker_ids)} name a broker twice")
    if not brokers:
        raise NoLiveBrokersError(f"cannot place {partitions} partitions: no live brokers")
    n = len(brokers)
    return {p: (brokers[(start_index + p) % n],) for p in range(partitions)}
