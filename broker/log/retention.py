"""The retention policy (the paper's "a simple time-based SLA"): which segments of a log are deleted.

A log deletes whole segments, oldest first, while the oldest one is past ``retention_ms`` (judged by its
largest record timestamp, or its file's modification time when it has none) or the log would still hold
at least ``retention_bytes`` without it. Never deleted: the active (last) segment, and any segment holding
offsets at or above the high watermark (not yet exposed to consumers). ``-1`` turns a limit off.

:func:`segments_past_retention` only decides; :meth:`broker.log.log.Log.apply_retention` calls it under
its lock and then publishes a view without them, moves the leader epoch cache's start
(:meth:`~broker.log.leader_epoch_cache.LeaderEpochCache.truncate_from_start`) and deletes their files. The
high watermark it respects is the exposed one: while replication is on, the replicated high watermark
caps it, so retention never deletes what the ISR has not replicated. A pure function: thread-safe.
"""

from __future__ import annotations

from broker.config import LogConfig
from broker.log.log_view import LogView
from broker.log.segment import Segment


def segments_past_retention(view: LogView, config: LogConfig, now_ms: int) -> list[Segment]:
    """The leading segments of ``view`` that retention deletes at ``now_ms`` (see the module docstring)."""
    total_bytes = sum(s.size_bytes for s in view.segments[:-1]) + view.end_position
    doomed: list[Segment] = []
    for segment in view.segments[:-1]:
        if segment.next_offset > view.high_watermark:
            break
        newest_ms = segment.max_timestamp_ms
        if newest_ms < 0:
            newest_ms = segment.last_modified_ms()
        expired = config.retention_ms >= 0 and now_ms - newest_ms > config.retention_ms
        oversized = config.retention_bytes >= 0 and total_bytes - segment.size_bytes >= config.retention_bytes
        if not (expired or oversized):
            break
        doomed.append(segment)
        total_bytes -= segment.size_bytes
    return doomed
