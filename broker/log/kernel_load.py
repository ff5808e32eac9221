"""Loading the storage's compiled kernels (:mod:`broker.compiled`) into a process: numba's import, and each
kernel compiled (the first time on a machine) or loaded from its cache, by running each once on a batch of
three records, for every argument type a pass of the log cleaner gives it (a chunk's buffer is writable,
bytes joined from batches are not). Then :func:`broker.compiled.loaded` is true.

Two ways in, one load per process:

- :func:`load_kernels` waits for it: the log cleaner's first pass (a broker whose cleaner threads never
  find a log to clean never imports numba), or whoever does not want a pass to include it (benchmarks).
- :func:`start_loading_kernels` starts it and returns at once: the first produce request of many records
  to a compacted topic (:mod:`broker.log.log_validator`), whose key check uses the kernels once loaded and
  never waits for them (numba's import and a load from the cache take about 0.4 s, a first compile 5-11 s).

The load runs on a thread of its own, even when waited for: numba's compiler keeps exceptions it raised and
caught, whose tracebacks reach up the stack of the thread that compiled, so compiled from within a pass
they kept that pass's frame (the segments it replaced, their open files) alive until a garbage collection.

Concurrency: ``_lock`` guards ``_loading``, the one :class:`_Loading` of the process (a new one is started
only after one failed, so a cleaner pass retries a load that failed). A :class:`_Loading`'s ``failure``
is written by its thread before it ends and read by whoever joined it (the join orders the two).
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from broker import compiled
from broker.log.errors import LogStorageError
from broker.log.offset_map import OffsetMap, hash_key_columns, hash_keys
from broker.record.batch_header import HEADER_SIZE
from broker.record.key_columns import KeyColumns
from broker.record.record_batch import RecordBatch

__all__ = ["load_kernels", "start_loading_kernels"]

logger = logging.getLogger(__name__)


class _Loading:
    """One load, on its thread; ``failure``: what it raised, once the thread ended."""

    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="lumber-kernels-load", daemon=True)

    def _run(self) -> None:
        try:
            _warm_up()
        except BaseException as exc:
            logger.exception("cannot load the compiled kernels (numba)")
            self.failure = exc
        else:
            compiled.mark_loaded()

    @property
    def failed(self) -> bool:
        return not self.thread.is_alive() and self.failure is not None


_lock = threading.Lock()
_loading: _Loading | None = None


def _start() -> _Loading:
    global _loading  # noqa: PLW0603 - the process's one load (see the module docstring)
    with _lock:
        if _loading is None or _loading.failed:
            _loading = _Loading()
            _loading.thread.start()
        return _loading


def start_loading_kernels() -> None:
    """Start loading the kernels, unless loaded or loading, and return at once."""
    if not compiled.loaded():
        _start()


def load_kernels() -> None:
    """Load the kernels, unless loaded, and wait until they are; raises what the load raised."""
    if compiled.loaded():
        return
    loading = _start()
    loading.thread.join()
    if loading.failure is not None:
        raise loading.failure


def _warm_up() -> None:
    """Run each kernel once, for each argument type a pass gives it (on the loading thread)."""
    from broker.log.cleaner_kernels import copy_kept, keep_records  # noqa: PLC0415 - numba, on first use
    from broker.record.batch_header_columns import batch_header_columns  # noqa: PLC0415
    from broker.record.key_columns import key_columns_in  # noqa: PLC0415
    from broker.record.record_batch_builder import RecordBatchBuilder  # noqa: PLC0415

    builder = RecordBatchBuilder()
    for key, value in ((b"a", b"1"), (b"b", None), (b"a", b"2")):
        builder.append(0, key, value)
    batch = RecordBatch(builder.build())
    offset_map = OffsetMap(1_024 * 24)
    batch_header_columns(bytearray(batch.buffer))  # a chunk's read
    spans = ([HEADER_SIZE], [batch.size_bytes], [batch.record_count], [batch.base_offset])

    def walked(data: bytes | bytearray, keys_only: bool) -> KeyColumns:
        columns = key_columns_in(data, *spans, keys_only=keys_only)
        if columns is None:
            raise LogStorageError("the cleaner's kernels declined a batch of three records")
        return columns

    # read-only bytes (batches joined: the batch path) and a writable buffer (a chunk's read), the last
    for data, keys_only in (
        (bytes(batch.buffer), True),
        (bytes(batch.buffer), False),
        (bytearray(batch.buffer), True),
    ):
        columns = walked(data, keys_only)
        hash_key_columns(columns.array, columns.key_starts, columns.key_lengths)
    columns = walked(bytearray(batch.buffer), False)
    hashes = hash_key_columns(columns.array, columns.key_starts, columns.key_lengths)
    slots = offset_map.put_many(hashes, columns.offsets)
    offset_map.update_latest_offset(int(columns.offsets[-1]))
    offset_map.get_many(hash_keys([b"a", b"b", b"c"]))
    offset_map.offsets_at(slots)
    mapped = offset_map.offsets_at(slots.astype(np.int32))  # the cleaner's (broker.log.mapped_slots)
    starts = np.asarray(columns.batch_starts, dtype=np.int64)
    keep = np.empty(len(mapped), dtype=np.bool_)
    kept, tombstones, kept_bytes, newest = np.empty((4, 1), dtype=np.int64)
    keep_records(
        starts,
        columns.offsets,
        columns.key_lengths,
        columns.null_values,
        columns.record_starts,
        columns.record_ends,
        columns.timestamp_deltas,
        mapped,
        offset_map.latest_offset,
        np.zeros(1, dtype=np.bool_),
        keep,
        kept,
        tombstones,
        kept_bytes,
        newest,
    )
    every = np.ones(1, dtype=np.bool_)
    copy_kept(
        columns.array,
        starts,
        np.zeros(1, dtype=np.int64),
        HEADER_SIZE,
        every,
        every,
        columns.record_starts,
        columns.record_ends,
        keep,
        np.empty(len(columns.data), dtype=np.uint8),
        np.empty(2, dtype=np.int64),
    )
