"""The cleaner's offset map (broker/log/offset_map.py): the key hash by columns, and puts in order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from broker.log.offset_map import OffsetMap, hash_key_columns, hash_keys


def test_a_key_hashes_the_same_wherever_it_lies_and_whatever_is_hashed_with_it() -> None:
    rng = random.Random(3)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    alone = np.concatenate([hash_keys([key]) for key in keys])
    assert (hash_keys(keys) == alone).all()
    # the same keys at other positions of a buffer, with other bytes around them
    data = bytearray()
    starts = []
    for key in keys:
        data += bytes([rng.randrange(256) for _ in range(rng.randrange(0, 9))])
        starts.append(len(data))
        data += key
    data += bytes(rng.randrange(256) for _ in range(7))
    found = hash_key_columns(
        np.frombuffer(bytes(data), dtype=np.uint8),
        np.asarray(starts, dtype=np.int64),
        np.asarray([len(k) for k in keys], dtype=np.int64),
    )
    assert (found == alone).all()


def test_keys_differing_only_by_trailing_zero_bytes_or_length_hash_apart() -> None:
    keys = [b"", b"\x00", b"\x00" * 7, b"\x00" * 8, b"\x00" * 9, b"a", b"a\x00", b"abcdefgh", b"abcdefgh\x00"]
    keys += [b"key-%08d" % i for i in range(100_000)]
    assert len({tuple(pair) for pair in hash_keys(keys).tolist()}) == len(keys)


def test_puts_keep_the_last_offset_of_each_key_and_gets_find_them() -> None:
    offset_map = OffsetMap(64 * 1024)
    keys = [b"k%d" % (i % 300) for i in range(1_000)]
    for start in range(0, 1_000, 128):
        chunk = keys[start : start + 128]
        offset_map.put_many(hash_keys(chunk), np.arange(start, start + len(chunk), dtype=np.int64))
    assert offset_map.size == 300
    found = offset_map.get_many(hash_keys([b"k%d" % i for i in range(300)] + [b"absent"]))
    assert found.tolist() == [900 + i if i < 100 else 600 + i for i in range(300)] + [-1]


def test_a_nearly_full_map_takes_keys_that_contend_for_slots_and_repeats_within_one_put() -> None:
    """Many keys probing the same empty slots in one put (a table of 1,021 slots filled to 0.9), each key
    given several times in that put: one claim wins a slot, repeats settle on it, the largest offset stays,
    and the slots returned read back the same offsets as lookups."""
    offset_map = OffsetMap(1_021 * 24)
    assert offset_map.slots == 1_021
    rng = random.Random(5)
    keys = [b"key-%d" % rng.randrange(10**9) for _ in range(offset_map.max_entries)]
    puts = [keys[i % len(keys)] for i in range(3 * len(keys))]
    rng.shuffle(puts)
    slots = offset_map.put_many(hash_keys(puts), np.arange(len(puts), dtype=np.int64))
    assert offset_map.size == len(keys) == 918
    last = {key: offset for offset, key in enumerate(puts)}  # later offsets replace earlier ones
    assert offset_map.get_many(hash_keys(keys)).tolist() == [last[k] for k in keys]
    assert offset_map.offsets_at(slots).tolist() == [last[k] for k in puts]
    assert len(set(slots.tolist())) == len(keys)
    # a second put of some of them with later offsets, and a few new keys
    more = keys[:100] + [b"new-%d" % i for i in range(10)]
    offset_map.put_many(hash_keys(more), np.arange(10_000, 10_000 + len(more), dtype=np.int64))
    assert offset_map.size == 928
    assert offset_map.get_many(hash_keys(more)).tolist() == list(range(10_000, 10_000 + len(more)))
    assert offset_map.get_many(hash_keys(keys[100:])).tolist() == [last[k] for k in keys[100:]]


def test_a_key_outside_its_data_is_refused_by_name_and_a_full_table_overflows() -> None:
    data = np.frombuffer(b"abcdefgh", dtype=np.uint8)
    with pytest.raises(ValueError, match=r"key #1 of 2: 4 bytes at position 6, outside the 8 bytes"):
        hash_key_columns(data, np.asarray([0, 6], dtype=np.int64), np.asarray([3, 4], dtype=np.int64))
    offset_map = OffsetMap(11 * 24)
    assert offset_map.slots == 11
    keys = [b"key-%d" % i for i in range(11)]
    slots = offset_map.put_many(hash_keys(keys), np.arange(11, dtype=np.int64))
    assert sorted(slots.tolist()) == list(range(11))  # every slot taken, each by one key
    assert offset_map.size == 11
    with pytest.raises(OverflowError, match="the offset map's 11 slots are full"):
        offset_map.put_many(hash_keys([b"one more"]), np.asarray([11], dtype=np.int64))
    # keys already in it still take later offsets
    offset_map.put_many(hash_keys(keys[:2]), np.asarray([20, 21], dtype=np.int64))
    assert offset_map.get_many(hash_keys([*keys[:3], b"absent"])).tolist() == [20, 21, 2, -1]
    # slots read back as the cleaner keeps them (int32), and a slot outside the table is refused
    assert offset_map.offsets_at(slots[:3].astype(np.int32)).tolist() == [20, 21, 2]
    with pytest.raises(ValueError, match=r"slot #1 of 2, 11, is outside the map"):
        offset_map.offsets_at(np.asarray([slots[0], 11], dtype=np.int64))
    offset_map.clear()
    assert offset_map.size == 0
    assert offset_map.get_many(hash_keys(keys)).tolist() == [-1] * 11
    assert offset_map.offsets_at(slots).tolist() == [-1] * 11
