"""The layouts of ``__consumer_offsets`` records and the group -> partition hash, byte for byte as Kafka's."""

from __future__ import annotations

import struct

import pytest

from broker.protocol import compiler
from broker.protocol.errors import EncodeError
from broker.server.group import offsets_topic_records as records
from broker.server.group.offsets_topic_records import java_string_hash, partition_for


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text.encode())) + text.encode()


def test_java_string_hash_and_kafkas_partition_for() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units: a surrogate pair
    assert java_string_hash("polygenelubricants") == -(2**31)  # Java's Integer.MIN_VALUE ...
    assert partition_for("polygenelubricants", 50) == 0  # ... which Kafka's Utils.abs maps to 0
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # Java's classic collision
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("zz", 7) == abs(java_string_hash("zz")) % 7


def test_offset_commit_key_and_value_layouts() -> None:
    key = records.offset_commit_key("g", "topic", 7)
    assert key == struct.pack(">h", 1) + _string("g") + _string("topic") + struct.pack(">i", 7)
    value = records.offset_commit_value(42, 5, "meta", 1_700_000_000_000)
    assert value == struct.pack(">hqi", 3, 42, 5) + _string("meta") + struct.pack(">q", 1_700_000_000_000)
    assert records.decode_key(key, "here") == records.OffsetCommitKey("g", "topic", 7)
    assert records.decode_offset_commit_value(value, "here") == records.OffsetCommitValue(
        42, 5, "meta", 1_700_000_000_000, -1
    )
    # version 1 (written by OffsetCommit v1 on old Kafkas) carries an expire timestamp, no leader epoch
    v1 = struct.pack(">hq", 1, 9) + _string("") + struct.pack(">qq", 100, 200)
    assert records.decode_offset_commit_value(v1, "here") == records.OffsetCommitValue(9, -1, "", 100, 200)


@pytest.mark.parametrize(
    ("offset", "epoch", "metadata", "timestamp"),
    [(0, -1, "", 0), (2**63 - 1, 2**31 - 1, "h\u00e9llo \u2713" * 10, -1), (-1, -(2**31), "x" * 32767, 123)],
)
def test_offset_commit_value_packed_as_the_declared_layout(
    offset: int, epoch: int, metadata: str, timestamp: int
) -> None:
    declared = records.OffsetCommitValue(offset, epoch, metadata, timestamp)
    packed = records.offset_commit_value(offset, epoch, metadata, timestamp)
    assert packed == struct.pack(">h", 3) + b"".join(
        bytes(c)
        for c in compiler.encode(declared, records.OffsetCommitValue, 3, flexible=False, context="v3")
    )
    assert records.decode_offset_commit_value(packed, "here") == declared


def test_offset_commit_value_out_of_range_names_the_field() -> None:
    with pytest.raises(EncodeError, match=r"OffsetCommitValue v3: offset: 9223372036854775808 does not fit"):
        records.offset_commit_value(2**63, 0, "", 0)
    with pytest.raises(EncodeError, match=r"OffsetCommitValue v3: metadata: string of 32768 bytes exceeds"):
        records.offset_commit_value(0, 0, "x" * 32768, 0)


def test_group_metadata_layouts_and_refusals() -> None:
    key = records.group_metadata_key("grp")
    assert key == struct.pack(">h", 2) + _string("grp")
    member = records.MemberMetadataValue("m-1", "inst", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg")
    value = records.GroupMetadataValue("consumer", 3, "range", "m-1", 1234, [member])
    encoded = records.group_metadata_value(value)
    expected = (
        struct.pack(">h", 3)
        + _string("consumer")
        + struct.pack(">i", 3)
        + _string("range")
        + _string("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + _string("m-1")
        + _string("inst")
        + _string("client")
        + _string("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 3)
        + b"asg"
    )
    assert encoded == expected
    assert records.decode_key(key, "here") == records.GroupMetadataKey("grp")
    assert records.decode_group_metadata_value(encoded, "here") == value
    with pytest.raises(
        records.OffsetsRecordError, match=r"at 7: OffsetCommitKey version 5 is not one Lumber"
    ):
        records.decode_key(struct.pack(">h", 5) + _string("g"), "at 7")
    with pytest.raises(records.OffsetsRecordError, match=r"at 8: "):
        records.decode_offset_commit_value(struct.pack(">h", 3) + b"\x00", "at 8")


def test_group_key_prefix_tells_a_groups_keys_from_the_others() -> None:
    prefix = records.group_key_prefix("ab")
    assert prefix == b"\x00\x02ab"
    mine = [records.offset_commit_key("ab", "t", 3), records.group_metadata_key("ab")]
    others = [
        records.offset_commit_key("abc", "t", 3),  # the group's name is a prefix of this one's
        records.offset_commit_key("a", "bt", 3),
        records.group_metadata_key("AB"),
    ]
    assert [key.startswith(prefix, 2) for key in mine + others] == [True, True, False, False, False]
