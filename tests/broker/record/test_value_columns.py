"""The consumer's numpy pass agrees with the values walk on random runs of values (equal sizes, odd sizes,
nulls, keys), from any ``from_offset``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.record.compression import CompressionType
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_walker import walk_values
from broker.record.value_columns import decode_values_vectorised

VALUE_RUNS = st.lists(
    st.tuples(st.integers(min_value=1, max_value=200), st.none() | st.integers(min_value=0, max_value=400)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(VALUE_RUNS, st.integers(min_value=0, max_value=3000), st.booleans())
def test_vectorised_and_python_value_decoders_agree(
    runs: list[tuple[int, int | None]], skip: int, keyed: bool
) -> None:
    # runs of equal-size values (the vectorised path checks them at once) mixed with odd ones and nulls
    builder = RecordBatchBuilder(CompressionType.NONE, base_offset=1_000)
    expected: list[bytes | None] = []
    for run, size in runs:
        for i in range(run):
            value = None if size is None else bytes([i % 256]) * size
            builder.append(5 + i, b"key" if keyed else None, value, (("host", b"h"),))
            expected.append(value)
    data = RecordBatch(builder.build()).buffer[61:].tobytes()
    count = len(expected)
    from_offset = 1_000 + min(skip, count)
    python = walk_values(data, count, 1_000, from_offset)
    vectorised = decode_values_vectorised([data], [count], [1_000], [from_offset])
    assert list(python[0]) == list(range(from_offset, 1_000 + count))
    assert python[1] == expected[from_offset - 1_000 :]
    assert vectorised is not None
    assert list(vectorised[0][0]) == list(python[0])
    assert vectorised[0][1] == python[1]
