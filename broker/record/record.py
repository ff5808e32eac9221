"""One record of a record batch v2: its layout, and :class:`Record`, a record decoded.

A record (varints as :mod:`broker.record.varint`)::

    length          varint   bytes after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - firstTimestamp of the batch
    offsetDelta     varint   offset - baseOffset of the batch
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headers         the headers block (:mod:`broker.record.record_header`)

Records are read by :mod:`broker.record.record_walker` and written by :mod:`broker.record.record_encoder`.
"""

from __future__ import annotations

from typing import NamedTuple

from broker.record.record_header import Header

__all__ = ["Record"]


class Record(NamedTuple):
    """One decoded record: its absolute offset, timestamp, key, value and headers.

    A named tuple rather than a frozen dataclass: the walker makes one per record, and a tuple is several
    times cheaper to build; it is just as immutable.
    """

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
