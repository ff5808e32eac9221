"""The log cleaner's key -> last offset map: a fixed-size open-addressing table (Kafka's ``SkimpyOffsetMap``).

Memory is allocated once, at construction, and never grows: three numpy arrays of ``slots`` entries, 24
bytes per slot (a 128-bit hash of a key as two ``uint64`` words, and the ``int64`` offset), with ``slots``
the largest prime whose table fits ``memory_bytes``. No Python object is kept per key, so a map over
millions of keys costs exactly its buffer. A key is stored by its hash only, as Kafka does: two keys with
the same 128 bits would be taken for one. Where Kafka hashes with MD5, Lumber hashes the keys by columns
in numpy (:func:`hash_key_columns`, no Python object per key: the cleaner reads keys straight from the
records' bytes): each key's 8-byte words are folded into a 64-bit state through MurmurHash3's
finaliser (a bijection), twice, from two random 64-bit seeds drawn per process (a map lives in one process,
so its puts and gets agree, and keys cannot be chosen from outside to collide), the key's length mixed
into the seeds. Two keys of one length up to 8 bytes never collide; others collide with probability about
``2**-128`` per pair (2 million keys: about ``n**2 / 2**129``, below 1e-26). About 0.05 us per key.

Collisions are resolved by double hashing (the first word picks the slot, the second the step; ``slots``
is prime, so every step visits every slot), which keeps probe sequences short up to the load factor.
Kafka probes with successive hash bytes, then linearly; double hashing does the same job in fewer
probes, which matters here because every probe round is one vectorised pass (see below).

The map is filled to at most ``load_factor * slots`` keys (:attr:`OffsetMap.max_entries`, Kafka's
``log.cleaner.io.buffer.load.factor`` of 0.9): the cleaner stops mapping a log's dirty section when the
next batch's keys might not fit, and cleans the rest in a later pass.

Puts and gets are vectorised: :meth:`OffsetMap.put_many` and :meth:`OffsetMap.get_many` take the hashes
of many keys at once (:func:`hash_keys`) and resolve every key's probe sequence in rounds of numpy
operations, each round settling the keys that found their slot (or an empty one). Keys put together are
resolved to their slots first, then their offsets are written at once: a key keeps the largest offset
it is given (the cleaner's offsets increase along the log, so the last one).

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

#: The low ``k`` bytes of a little-endian word, for ``k`` in 0..8.
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
#: Per process, as Python's own hash seed: the map lives in one process, so its puts and gets agree, and
#: keys cannot be chosen from outside to collide.
_SEEDS = np.frombuffer(os.urandom(16), dtype=np.uint64).copy()
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT = np.uint64(33)
#: A slot's offset: empty, or claimed by a put in progress (its offset set at the put's end).
_EMPTY = -1
_CLAIMED = -2


def hash_keys(keys: Sequence[bytes]) -> Hashes:
    """The 128-bit hash of every key as an ``(n, 2)`` array of ``uint64`` words (see the module docstring):
    :func:`hash_key_columns` over the keys laid end to end."""
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    starts = np.zeros(len(keys), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    data = np.frombuffer(b"".join([*keys, bytes(8)]), dtype=np.uint8)
    return hash_key_columns(data, starts, lengths)


def hash_key_columns(data: Bytes, starts: Offsets, lengths: Offsets) -> Hashes:
    """The 128-bit hash of the keys ``data[starts[i] : starts[i] + lengths[i]]`` as an ``(n, 2)`` array of
    ``uint64`` words, computed by columns (see the module docstring). ``data`` must hold at least 7 bytes
    after the end of every key: each key is read as unaligned 8-byte words, the last one masked."""
    n = len(starts)
    hashes = np.empty((n, 2), dtype=np.uint64)
    if n == 0:
        return hashes
    if len(data) < 8:
        raise ValueError(f"key data of {len(data)} bytes: at least 8 expected (keys and 7 bytes of padding)")
    # the 8 bytes from every position of data, as one little-endian word each (unaligned, no copy)
    words_at = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    order: Offsets | None = None
    if lengths.min() != lengths.max():
        order = np.argsort(lengths, kind="stable")  # by length: the keys with a word w are a suffix
        starts, lengths = starts[order], lengths[order]
    key_words = (lengths + 7) // 8
    firsts = np.searchsorted(key_words, np.arange(int(key_words[-1])), side="right").tolist()
    seed_length = lengths.astype(np.uint64) * _GOLDEN
    low = seed_length ^ _SEEDS[0]
    high = seed_length ^ _SEEDS[1]
    for w, first in enumerate(firsts):
        word = words_at[starts[first:] + 8 * w]
        valid = lengths[first:] - 8 * w  # bytes of the key in this word: 8 but at its end
        if int(valid.min()) < 8:
            word &= _MASKS[np.minimum(valid, 8)]
        low[first:] = _fmix(low[first:] ^ word)
        high[first:] = _fmix(high[first:] ^ word)
    if order is None:
        hashes[:, 0] = _fmix(low)
        hashes[:, 1] = _fmix(high)
    else:
        hashes[order, 0] = _fmix(low)
        hashes[order, 1] = _fmix(high)
    return hashes


def _fmix(x: Hashes) -> Hashes:
    """MurmurHash3's 64-bit finaliser (a bijection that spreads every input bit over the output)."""
    x = x ^ (x >> _SHIFT)
    x *= _MIX_1
    x ^= x >> _SHIFT
    x *= _MIX_2
    x ^= x >> _SHIFT
    return x


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

    __slots__ = ("_high", "_latest_offset", "_load_factor", "_low", "_offsets", "_size", "_slots")

    def __init__(self, memory_bytes: int, *, load_factor: float = DEFAULT_LOAD_FACTOR) -> None:
        if not 0.0 < load_factor <= 0.95:
            raise ValueError(f"load factor must be in (0, 0.95], not {load_factor}")
        if memory_bytes < BYTES_PER_ENTRY * 8:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY * 8} bytes, got {memory_bytes}")
        self._slots = _largest_prime_at_most(memory_bytes // BYTES_PER_ENTRY)
        self._load_factor = load_factor
        # filled, not np.zeros: every page is touched now, not at the first puts of a pass
        self._low: Hashes = np.full(self._slots, 0, dtype=np.uint64)
        self._high: Hashes = np.full(self._slots, 0, dtype=np.uint64)
        self._offsets: Offsets = np.full(self._slots, -1, dtype=np.int64)
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
        self._offsets.fill(-1)
        self._size = 0
        self._latest_offset = -1

    def _probe(self, hashes: Hashes) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        low = hashes[:, 0]
        slots = np.uint64(self._slots)
        position = (low % slots).astype(np.int64)
        step = (hashes[:, 1] % np.uint64(self._slots - 1)).astype(np.int64) + 1
        return position, step

    def put_many(self, hashes: Hashes, offsets: Offsets) -> npt.NDArray[np.int64]:
        """Map every ``hashes[i]`` to ``offsets[i]`` (offsets at least 0); a key keeps the largest offset
        it is given (the cleaner puts a log's offsets in increasing order: the last one). Returns the slot
        each key took: it keeps it until :meth:`clear` (:meth:`offsets_at` reads it). The caller keeps
        the map within :attr:`max_entries` (a full table raises :class:`OverflowError`).

        Each key's slot is found first, in probe rounds: a key at an empty slot claims it (several keys
        at one empty slot: one claim wins, by the mark it leaves), a key at a slot holding its hash
        (its own, or claimed by another occurrence of it this round) is settled there, any other key
        probes on. Then every key's offset goes to its slot at once, the largest winning
        (``np.maximum.at``: no sort of the keys)."""
        n = len(offsets)
        found = np.empty(n, dtype=np.int64)  # each key's slot
        if n == 0:
            return found
        low, high = hashes[:, 0], hashes[:, 1]
        position, step = self._probe(hashes)
        table_low, table_high, table_offsets = self._low, self._high, self._offsets
        slots = self._slots
        index = np.arange(n)  # the keys still probing
        rounds = 0
        while len(index):
            rounds += 1
            if rounds > slots:
                raise OverflowError(f"the offset map's {slots} slots are full ({self._size} keys)")
            empty = np.flatnonzero(table_offsets[position] == _EMPTY)
            if len(empty):
                where = position[empty]
                marks = _CLAIMED - 1 - empty  # below _CLAIMED: a slot taken this round, by whom
                table_offsets[where] = marks
                won = empty[table_offsets[where] == marks]  # one per slot
                where = position[won]
                table_low[where] = low[won]
                table_high[where] = high[won]
                table_offsets[where] = _CLAIMED
                self._size += len(won)
            same = (table_low[position] == low) & (table_high[position] == high)
            found[index[same]] = position[same]
            rest = ~same
            index, low, high = index[rest], low[rest], high[rest]
            position = (position[rest] + step[rest]) % slots
            step = step[rest]
        np.maximum.at(table_offsets, found, np.asarray(offsets, dtype=np.int64))
        return found

    def offsets_at(self, slots: npt.NDArray[np.integer]) -> Offsets:
        """The offsets mapped at ``slots``, slots :meth:`put_many` returned since the last :meth:`clear`:
        what :meth:`get_many` finds for those keys, without hashing or probing."""
        found: Offsets = self._offsets[slots]
        return found

    def get_many(self, hashes: Hashes) -> Offsets:
        """The offset mapped to each hash, -1 where the key is not in the map."""
        n = len(hashes)
        result: Offsets = np.full(n, -1, dtype=np.int64)
        if n == 0 or self._size == 0:
            return result
        index = np.arange(n)
        low, high = hashes[:, 0], hashes[:, 1]
        position, step = self._probe(hashes)
        table_low, table_high, table_offsets = self._low, self._high, self._offsets
        slots = self._slots
        while len(index):
            current = table_offsets[position]
            empty = current < 0
            same = ~empty & (table_low[position] == low) & (table_high[position] == high)
            result[index[same]] = current[same]
            rest = ~(empty | same)
            index, low, high = index[rest], low[rest], high[rest]
            position = (position[rest] + step[rest]) % slots
            step = step[rest]
        return result

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self._slots}, size={self._size}, latest_offset={self._latest_offset})"
