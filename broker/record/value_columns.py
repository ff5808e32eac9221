"""The consumer's numpy strategy of the record walk: the offsets and values of many batches in one pass.

A strategy of :mod:`broker.record.record_walker`: :func:`decode_values_vectorised` returns what
:func:`~broker.record.record_walker.walk_values` returns for each batch, or ``None`` when it cannot vouch
for them (then the walk decodes, or names the corruption). It costs about 30 us per call, plus about 1 us
per batch, plus 0.07-0.1 us per record when records have the same size; records of varied sizes are
located one by one (about 0.3 us per record), then decoded at once. The consumer uses it from
:data:`~broker.record.record_walker.VECTORISED_MIN_RECORDS` records per call (the measured break-even).

numpy is imported on first use (:func:`load_decoder`); without numpy every call declines. Stateless: safe
from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import accumulate, pairwise
from typing import TYPE_CHECKING

from broker.record.varint import decode_varint

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["decode_values_vectorised", "load_decoder"]


@cache
def load_decoder() -> bool:
    """Import numpy, which the vectorised decoder needs, now rather than in the middle of the first
    decoding (50-100 ms, once per process); ``False`` when numpy is not installed (the Python walk then
    decodes everything)."""
    try:
        import numpy  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


#: Equal-size records in a row worth one vectorised check (fewer are walked one by one).
_MIN_RUN = 16
#: Equal-size values at an equal distance in a row worth one strided copy (fewer are sliced one by one).
_MIN_VALUE_RUN = 8
_MAX_VARINT_BYTES = 10
#: Appended to the records so that reading a varint at any record's end stays inside the array.
_PADDING = bytes(2 * _MAX_VARINT_BYTES)


def decode_values_vectorised(
    bodies: Sequence[bytes | memoryview],
    counts: Sequence[int],
    base_offsets: Sequence[int],
    from_offsets: Sequence[int],
) -> list[tuple[range, list[bytes | None]]] | None:
    """Per batch (its record bytes, record count, base offset and ``from_offset``), what
    :func:`~broker.record.record_walker.walk_values` returns, all decoded in one numpy pass; or ``None``
    when some batch is not as expected (malformed, or offsets other than ``base_offset``,
    ``base_offset + 1``, ... in order), and the Python walk must look at each batch.

    The batches' records are concatenated. The one sequential part is finding where each record starts:
    see :func:`_record_bounds`. Every batch must end exactly where its last record does. Then every field
    of every record is read at once, one varint per record per pass, and every value is checked to lie
    inside its record, so a record is accepted only when the walk would accept it too. Values that have
    the same length and lie at the same distance from each other are copied out by one strided numpy view
    (``.tolist()`` of a ``V<length>`` array gives ``bytes``), others by slicing.
    """
    if not load_decoder():
        return None
    import numpy as np  # noqa: PLC0415 - loaded on first use (see load_decoder)

    total = sum(counts)
    if total <= 0 or min(counts) < 0:
        return None
    data = b"".join([*bodies, _PADDING])
    end = len(data) - len(_PADDING)
    arr = np.frombuffer(data, dtype=np.uint8)
    bounds = _record_bounds(data, arr, total, end)
    if bounds is None:
        return None
    starts, ends = bounds
    first_indexes = list(accumulate(counts, initial=0))[:-1]
    local = np.arange(total, dtype=np.int64)  # each record's index in its batch
    if len(bodies) > 1:
        body_ends = list(accumulate(len(body) for body in bodies))
        if 0 in counts:
            if any(count == 0 and len(body) for count, body in zip(counts, bodies, strict=True)):
                return None  # a batch without records has bytes
            body_ends = [e for e, count in zip(body_ends, counts, strict=True) if count]
        last_indexes = [
            first + count - 1 for first, count in zip(first_indexes, counts, strict=True) if count
        ]
        if np.count_nonzero(ends[last_indexes] != body_ends):
            return None  # some batch's records do not end where the batch does
        size = counts[0]
        if counts.count(size) == len(counts):
            local %= size
        else:
            local -= np.repeat(first_indexes, counts)
    try:
        position = _varint_ends(arr, starts + 1)  # attributes: unused; timestamp delta: not needed
        if position is None:
            return None
        deltas = arr[position]
        if not np.count_nonzero(deltas >= 0x80):  # one byte each: the zigzag of delta k >= 0 is 2k
            if np.count_nonzero(deltas != 2 * local):
                return None  # offsets not consecutive from the base offset: the walk sorts them out
            position = position + 1
        else:
            parsed = _varints(arr, position)
            if parsed is None or np.count_nonzero(parsed[0] != local):
                return None
            position = parsed[1]
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        key_lengths, position = parsed
        if isinstance(key_lengths, int):
            if key_lengths < -1:
                return None
            if key_lengths > 0:
                position = position + key_lengths
        else:
            if np.count_nonzero(key_lengths < -1):
                return None
            position = position + np.maximum(key_lengths, 0)
        parsed = _varints(arr, position)
        if parsed is None:
            return None
        value_lengths, value_starts = parsed
    except IndexError:  # a key length pointing past the end of the array
        return None
    if isinstance(value_lengths, int):
        if value_lengths < -1:
            return None
        value_ends = value_starts + max(value_lengths, 0)
    else:
        if np.count_nonzero(value_lengths < -1):
            return None
        value_ends = value_starts + np.maximum(value_lengths, 0)
    if np.count_nonzero(value_ends > ends):
        return None
    values = _values(data, value_starts, value_lengths, value_ends)
    out: list[tuple[range, list[bytes | None]]] = []
    for first, count, base_offset, from_offset in zip(
        first_indexes, counts, base_offsets, from_offsets, strict=True
    ):
        skip = from_offset - base_offset
        if skip <= 0:
            out.append((range(base_offset, base_offset + count), values[first : first + count]))
        elif skip < count:
            out.append((range(from_offset, base_offset + count), values[first + skip : first + count]))
        else:
            out.append((range(0), []))
    return out


def _record_bounds(
    data: bytes, arr: NDArray[np.uint8], count: int, end: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """Where each of ``count`` records in ``data[:end]`` starts (after its length varint) and ends, or
    ``None`` when they do not fill ``data[:end]`` exactly or a length is below the minimum.

    Done by runs: when a record is ``size`` bytes long, the next ``k`` records are presumed to be too, and
    numpy checks that the length varint at each presumed start says exactly that; the longest prefix that
    passes is exact by induction (each checked start is the previous start plus the previous record's own
    length). Records of varying sizes are walked one by one, in chunks that grow while runs keep failing.
    """
    import numpy as np  # noqa: PLC0415

    starts = np.empty(count, dtype=np.int64)  # first byte after each record's length varint
    ends = np.empty(count, dtype=np.int64)  # first byte after each record
    index = 0
    pos = 0
    chunk = 32
    try:
        while index < count:
            byte = data[pos]
            if byte < 0x80:
                width = 1
                length = (byte >> 1) ^ -(byte & 1)
            else:
                length, after = decode_varint(data, pos)
                width = after - pos
            size = width + length
            if length < 6:
                return None
            room = min(count - index, (end - pos) // size)
            if room >= _MIN_RUN:
                presumed = np.arange(pos, pos + size * room, size, dtype=np.int64)
                same = arr[presumed] == byte
                for k in range(1, width):
                    same &= arr[presumed + k] == data[pos + k]
                run = room if np.count_nonzero(same) == room else int(np.argmin(same))
                if run >= _MIN_RUN:
                    starts[index : index + run] = presumed[:run] + width
                    ends[index : index + run] = presumed[:run] + size
                    index += run
                    pos += run * size
                    chunk = 32
                    continue
            stop = min(count, index + chunk)
            walked_starts: list[int] = []
            walked_ends: list[int] = []
            for _ in range(stop - index):
                byte = data[pos]
                if byte < 0x80:
                    length = (byte >> 1) ^ -(byte & 1)
                    pos += 1
                else:
                    second = data[pos + 1]
                    if second < 0x80:
                        raw = (byte & 0x7F) | (second << 7)
                        length = (raw >> 1) ^ -(raw & 1)
                        pos += 2
                    else:
                        length, pos = decode_varint(data, pos)
                if length < 6:
                    return None
                walked_starts.append(pos)
                pos += length
                walked_ends.append(pos)
            starts[index:stop] = walked_starts
            ends[index:stop] = walked_ends
            index = stop
            chunk = min(2 * chunk, 4096)
    except (IndexError, ValueError):
        return None
    if pos != end:
        return None
    return starts, ends


def _varint_ends(arr: NDArray[np.uint8], at: NDArray[np.int64]) -> NDArray[np.int64] | None:
    """Where the varints starting at ``at`` end (``None`` when one is longer than 10 bytes)."""
    import numpy as np  # noqa: PLC0415

    more = arr[at] >= 0x80
    if not np.count_nonzero(more):
        return at + 1
    after = at + 1
    for _ in range(1, _MAX_VARINT_BYTES):
        after = after + more
        more &= arr[after - 1] >= 0x80
        if not np.count_nonzero(more):
            return after
    return None


def _varints(
    arr: NDArray[np.uint8], at: NDArray[np.int64]
) -> tuple[int | NDArray[np.int64], NDArray[np.int64]] | None:
    """The zigzag varints starting at ``at`` (one ``int`` when they are all the same one or two bytes),
    and where they end; ``None`` when one is longer than 10 bytes."""
    import numpy as np  # noqa: PLC0415

    first = arr[at]
    byte = int(first[0])
    if not np.count_nonzero(first != byte):  # the same first byte everywhere
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), at + 1
        second = arr[at + 1]
        next_byte = int(second[0])
        if next_byte < 0x80 and not np.count_nonzero(second != next_byte):
            raw = (byte & 0x7F) | (next_byte << 7)
            return (raw >> 1) ^ -(raw & 1), at + 2
    value = first.astype(np.int64)
    more = value >= 0x80
    if not np.count_nonzero(more):
        return (value >> 1) ^ -(value & 1), at + 1
    value &= 0x7F
    after = at + 1
    for shift in range(7, 7 * _MAX_VARINT_BYTES, 7):
        byte_array = arr[after].astype(np.int64)
        value |= np.where(more, (byte_array & 0x7F) << shift, 0)
        after = after + more
        more &= byte_array >= 0x80
        if not np.count_nonzero(more):
            return (value >> 1) ^ -(value & 1), after
    return None


def _values(
    data: bytes,
    starts: NDArray[np.int64],
    lengths: int | NDArray[np.int64],
    ends: NDArray[np.int64],
) -> list[bytes | None]:
    """``data[start:end]`` for each value (``None`` where the length is -1), as ``bytes``; ``lengths``
    is one ``int`` when all values have that length."""
    import numpy as np  # noqa: PLC0415

    count = len(starts)
    if isinstance(lengths, int):
        if lengths < 0:
            return [None] * count
        if lengths == 0:
            return [b""] * count
        if count >= _MIN_VALUE_RUN:
            # Runs of values at an equal distance from each other: one strided view, copied out at once.
            distances = np.diff(starts)
            breaks = np.flatnonzero(distances[1:] != distances[:-1])
            if len(breaks) * _MIN_VALUE_RUN <= count:
                dtype = np.dtype((np.void, lengths))
                edges = [0, *(breaks + 1).tolist(), count]
                values: list[bytes | None] = []
                for first, stop in pairwise(edges):
                    view = np.ndarray(
                        (stop - first,),
                        dtype=dtype,
                        buffer=data,
                        offset=int(starts[first]),
                        strides=(int(distances[first]),),  # every run starts before the last value
                    )
                    values.extend(view.tolist())
                return values
        return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    values = [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    if np.count_nonzero(lengths < 0):
        for null in np.flatnonzero(lengths < 0).tolist():
            values[null] = None
    return values
