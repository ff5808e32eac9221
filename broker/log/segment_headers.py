"""How a loaded segment's indexes are checked against its ``.log`` file by the batch headers they point at
(:func:`check_loaded`, :meth:`~broker.log.segment.Segment.load`'s check).

The headers are read at their positions by the segment framer (:func:`~broker.log.segment_framer.read_header`,
the fetch path's reads too), with its checks and messages: a header that cannot be right is a
:class:`~broker.record.errors.CorruptRecordError` naming the file, position and offset. Stateless: runs on a
segment no one else uses yet.
"""

from __future__ import annotations

from broker.log.errors import CorruptIndexError
from broker.log.file_handle import FileHandle
from broker.log.offset_index import OffsetIndex
from broker.log.segment_framer import offset_regression, read_header, read_header_prefix
from broker.log.time_index import TimeIndex
from broker.record.batch_header import LOG_OVERHEAD, NO_TIMESTAMP
from broker.record.errors import CorruptRecordError

__all__ = ["check_loaded"]


def check_loaded(
    log: FileHandle, size: int, base_offset: int, offset_index: OffsetIndex, time_index: TimeIndex
) -> tuple[int, int, int]:
    """Check freshly loaded indexes against the log; return (next offset, max timestamp, rolling base).

    The first and last offset-index entries must point at batches with their offsets; the batches after
    the last entry must follow each other; the time index must not name offsets past the end.
    """
    where = str(log.path)
    for entry in (offset_index.first_entry(), offset_index.last_entry()):
        if entry is None:
            continue
        header = read_header_prefix(log, entry[1], size, where)
        if header[0] != entry[0]:
            raise CorruptIndexError(
                str(offset_index.path),
                f"entry ({entry[0]}, {entry[1]}) points at a batch with base offset {header[0]}",
            )
    last = offset_index.last_entry()
    position, next_offset = (last[1], last[0]) if last else (0, base_offset)
    max_ts = NO_TIMESTAMP
    while position < size:
        header = read_header(log, position, size, where)
        regression = offset_regression(next_offset, header[0])
        if regression is not None:
            raise CorruptRecordError(where, regression, position=position)
        next_offset = header[0] + header[6] + 1
        max_ts = max(max_ts, header[8])
        position += LOG_OVERHEAD + header[1]
    time_last = time_index.last_entry()
    if time_last is not None:
        if time_last[1] >= next_offset:
            raise CorruptIndexError(
                str(time_index.path),
                f"last entry names offset {time_last[1]}, the segment ends before {next_offset}",
            )
        max_ts = max(max_ts, time_last[0])
    rolling_base = read_header(log, 0, size, where)[8] if size else NO_TIMESTAMP
    return next_offset, max_ts, rolling_base
