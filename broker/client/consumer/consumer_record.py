"""One record as the consumer hands it out."""

from __future__ import annotations

from typing import NamedTuple

from broker.record.record_header import Header


class ConsumerRecord(NamedTuple):
    """A record of ``topic-partition`` at ``offset``: key, value, headers and timestamp (ms since the epoch).

    ``timestamp_type`` is 0 for CreateTime (the producer's creation time, Lumber's default) and 1 for
    LogAppendTime. A named tuple rather than a frozen dataclass: the consumer makes one per record, and a
    tuple is several times cheaper to build; it is just as immutable.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp_type: int = 0

    def header(self, name: str) -> bytes | None:
        """The value of the first header called ``name`` (``None`` if there is none)."""
        for key, value in self.headers:
            if key == name:
                return value
        return None
