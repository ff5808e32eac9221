"""What an append did (:class:`AppendInfo`): the answer of :meth:`broker.log.log.Log.append` and of a
follower's append, which the produce path turns into its response. Immutable."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: the offsets it assigned and what it wrote."""

    first_offset: int
    last_offset: int
    #: The largest record timestamp among the appended batches (-1 when none had one).
    max_timestamp_ms: int
    record_count: int
    batch_count: int
    size_bytes: int
    #: True when every batch was a retry of an appended one: nothing was written, and the offsets are
    #: the original batch's (an idempotent producer's duplicate).
    duplicate: bool = False
    #: The time a ``LogAppendTime`` log stamped on the batches (the produce response's
    #: ``log_append_time_ms``); -1 for ``CreateTime``. A duplicate carries the original batch's max
    #: timestamp, whatever the timestamp type, as Kafka answers it.
    log_append_time_ms: int = -1
