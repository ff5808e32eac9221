"""The compiled loops of :mod:`broker.log.offset_map` (its docstring describes the hash and the table):
:func:`hash_keys_at` hashes keys where they lie, :func:`put` and :func:`get` probe the table one key at a
time, :func:`offsets_at` reads the slots :func:`put` gave.

Imported on first use (it imports numba: :mod:`broker.compiled`). The kernels hold no state; a table is
its map's, and its map's thread's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from broker.compiled import inlined, kernel

__all__ = ["get", "hash_keys_at", "offsets_at", "put"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT = np.uint64(33)
_BYTE = np.uint64(8)
#: How many keys ahead of the one probed a put or get asks for its first slot's cache line
#: (:func:`_prefetch_row`): a probe's first read misses the caches in a large map, and the misses of the
#: next keys' probes then overlap it (measured: 6.5 -> 4.0 ms for 500,000 puts of 50,000 keys in a 64 MiB
#: map, 15.1 -> 9.7 ms for 500,000 keys; 4, 8 and 32 did less).
_PREFETCH_DISTANCE = 16
#: A slot's third word while it is empty (a key's is its offset plus one).
_EMPTY = np.uint64(0)


@inlined
def _fmix(x: np.uint64) -> np.uint64:
    """MurmurHash3's 64-bit finaliser (a bijection that spreads every input bit over the output)."""
    x ^= x >> _SHIFT
    x *= _MIX_1
    x ^= x >> _SHIFT
    x *= _MIX_2
    x ^= x >> _SHIFT
    return x


@intrinsic
def _prefetch_row_type(typing_context: object, array: types.Type, row: types.Type) -> object:
    """Ask the processor for the cache line of ``array[row, 0]`` (LLVM's ``llvm.prefetch``: a read, kept
    in every cache level), without waiting for it; a 2-D array and an integer row, inside it."""
    if not (isinstance(array, types.Array) and array.ndim == 2 and isinstance(row, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        zero = context.get_constant(types.intp, 0)
        pointer = cgutils.get_item_pointer(  # type: ignore[no-untyped-call]
            context, builder, array_type, view, [index, zero], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        word = ir.IntType(32)
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", [byte_pointer], ir.FunctionType(ir.VoidType(), [byte_pointer, word, word, word])
        )
        read, keep_everywhere, data = (ir.Constant(word, value) for value in (0, 3, 1))
        builder.call(function, [builder.bitcast(pointer, byte_pointer), read, keep_everywhere, data])
        return context.get_dummy_value()

    return types.void(array, row), codegen


@inlined
def _word_at(data: npt.NDArray[np.uint8], at: int) -> np.uint64:
    """The 8 bytes ``data[at : at + 8]`` as a little-endian word (written byte by byte, compiled to one
    load)."""
    return (
        np.uint64(data[at])
        | np.uint64(data[at + 1]) << np.uint64(8)
        | np.uint64(data[at + 2]) << np.uint64(16)
        | np.uint64(data[at + 3]) << np.uint64(24)
        | np.uint64(data[at + 4]) << np.uint64(32)
        | np.uint64(data[at + 5]) << np.uint64(40)
        | np.uint64(data[at + 6]) << np.uint64(48)
        | np.uint64(data[at + 7]) << np.uint64(56)
    )


#: :func:`_prefetch_row_type` as the kernels call it: ``_prefetch_row(array, row)``.
_prefetch_row = cast(Callable[[npt.NDArray[np.uint64], np.int64], None], _prefetch_row_type)


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
        while end - at >= 8:  # the key's next 8 bytes as a little-endian word
            word = _word_at(data, at)
            low = _fmix(low ^ word)
            high = _fmix(high ^ word)
            at += 8
        if at < end:  # its last bytes, fewer than 8, the rest of the word zero
            word = np.uint64(0)
            shift = np.uint64(0)
            while at < end:
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
    table: npt.NDArray[np.uint64],
    hashes: npt.NDArray[np.uint64],
    offsets: npt.NDArray[np.int64],
    found: npt.NDArray[np.int64],
) -> int:
    """Map ``hashes[i]`` to ``offsets[i]`` in ``table`` (rows of the hash's two words and the offset plus
    one, 0 in an empty slot), in order, a key keeping the largest offset it is given, and note each key's
    slot in ``found[i]``; returns how many keys were new, or -1 when a key found no slot (the table is
    full)."""
    slots = len(table)
    modulus = np.uint64(slots)
    step_modulus = np.uint64(slots - 1)
    added = 0
    count = len(offsets)
    for i in range(count):
        if i + _PREFETCH_DISTANCE < count:
            _prefetch_row(table, np.int64(hashes[i + _PREFETCH_DISTANCE, 0] % modulus))
        low = hashes[i, 0]
        high = hashes[i, 1]
        stored = np.uint64(offsets[i] + 1)
        position = np.int64(low % modulus)
        step = np.int64(high % step_modulus) + 1
        settled = False
        for _ in range(slots):
            current = table[position, 2]
            if current == _EMPTY:
                table[position, 0] = low
                table[position, 1] = high
                table[position, 2] = stored
                added += 1
                settled = True
                break
            if table[position, 0] == low and table[position, 1] == high:
                if stored > current:
                    table[position, 2] = stored
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
def get(table: npt.NDArray[np.uint64], hashes: npt.NDArray[np.uint64], result: npt.NDArray[np.int64]) -> None:
    """``result[i]``: the offset mapped to ``hashes[i]`` in ``table`` (see :func:`put`), -1 where the key
    is not in it."""
    slots = len(table)
    modulus = np.uint64(slots)
    step_modulus = np.uint64(slots - 1)
    count = len(hashes)
    for i in range(count):
        if i + _PREFETCH_DISTANCE < count:
            _prefetch_row(table, np.int64(hashes[i + _PREFETCH_DISTANCE, 0] % modulus))
        low = hashes[i, 0]
        high = hashes[i, 1]
        position = np.int64(low % modulus)
        step = np.int64(high % step_modulus) + 1
        result[i] = -1
        for _ in range(slots):
            current = table[position, 2]
            if current == _EMPTY:
                break
            if table[position, 0] == low and table[position, 1] == high:
                result[i] = np.int64(current) - 1
                break
            position += step
            if position >= slots:
                position -= slots


@kernel
def offsets_at(
    table: npt.NDArray[np.uint64], slots: npt.NDArray[np.integer], result: npt.NDArray[np.int64]
) -> int:
    """``result[i]``: the offset mapped in slot ``slots[i]`` of ``table`` (see :func:`put`; -1: empty);
    returns -1, or the first slot outside the table (nothing is read outside it)."""
    count = len(slots)
    size = len(table)
    for i in range(count):
        if i + _PREFETCH_DISTANCE < count:
            ahead = np.int64(slots[i + _PREFETCH_DISTANCE])
            if 0 <= ahead < size:
                _prefetch_row(table, ahead)
        slot = np.int64(slots[i])
        if slot < 0 or slot >= size:
            return i
        result[i] = np.int64(table[slot, 2]) - 1
    return -1
