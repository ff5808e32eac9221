"""The log cleaner's key -> last offset map: a fixed-size open-addressing table (Kafka's ``SkimpyOffsetMap``).

Memory is allocated once, at construction, and never grows: one numpy array of ``slots`` rows of three
``uint64`` words, 24 bytes per slot (a 128-bit hash of a key as two words, and the offset plus one, 0 in an
empty slot), with ``slots`` the largest prime whose table fits ``memory_bytes``. A slot's words lie
together, so a put or a get reads one or two cache lines per slot probed (three arrays cost three), and an
empty table is zeroed memory (:meth:`OffsetMap.clear` is one ``memset``). No Python object is kept per
key, so a map over millions of keys costs exactly its buffer. A key is stored by its hash only, as Kafka
does: two keys with the same 128 bits would be taken for one. Where Kafka hashes with MD5, Lumber hashes
the keys where they lie in the records' bytes, in a compiled loop (:func:`hash_key_columns`,
:mod:`broker.log.offset_map_kernels`, no Python object per key): each key's 8-byte little-endian words
(the last one zero-filled) are folded into a 64-bit state through MurmurHash3's finaliser (a bijection),
twice, from two random 64-bit seeds drawn per process (a map lives in one process, so its puts and gets
agree, and keys cannot be chosen from outside to collide), the key's length mixed into the seeds. Two
keys of one length up to 8 bytes never collide; others collide with probability about ``2**-128`` per
pair (2 million keys: about ``n**2 / 2**129``, below 1e-26).

Collisions are resolved by double hashing (the first word picks the slot, the second the step; ``slots``
is prime, so every step visits every slot), which keeps probe sequences short up to the load factor.
Kafka probes with successive hash bytes, then linearly; double hashing does the same job in fewer
probes.

The map is filled to at most ``load_factor * slots`` keys (:attr:`OffsetMap.max_entries`, Kafka's
``log.cleaner.io.buffer.load.factor`` of 0.9): the cleaner stops mapping a log's dirty section when the
next batch's keys might not fit, and cleans the rest in a later pass.

Puts and gets take the hashes of many keys at once (:func:`hash_keys`, :func:`hash_key_columns`) and
probe the table for one key after the other in a compiled loop (:func:`~broker.log.offset_map_kernels.put`,
:func:`~broker.log.offset_map_kernels.get`); a key keeps the largest offset it is given (the cleaner's
offsets increase along the log, so the last one). numba is imported with the kernels, on the first hash
(:mod:`broker.compiled`).

Thread safety: none. Each cleaner thread owns one map.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BYTES_PER_ENTRY", "OffsetMap", "hash_key_columns", "hash_keys"]

#: A 16-byte hash and an 8-byte offset (Kafka's SkimpyOffsetMap: hashSize + 8).
BYTES_PER_ENTRY = 24
DEFAULT_LOAD_FACTOR = 0.9

Hashes = npt.NDArray[np.uint64]
Offsets = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

#: Per process, as Python's own hash seed: the map lives in one process, so its puts and gets agree, and
#: keys cannot be chosen from outside to collide.
_SEEDS = np.frombuffer(os.urandom(16), dtype=np.uint64).copy()


def hash_keys(keys: Sequence[bytes]) -> Hashes:
    """The 128-bit hash of every key as an ``(n, 2)`` array of ``uint64`` words (see the module docstring):
    :func:`hash_key_columns` over the keys laid end to end."""
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return hash_key_columns(np.frombuffer(b"".join(keys), dtype=np.uint8), starts, lengths)


def hash_key_columns(data: Bytes, starts: Offsets, lengths: Offsets) -> Hashes:
    """The 128-bit hash of the keys ``data[starts[i] : starts[i] + lengths[i]]`` as an ``(n, 2)`` array of
    ``uint64`` words (see the module docstring). Raises :class:`ValueError` for a key that does not lie
    inside ``data``."""
    from broker.log.offset_map_kernels import hash_keys_at  # noqa: PLC0415 - numba, on first use

    hashes = np.empty((len(starts), 2), dtype=np.uint64)
    outside = hash_keys_at(data, starts, lengths, _SEEDS, hashes)
    if outside >= 0:
        raise ValueError(
            f"key #{outside} of {len(starts)}: {int(lengths[outside])} bytes at position "
            f"{int(starts[outside])}, outside the {len(data)} bytes of key data"
        )
    return hashes


def _largest_prime_at_most(n: int) -> int:
    candidate = max(n, 3)
    if candidate % 2 == 0:
        candidate -= 1
    while candidate > 3:
        limit = int(candidate**0.5) + 1
        if all(candidate % d for d in range(3, limit, 2)):
            return candidate
        candidate -= 2
    return 3


class OffsetMap:
    """A bounded map from key hashes to offsets (see the module docstring)."""

    __slots__ = ("_latest_offset", "_load_factor", "_size", "_slots", "_table")

    def __init__(self, memory_bytes: int, *, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if not 0.0 < load_factor <= 0.95:
            raise ValueError(f"load factor must be in (0, 0.95], not {load_factor}")
        if memory_bytes < BYTES_PER_ENTRY * 8:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY * 8} bytes, got {memory_bytes}")
        self._slots = _largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        self._load_factor = load_factor
        # filled, not np.zeros: every page is touched now, not at the first puts of a pass
        self._table: Hashes = np.full((self._slots, 3), 0, dtype=np.uint64)
        self._size = 0
        self._latest_offset = -1

    @property
    def slots(self) -> int:
        return self._slots

    @property
    def memory_bytes(self) -> int:
        """What the table takes: ``slots * 24``."""
        return self._slots * BYTES_PER_ENTRY

    @property
    def max_entries(self) -> int:
        """How many keys the map takes before it counts as full."""
        return int(self._slots * self._load_factor)

    @property
    def size(self) -> int:
        """Distinct keys in the map."""
        return self._size

    @property
    def utilization(self) -> float:
        return self._size / self._slots

    @property
    def latest_offset(self) -> int:
        """The last offset the map covers (-1 when empty): see :meth:`update_latest_offset`."""
        return self._latest_offset

    def update_latest_offset(self, offset: int) -> None:
        """Record that every record up to ``offset`` is mapped (the cleaner calls it after each batch)."""
        self._latest_offset = offset

    def clear(self) -> None:
        self._table.fill(0)
        self._size = 0
        self._latest_offset = -1

    def put_many(self, hashes: Hashes, offsets: Offsets) -> npt.NDArray[np.int64]:
        """Map every ``hashes[i]`` to ``offsets[i]`` (offsets at least 0); a key keeps the largest offset
        it is given (the cleaner puts a log's offsets in increasing order: the last one). Returns the slot
        each key took: it keeps it until :meth:`clear` (:meth:`offsets_at` reads it). The caller keeps
        the map within :attr:`max_entries` (a full table raises :class:`OverflowError`)."""
        from broker.log.offset_map_kernels import put  # noqa: PLC0415 - numba, on first use

        found = np.empty(len(offsets), dtype=np.int64)  # each key's slot
        added = put(self._table, hashes, np.asarray(offsets, dtype=np.int64), found)
        if added < 0:
            raise OverflowError(f"the offset map's {self._slots} slots are full ({self._size} keys)")
        self._size += added
        return found

    def offsets_at(self, slots: npt.NDArray[np.integer]) -> Offsets:
        """The offsets mapped at ``slots``, slots :meth:`put_many` returned since the last :meth:`clear`:
        what :meth:`get_many` finds for those keys, without hashing or probing."""
        from broker.log.offset_map_kernels import offsets_at  # noqa: PLC0415 - numba, on first use

        found: Offsets = np.empty(len(slots), dtype=np.int64)
        outside = offsets_at(self._table, slots, found)
        if outside >= 0:
            raise ValueError(f"slot #{outside} of {len(slots)}, {int(slots[outside])}, is outside the map")
        return found

    def get_many(self, hashes: Hashes) -> Offsets:
        """The offset mapped to each hash, -1 where the key is not in the map."""
        from broker.log.offset_map_kernels import get  # noqa: PLC0415 - numba, on first use

        result: Offsets = np.full(len(hashes), -1, dtype=np.int64)
        if len(hashes) and self._size:
            get(self._table, hashes, result)
        return result

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self._slots}, size={self._size}, latest_offset={self._latest_offset})"
