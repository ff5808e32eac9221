"""Record data that is not in memory: a byte range of a file that the server sends with ``sendfile``.

The protocol layer never reads record batches; a Fetch response's ``records`` field may hold any object with
a ``size_bytes`` attribute (:class:`broker.log.file_region.FileRegion` is one) in place of bytes, and
:func:`broker.protocol.codec.encode_fetch_response` returns the response as chunks in which such regions
stand alone, their length prefixes already written into the bytes before them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Region(Protocol):
    """``size_bytes`` bytes of record batches that the caller will send itself."""

    @property
    def size_bytes(self) -> int: ...


#: What a ``records`` field holds: bytes when encoding or decoding in memory (decoded records are a
#: zero-copy ``memoryview`` of the frame), or a :class:`Region` in a Fetch response the server encodes.
RecordsData = bytes | bytearray | memoryview | Region
