"""The compiled loops of :mod:`broker.log.offset_map` (its docstring describes the hash and the table):
:func:`hash_keys_at` hashes keys where they lie, :func:`put` and :func:`get` probe the table one key at a
time.

Imported on first use (it imports numba: :mod:`broker.compiled`). The kernels hold no state; a table is
its map's, and its map's thread's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.compiled import inlined, kernel

__all__ = ["get", "hash_keys_at", "put"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT = np.uint64(33)
_BYTE = np.uint64(8)
#: A slot's offset while it is empty.
_EMPTY = -1


@inlined
def _fmix(x: np.uint64) -> np.uint64:
    """MurmurHash3's 64-bit finaliser (a bijection that spreads every input bit over the output)."""
    x ^= x >> _SHIFT
    x *= _MIX_1
    x ^= x >> _SHIFT
    x *= _MIX_2
    x ^= x >> _SHIFT
    return x


@kernel
def hash_keys_at(
    data: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    seeds: npt.NDArray[np.uint64],
    hashes: npt.NDArray[np.uint64],
) -> int:
    """Hash the keys ``data[starts[i] : starts[i] + lengths[i]]`` into ``hashes[i, 0]`` and ``hashes[i, 1]``;
    returns -1, or the first key that does not lie inside ``data`` (nothing is read outside it)."""
    limit = len(data)
    for i in range(len(starts)):
        start = starts[i]
        length = lengths[i]
        if start < 0 or length < 0 or length > limit - start:
            return i
        seed_length = np.uint64(length) * _GOLDEN
        low = seed_length ^ seeds[0]
        high = seed_length ^ seeds[1]
        at = start
        end = start + length
        while at < end:
            # the next 8 bytes of the key as a little-endian word (fewer at its end, the rest zero)
            word = np.uint64(0)
            shift = np.uint64(0)
            stop = min(at + 8, end)
            while at < stop:
                word |= np.uint64(data[at]) << shift
                shift += _BYTE
                at += 1
            low = _fmix(low ^ word)
            high = _fmix(high ^ word)
        hashes[i, 0] = _fmix(low)
        hashes[i, 1] = _fmix(high)
    return -1


@kernel
def put(
    table_low: npt.NDArray[np.uint64],
    table_high: npt.NDArray[np.uint64],
    table_offsets: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.uint64],
    offsets: npt.NDArray[np.int64],
    found: npt.NDArray[np.int64],
) -> int:
    """Map ``hashes[i]`` to ``offsets[i]`` in the table, in order, a key keeping the largest offset it is
    given, and note each key's slot in ``found[i]``; returns how many keys were new, or -1 when a key
    found no slot (the table is full)."""
    slots = len(table_offsets)
    modulus = np.uint64(slots)
    step_modulus = np.uint64(slots - 1)
    added = 0
    for i in range(len(offsets)):
        low = hashes[i, 0]
        high = hashes[i, 1]
        offset = offsets[i]
        position = np.int64(low % modulus)
        step = np.int64(high % step_modulus) + 1
        settled = False
        for _ in range(slots):
            current = table_offsets[position]
            if current == _EMPTY:
                table_low[position] = low
                table_high[position] = high
                table_offsets[position] = offset
                added += 1
                settled = True
                break
            if table_low[position] == low and table_high[position] == high:
                if offset > current:
                    table_offsets[position] = offset
                settled = True
                break
            position += step
            if position >= slots:
                position -= slots
        if not settled:
            return -1
        found[i] = position
    return added


@kernel
def get(
    table_low: npt.NDArray[np.uint64],
    table_high: npt.NDArray[np.uint64],
    table_offsets: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.uint64],
    result: npt.NDArray[np.int64],
) -> None:
    """``result[i]``: the offset mapped to ``hashes[i]``, -1 where the key is not in the table."""
    slots = len(table_offsets)
    modulus = np.uint64(slots)
    step_modulus = np.uint64(slots - 1)
    for i in range(len(hashes)):
        low = hashes[i, 0]
        high = hashes[i, 1]
        position = np.int64(low % modulus)
        step = np.int64(high % step_modulus) + 1
        result[i] = _EMPTY
        for _ in range(slots):
            current = table_offsets[position]
            if current == _EMPTY:
                break
            if table_low[position] == low and table_high[position] == high:
                result[i] = current
                break
            position += step
            if position >= slots:
                position -= slots
