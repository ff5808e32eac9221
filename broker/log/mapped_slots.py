"""Where the cleaner's map phase put each keyed record's key in the offset map (:class:`MappedSlots`), so
that the rewrite reads a record's mapped offset without hashing its key again (:mod:`broker.log.cleaner`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from broker.log.offset_map import Offsets
from broker.log.segment import Segment


class MappedSlots:
    """Where the map phase put the key of each keyed record (its slot in the offset map: a key keeps its
    slot until the map is cleared), by segment and batch position, so that the rewrite reads each
    record's mapped offset with one gather (:meth:`OffsetMap.offsets_at`) instead of hashing its key and
    probing again. Bounded: slots of at most ``max_records`` records (4 bytes each; the cleaner takes half
    as many as the map has slots: a twelfth of its memory); the rest are looked up. A segment's are
    dropped once it is rewritten. One pass's, of one thread."""

    def __init__(self, max_records: int) -> None:
        self._room = max_records
        self._parts: dict[Segment, list[tuple[Offsets, Offsets, npt.NDArray[np.int32]]]] = {}
        self._joined: dict[Segment, tuple[Offsets, Offsets, npt.NDArray[np.int32]]] = {}

    def add(self, segment: Segment, positions: Offsets, keyed: Offsets, slots: Offsets) -> None:
        """The batches at ``positions`` (in the file) of ``segment`` hold ``keyed`` keyed records each,
        whose keys went to ``slots``, in order."""
        if len(slots) > self._room:
            self._room = 0
            return
        self._room -= len(slots)
        self._parts.setdefault(segment, []).append((positions, keyed.copy(), slots.astype(np.int32)))

    def forget(self, segment: Segment) -> None:
        self._parts.pop(segment, None)
        self._joined.pop(segment, None)

    def slots_of(self, segment: Segment, positions: Offsets) -> npt.NDArray[np.int32] | None:
        """The slots of the keyed records of the batches at ``positions`` (consecutive batches of
        ``segment``), or None unless every one of them was put."""
        joined = self._joined.get(segment)
        if joined is None:
            parts = self._parts.pop(segment, None)
            if not parts:
                return None
            all_positions = np.concatenate([p[0] for p in parts])
            starts = np.zeros(len(all_positions) + 1, dtype=np.int64)
            np.cumsum(np.concatenate([p[1] for p in parts]), out=starts[1:])
            joined = (all_positions, starts, np.concatenate([p[2] for p in parts]))
            self._joined[segment] = joined
        all_positions, starts, slots = joined
        first = int(np.searchsorted(all_positions, positions[0]))
        stop = first + len(positions)
        if stop > len(all_positions) or not np.array_equal(all_positions[first:stop], positions):
            return None
        return slots[int(starts[first]) : int(starts[stop])]
