from __future__ import annotations

import random
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.producer.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# Apache Kafka's own vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2)
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_matches_java_vectors() -> None:
    for data, expected in JAVA_MURMUR2.items():
        assert murmur2(data) == expected, data


def test_murmur2_of_views_and_empty_input() -> None:
    assert murmur2(bytearray(b"foobar")) == -790332482
    assert murmur2(memoryview(b"xfoobar")[1:]) == -790332482
    assert murmur2(b"") == kafka_python_murmur2(b"") - (1 << 32) * (kafka_python_murmur2(b"") >= 1 << 31)


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    theirs = kafka_python_murmur2(data)
    assert murmur2(data) & 0xFFFFFFFF == theirs & 0xFFFFFFFF


def test_to_positive_is_the_low_31_bits_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF
    assert to_positive(5) == 5


def test_partition_for_key_is_javas_choice() -> None:
    # toPositive(murmur2("foobar")) % n, computed by hand from the Java vector
    positive = -790332482 & 0x7FFFFFFF
    for count in (1, 3, 12, 100):
        assert partition_for_key(b"foobar", count) == positive % count
    assert partition_for_key(b"21", 12) == (-973932308 & 0x7FFFFFFF) % 12


def test_sticky_partitioner_sticks_until_a_new_batch_then_moves_elsewhere() -> None:
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 6)
    assert all(sticky.partition("t", 6) == first for _ in range(20))
    seen = {first}
    current = first
    for _ in range(60):
        following = sticky.on_new_batch("t", 6, current)
        assert following != current
        assert sticky.partition("t", 6) == following
        seen.add(following)
        current = following
    assert seen == set(range(6))


def test_sticky_partitioner_switches_once_for_racing_callers() -> None:
    sticky = StickyPartitioner(random.Random(1))
    old = sticky.partition("t", 4)
    new = sticky.on_new_batch("t", 4, old)
    # a second caller that also saw the old partition's batch close does not move it again
    assert sticky.on_new_batch("t", 4, old) == new


def test_sticky_partitioner_single_partition_and_topics_apart() -> None:
    sticky = StickyPartitioner(random.Random(3))
    assert sticky.partition("one", 1) == 0
    assert sticky.on_new_batch("one", 1, 0) == 0
    assert 0 <= sticky.partition("other", 3) < 3
    # a partition count that shrank picks again
    sticky.on_new_batch("other", 3, sticky.partition("other", 3))
    assert sticky.partition("other", 1) == 0
