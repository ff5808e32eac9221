"""Which partition a record goes to: Kafka's murmur2 for keys, a sticky choice for records without one.

Keyed records go where Apache Kafka's Java client puts them (``BuiltInPartitioner.partitionForKey``)::

    partition = toPositive(murmur2(key_bytes)) % num_partitions      # toPositive(x) = x & 0x7fffffff

over all partitions of the topic, available or not, so that a key always maps to the same partition while
the partition count stays. :func:`murmur2` is Java's ``Utils.murmur2`` (seed 0x9747b28c, m 0x5bd1e995,
r 24) computed in 32-bit two's complement; it returns the same signed int as Java.

Records without a key follow the sticky partitioner (KIP-480): every record of a topic goes to one
partition until a batch for it is full or sent, and then the next record picks another partition at
random (another one than before whenever there are two or more). Batches fill faster than with a random
choice per record, and the load still spreads over all partitions. The producer tells the partitioner
(:meth:`StickyPartitioner.on_new_batch`) when the sticky partition's batch closed.

Thread safety: :class:`StickyPartitioner` is guarded by the producer's lock; :func:`murmur2` is pure.
"""

from __future__ import annotations

import random
import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 hash of ``data``: the signed 32-bit int that Java's ``Utils.murmur2`` returns."""
    view = data if isinstance(data, bytes) else bytes(data)
    length = len(view)
    h = (_SEED ^ length) & _MASK32
    length4 = length & ~3
    m = _M
    mask = _MASK32
    for word in struct.unpack_from(f"<{length4 >> 2}I", view):  # Java reads 4 bytes little-endian
        k = (word * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    extra = length & 3
    if extra:
        if extra == 3:
            h ^= view[length4 + 2] << 16
        if extra >= 2:
            h ^= view[length4 + 1] << 8
        h ^= view[length4]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: the low 31 bits (not the absolute value)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition the Java client picks for ``key`` among ``num_partitions`` partitions."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """The sticky choice of partition for records without a key, one sticky partition per topic."""

    __slots__ = ("_random", "_sticky", "current")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._sticky: dict[str, int] = {}
        #: topic -> its sticky partition, for readers on a hot path (read-only for them)
        self.current = self._sticky
        self._random = rng if rng is not None else random.Random()  # noqa: S311 - spreads load, not secrets

    def partition(self, topic: str, num_partitions: int) -> int:
        """The current sticky partition of ``topic`` (picking one the first time)."""
        found = self._sticky.get(topic)
        if found is None or found >= num_partitions:
            found = self._sticky[topic] = self._random.randrange(num_partitions)
        return found

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> int:
        """The batch of ``previous`` (the sticky partition) closed: pick and return another partition.

        Only switches when ``previous`` is still the sticky partition, so that several records racing to
        the same full batch move on once.
        """
        current = self._sticky.get(topic)
        if current is not None and current != previous and current < num_partitions:
            return current
        if num_partitions <= 1:
            chosen = 0
        else:
            chosen = self._random.randrange(num_partitions - 1)
            if chosen >= previous:
                chosen += 1
        self._sticky[topic] = chosen
        return chosen
