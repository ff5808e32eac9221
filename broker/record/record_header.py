"""A record's headers: the one ``Header`` type and the headers block of a record.

Layout (varints as :mod:`broker.record.varint`)::

    headerCount        varint
    per header:
      headerKeyLength  varint   bytes of the key
      headerKey        UTF-8
      headerValueLength varint  -1 for a null value
      headerValue      bytes

A record without headers carries the single byte ``0x00``. Lumber's producers put the producing host in a
``host`` header, which the audit counts by.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.record.varint import encode_varint

__all__ = ["NO_HEADERS", "Header", "encode_headers"]

#: One header: its key and its value (``None`` for a null value).
Header = tuple[str, bytes | None]

#: The headers block of a record without headers: a count of 0.
NO_HEADERS = b"\x00"


def encode_headers(headers: Sequence[Header]) -> bytes:
    """The headers block of a record: count, then each key (UTF-8) and value (-1 length for null)."""
    if not headers:
        return NO_HEADERS
    parts = [encode_varint(len(headers))]
    for key, value in headers:
        key_bytes = key.encode("utf-8")
        parts.append(encode_varint(len(key_bytes)))
        parts.append(key_bytes)
        if value is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(value)))
            parts.append(bytes(value))
    return b"".join(parts)
