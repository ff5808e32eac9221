"""The log cleaner: background threads that compact logs whose ``cleanup_policy`` holds ``compact``, keeping
at least the last value of every key (Kafka's ``LogCleaner``; the implementation chapter's "Log
Compaction").

A log is a clean head and a dirty tail::

      log start          first dirty offset        first uncleanable offset    active segment
      |   clean (compacted before)  |   dirty (written since)   |   too young / unexposed   |   ...
                                    |<-- map built over this -->|

One cleaning pass of one log (:meth:`~broker.log.cleaner.Cleaner.clean`), chosen by
:class:`~broker.log.log_cleaner_manager.LogCleanerManager` (dirtiest first, over its ratio):

1. **Map.** Walk the dirty section in chunks of batches and put every keyed record's key -> offset in the
   thread's :class:`~broker.log.offset_map.OffsetMap` (later offsets win), stopping before the first
   batch whose keys might not fit: the map then covers ``[first dirty, end)`` and the rest of the dirty
   section waits for the next pass (a log too dirty for the buffer takes several passes, never more
   memory). Only keys and offsets are read, by the key columns the batches give
   (:mod:`broker.record.key_columns`: a compiled loop over the records' bytes, keys hashed by another),
   never a record object (Kafka's ``buildOffsetMapForSegment`` reads keys only too). The slot each key took is
   noted (:class:`~broker.log.mapped_slots.MappedSlots`, bounded), so that step 3 reads a record's
   mapped offset without hashing its key again.

   A *chunk* (:mod:`broker.log.cleaner_chunk`) is at most ``CHUNK_RECORDS`` records of whole batches of
   one segment, lying in one of the buffers the thread's reader reads the pass's segments into, a block
   of 1 MiB (or ``cleaner_io_buffer_bytes``) at a time, ahead of the work and across segment ends
   (:mod:`broker.log.chunk_reader`: the disk's reads overlap the cleaning), its batch headers read as
   numpy columns (:mod:`broker.record.batch_header_columns`), not as batch objects, and, when every
   batch is an uncompressed data batch (the common case), its key columns read in place from the buffer.
   Other chunks (compressed or control batches) go batch by batch, as below.
2. **Group.** The segments from the log start holding offsets below ``end`` (never the active one) are
   grouped, in order, while a group's bytes stay within the log's ``segment_bytes`` and its offsets fit
   relative to its base offset (Kafka's ``groupSegmentsBySize``): small segments become one.
3. **Rewrite** each group into ``<base>.log.cleaned`` (and its indexes), a chunk of batches at a time
   (Kafka's ``cleanInto`` / ``MemoryRecords.filterTo``). A record is kept when its offset is past
   the map (``> end - 1``), or it has a key whose mapped offset is not later than its own, unless it is a
   tombstone (null value) whose batch's delete horizon has passed. Tombstones follow KIP-534: the first
   time a batch holding tombstones is rewritten, it is stamped with a delete horizon of now +
   ``delete_retention_ms`` (:func:`~broker.record.record_batch_builder.retained_batch`, attribute bit 6),
   and a later pass after that time drops them, so a consumer reading from the start within
   ``delete_retention_ms`` of the cleaning still sees the delete. Records without a key are dropped, as Kafka
   does (a compacted log refuses them at append: :mod:`broker.log.log_validator`). The decision is taken
   per batch from the key columns (offsets, key hashes, null values, for all records of the chunk at
   once): a batch whose records all stay is copied byte for byte (Kafka's ``writeOriginalBatch``); one
   that loses some is rebuilt with the rest, keeping its offset range, timestamps, headers, producer
   fields, leader epoch and codec, from the kept records' own bytes
   (:func:`~broker.record.record_batch_builder.retained_batch_of_bytes`: the base offset and first
   timestamp stay, so their deltas stay valid), or, when its tombstones get their horizon stamped or it
   is a LogAppendTime batch, from its decoded records
   (:func:`~broker.record.record_batch_builder.retained_batch`);
   one that loses all (or an empty one kept by an earlier pass) is dropped, except (as an empty batch,
   Kafka's ``RETAIN_EMPTY``) an idempotent producer's last batch (its sequence) and the batch ending just
   below the pass's first uncleanable offset (Kafka's ``upperBoundOffsetOfCleaningRound``: the last
   offset cleaned stays known). A group may so clean to a segment with no batch at all: it is swapped in
   empty (Kafka's ``cleanSegments`` does the same), keeping its base offset (so the log start offset),
   and reads step over it. Control batches are copied. A
   chunk of uncompressed data batches is decided and written by columns (``ChunkRewriter._write_by_columns``:
   the kept bytes copied out of the read buffer in runs, the rebuilt batches' headers patched in it, one
   write per chunk; :mod:`broker.log.cleaner_kernels`); other chunks batch by batch
   (``ChunkRewriter._retained``), to the same bytes. Both decide from the chunk's key columns, read by the
   reader the batches choose (:meth:`~broker.record.record_batch.RecordBatch.key_columns_of`): the
   compiled loop, or, for records it declines (it never should: the log was validated at append), the
   same columns by the one record walker, which names a record that is wrong; the cleaner picks neither.
4. **Swap.** The cleaned files are fsynced, given the last old segment's modification time (what
   retention falls back on for segments without timestamps), and swapped in through
   :meth:`broker.log.log.Log.replace_segments` (``.cleaned`` -> ``.swap`` -> final names, crash-safe:
   :mod:`broker.log.segment_swap`). A group's swap runs on a thread of the pass while the next group is
   rewritten (its fsyncs and renames are I/O waits), and so does the creation of the next group's
   ``.cleaned`` files; groups are swapped one at a time, in order.
5. **Checkpoint.** ``end`` becomes the log's first dirty offset in ``cleaner-offset-checkpoint``.

What stays right: offsets never change, so the indexes are rebuilt for the cleaned segment only (by its
append), and the producer state, its snapshots and the leader epoch cache stay valid; readers and
followers step over the gaps (a read returns the first batch at or after its offset). Each replica
cleans its own log.

Differences from Kafka: a log is cleaned only over its dirty ratio (Kafka also cleans a log whose tombstones'
delete horizons passed; in Lumber they go at the log's next pass); a group's swap overlaps the next group's
rewrite (Kafka's ``cleanSegments`` does one group after the other); transactions (aborted-transaction indexes,
markers) do not exist in Lumber; there is no I/O throttle by default: ``cleaner_io_max_bytes_per_second``
(Kafka's ``log.cleaner.io.max.bytes.per.second``) caps what the threads read and write together
(:class:`~broker.log.throttler.Throttler`), 0 (the default, Kafka's unlimited) means no cap.

Where the code is: one pass, :class:`~broker.log.cleaner.Cleaner` (:mod:`broker.log.cleaner`); what stays of a
chunk, :mod:`broker.log.chunk_rewriter`; the chunks it reads, :mod:`broker.log.cleaner_chunk`, and their
reads, :mod:`broker.log.chunk_reader`; the compiled loops and their load, :mod:`broker.log.kernel_load`; the
slot cache, :mod:`broker.log.mapped_slots`; its figures, :mod:`broker.log.cleaner_stats`; the I/O cap,
:mod:`broker.log.throttler`; which log to clean next and the ``cleaner-offset-checkpoint``,
:mod:`broker.log.log_cleaner_manager`; the threads, :class:`LogCleaner` here.

Threads: ``cleaner_threads`` threads (:class:`LogCleaner`), each with its own map of
``cleaner_dedupe_buffer_bytes / cleaner_threads`` bytes and its own reader (a thread, and three buffers of a
block each); each takes one log at a time, so two threads never clean one log. A thread reads segments below
the active one without the log's lock (they never change), writes only ``.cleaned`` files, and takes the log's
lock only for the swap. Between batches and before the swap it checks whether the pass must stop (the log is
being truncated or deleted, or the cleaner is shutting down):
:class:`~broker.log.errors.CleaningAbortedError`, and the cleaned files are deleted. The threads run
``cleaner_nice`` (10) below the broker's CPU priority, and so do the threads they start (reader, swap,
release): when the cores are busy, request handling goes first (Kafka's cleaner runs at the broker's priority;
the produce case of ``bench/compaction.py`` measures what it buys).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from broker.clock import Clock, system_clock_ms
from broker.config import LogConfig
from broker.log.cleaner import Cleaner
from broker.log.cleaner_stats import CleanerStats, CleanerTotals
from broker.log.deferred_release import DeferredRelease
from broker.log.errors import CleaningAbortedError, LogError
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.log.offset_map import OffsetMap
from broker.log.throttler import Throttler
from broker.record.errors import RecordError
from broker.record.topic_partition import TopicPartition

__all__ = ["LogCleaner"]

logger = logging.getLogger(__name__)


class LogCleaner:
    """The cleaner threads of a broker (see the module docstring). :meth:`clean_once` runs one pass in the
    caller's thread (tests, tools); :meth:`start` / :meth:`shutdown` run the threads."""

    def __init__(
        self, config: LogConfig, manager: LogCleanerManager, *, clock: Clock = system_clock_ms
    ) -> None:
        self._config = config
        self._manager = manager
        self._clock = clock
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.totals = CleanerTotals()
        self._map_bytes = config.cleaner_dedupe_buffer_bytes // max(config.cleaner_threads, 1)
        self._throttler = Throttler(config.cleaner_io_max_bytes_per_second)
        #: The segments the passes replaced, dropped ``file_delete_delay_ms`` later on a thread of its own.
        self.replaced = DeferredRelease(config.file_delete_delay_ms)

    @property
    def manager(self) -> LogCleanerManager:
        return self._manager

    def new_cleaner(self) -> Cleaner:
        """A cleaner with its own map of ``cleaner_dedupe_buffer_bytes / cleaner_threads`` bytes."""
        return Cleaner(
            OffsetMap(self._map_bytes),
            io_buffer_bytes=self._config.cleaner_io_buffer_bytes,
            check_done=self._check_done,
            clock=self._clock,
            throttler=self._throttler,
            replaced=self.replaced,
        )

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise CleaningAbortedError(f"{tp}: cleaning stopped: the cleaner is shutting down")
        self._manager.check_done(tp)

    def clean_once(self, cleaner: Cleaner) -> CleanerStats | None:
        """Clean the dirtiest log over its ratio, if any; its stats, or None (no log, aborted, failed)."""
        to_clean = self._manager.grab_filthiest_log()
        if to_clean is None:
            return None
        tp = to_clean.log.topic_partition
        try:
            stats = cleaner.clean(to_clean)
        except CleaningAbortedError as exc:
            logger.info("%s", exc)
            self._manager.abort_cleaning(tp)
            with self._lock:
                self.totals.aborted += 1
            return None
        except (LogError, RecordError, OSError):
            logger.exception("%s: cleaning failed; the log is retried after the back-off", tp)
            self._manager.abort_cleaning(tp)
            with self._lock:
                self.totals.failed += 1
            return None
        except BaseException:
            self._manager.abort_cleaning(tp)
            raise
        with self._lock:  # before the checkpoint, so that whoever sees the checkpoint sees the pass counted
            totals = self.totals
            totals.passes += 1
            totals.bytes_read += stats.bytes_read
            totals.bytes_written += stats.bytes_written
            totals.last = stats
        self._manager.done_cleaning(to_clean, stats.end_offset)
        return stats

    def start(self) -> None:
        """Start ``cleaner_threads`` threads (none when it is 0)."""
        with self._lock:
            if self._threads or self._config.cleaner_threads == 0:
                return
            self._threads = [
                threading.Thread(target=self._run, name=f"lumber-log-cleaner-{i}", daemon=True)
                for i in range(self._config.cleaner_threads)
            ]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        _lower_priority(self._config.cleaner_nice)  # the threads the cleaner starts inherit it
        cleaner = self.new_cleaner()
        backoff_s = self._config.cleaner_backoff_ms / 1000
        try:
            while not self._stop.is_set():
                try:
                    stats = self.clean_once(cleaner)
                except Exception:
                    logger.exception("log cleaner iteration failed")
                    stats = None
                if stats is None:
                    self._stop.wait(backoff_s)
        finally:
            cleaner.close()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the threads: a pass in progress stops at its next check (bounded wait); the segments the
        passes replaced are let go of at once."""
        self._stop.set()
        with self._lock:
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
            if thread.is_alive():
                logger.warning("%s did not stop within %.0f s", thread.name, timeout_s)
        self.replaced.close()


def _lower_priority(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (Linux: a thread's own; threads it creates later
    inherit it). Elsewhere ``setpriority`` would change the whole process's, so nothing is done."""
    if nice <= 0 or sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except OSError as exc:
        logger.warning("cannot lower the cleaner thread's priority by %d: %s", nice, exc)
