"""Where a new topic's replicas go: Kafka's ``AdminUtils.assignReplicasToBrokersRackUnaware``, exactly.

With ``n`` brokers sorted by id, a random (or fixed) ``start_index`` and ``replica_shift``::

    for partition p in 0..partitions-1:
        if p > 0 and p % n == 0: replica_shift += 1          # a new round: move the followers over one
        first = (p + start_index) % n                         # leaders round robin from start_index
        replicas[p] = [brokers[first]] + [brokers[(first + 1 + (replica_shift + j) % (n - 1)) % n]
                                          for j in 0..replication_factor-2]

So leaders are spread evenly (every broker leads ``partitions // n`` or one more partition), a partition
never has a broker twice, and the followers of successive rounds are shifted so that one broker's failure
spreads its followers' load. Kafka draws ``start_index`` and ``replica_shift`` independently at random when
no fixed start index is given; a fixed one is used for both (Kafka's ``fixedStartIndex``). Racks are not
modelled (Lumber has no ``broker.rack``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from broker.cluster.errors import InvalidPartitionsError, InvalidReplicationFactorError, NoLiveBrokersError


def assign_replicas(
    partitions: int,
    replication_factor: int,
    broker_ids: Sequence[int],
    *,
    start_index: int = -1,
    start_partition: int = 0,
    topic: str = "",
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition -> replicas for partitions ``start_partition..start_partition+partitions-1`` (see the
    module docstring; ``start_partition`` is Kafka's ``startPartitionId``, for partitions added to a topic).

    ``start_index >= 0`` fixes both Kafka's start index and replica shift; ``-1`` draws them from ``rng``
    (a fresh ``random.Random`` if None). ``topic`` only names the topic in errors.
    """
    if partitions < 1:
        raise InvalidPartitionsError(f"{partitions} partitions: a topic needs at least 1")
    brokers = sorted(set(broker_ids))
    if len(brokers) != len(broker_ids):
        raise ValueError(f"broker ids {list(broker_ids)} name a broker twice")
    if not brokers:
        raise NoLiveBrokersError(f"cannot place {partitions} partitions: no live brokers")
    if not 1 <= replication_factor <= len(brokers):
        raise InvalidReplicationFactorError(topic, replication_factor, brokers)
    n = len(brokers)
    if start_index >= 0:
        first_index = replica_shift = start_index
    else:
        draw = rng if rng is not None else random.Random()  # noqa: S311 - spread, not secrecy
        first_index = draw.randrange(n)
        replica_shift = draw.randrange(n)
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % n == 0:
            replica_shift += 1
        first = (partition + first_index) % n
        followers = (
            brokers[(first + 1 + (replica_shift + j) % (n - 1)) % n] for j in range(replication_factor - 1)
        )
        assignment[partition] = (brokers[first], *followers)
    return assignment
