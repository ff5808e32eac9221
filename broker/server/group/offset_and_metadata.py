"""One committed offset of a group's partition, as the coordinator caches it and stores it (Kafka's
``OffsetAndMetadata``). Immutable: thread-safe."""

from __future__ import annotations

from typing import NamedTuple


class OffsetAndMetadata(NamedTuple):
    """What a commit stored for one partition."""

    offset: int
    #: The leader epoch of the committed record (-1: not given, OffsetCommit v5 and older).
    leader_epoch: int
    #: The client's metadata string ("" when it sent none).
    metadata: str
    commit_timestamp_ms: int
    #: When OffsetCommit v1 asked it to expire (-1: none; only read from records written by old Kafkas).
    expire_timestamp_ms: int = -1
