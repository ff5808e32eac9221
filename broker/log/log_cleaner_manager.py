"""Which compacted logs the cleaner takes, and the state that keeps cleaning, truncation and deletion apart
(Kafka's ``LogCleanerManager``).

How far a log is clean: the ``cleaner-offset-checkpoint`` of each log dir (:mod:`broker.log.checkpoint`'s
format, Kafka's name) holds, per partition, the first dirty offset: every offset below it was covered by
a finished cleaning pass. A missing entry, or one outside ``[log_start_offset, log_end_offset]``, means
"dirty from the log start".

Choosing a log (:meth:`LogCleanerManager.grab_filthiest_log`), for each log with ``compact`` in its own
``cleanup_policy`` (each log's :attr:`~broker.log.log.Log.config`, read at every choice: a topic's
override replaces it at run time) and not in progress or paused:

* the first uncleanable offset is the lowest of the active segment's base offset, the high watermark
  (never clean what consumers cannot see yet, or a follower might still truncate) and, with
  ``min_compaction_lag_ms``, the base offset of the first dirty segment holding a record younger than
  that (by its largest timestamp);
* clean bytes are the segments below the first dirty offset, dirty bytes the segments from the one
  holding it up to the first uncleanable offset; the dirty ratio is ``dirty / (clean + dirty)``;
* the log with the largest ratio at or over its ``min_cleanable_dirty_ratio`` (and some dirty bytes) is
  taken and marked in progress.

States per partition, with every transition (Kafka's ``LogCleaningState``)::

    (none) --grab--> IN_PROGRESS --done / failed--> (none)
    IN_PROGRESS --abort_and_pause--> ABORTED --the cleaner notices (check_done raises)--> PAUSED(1)
    (none) --abort_and_pause--> PAUSED(1);  PAUSED(n) --abort_and_pause--> PAUSED(n + 1)
    PAUSED(n) --resume--> PAUSED(n - 1), (none) at 0

:meth:`abort_and_pause` waits (bounded) until a pass in progress has stopped; the cleaner calls
:meth:`check_done` between batches and before its swap. A truncation runs inside :meth:`paused` (the
log's truncation guard) and moves the checkpoint down to the new log end; a deleted log's entry is
dropped (:meth:`remove`). Thread-safe: one lock and a condition guard the states and checkpoints.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from broker.clock import Clock
from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.errors import CleaningAbortedError, LogError, LogStorageError
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.log import Log
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: How long abort_and_pause waits for a pass in progress to notice, at most.
ABORT_WAIT_S = 30.0


class CleaningState(Enum):
    IN_PROGRESS = "in progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log with its dirty section ``[first_dirty_offset, first_uncleanable_offset)``."""

    log: Log
    log_dir: Path
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def is_compacted(log: Log) -> bool:
    return "compact" in log.config.cleanup_policy


def cleanable_section(log: Log, log_dir: Path, checkpoint: int | None, now_ms: int) -> LogToClean:
    """The clean and dirty sections of ``log`` (see the module docstring)."""
    segments = log.segments
    start = segments[0].base_offset
    end = log.log_end_offset
    first_dirty = start if checkpoint is None or not start <= checkpoint <= end else checkpoint
    uncleanable = min(segments[-1].base_offset, log.high_watermark)
    lag_ms = log.config.min_compaction_lag_ms
    if lag_ms > 0:
        for segment in segments[:-1]:
            if segment.next_offset > first_dirty and segment.max_timestamp_ms > now_ms - lag_ms:
                uncleanable = min(uncleanable, segment.base_offset)
                break
    uncleanable = max(uncleanable, first_dirty)
    clean_bytes = dirty_bytes = 0
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size_bytes
        elif segment.base_offset < uncleanable:
            dirty_bytes += segment.size_bytes
    return LogToClean(log, log_dir, first_dirty, uncleanable, clean_bytes, dirty_bytes)


class LogCleanerManager:
    """The cleaner's bookkeeping over every log of a broker (see the module docstring).

    ``logs_by_dir()`` returns the logs of each log dir (the :class:`~broker.log.log_manager.LogManager`'s).
    """

    def __init__(
        self, log_dirs: Sequence[Path], logs_by_dir: Callable[[], Mapping[Path, Sequence[Log]]], clock: Clock
    ) -> None:
        self._log_dirs = list(log_dirs)
        self._logs_by_dir = logs_by_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._states: dict[TopicPartition, CleaningState] = {}
        self._pause_counts: dict[TopicPartition, int] = {}
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        for directory in self._log_dirs:
            path = directory / CLEANER_OFFSET_CHECKPOINT_FILE_NAME
            try:
                self._checkpoints[directory] = read_checkpoint(path)
            except LogStorageError as exc:
                logger.warning("%s; every compacted log in %s is dirty from its start", exc, directory)
                self._checkpoints[directory] = {}
        #: The largest dirty ratio seen at the last choice (a metric).
        self.max_dirty_ratio = 0.0

    # ------------------------------------------------------------------------------------ choosing

    def cleanable_logs(self) -> list[LogToClean]:
        """The dirty and clean sections of every compacted log not in progress or paused."""
        now = self._clock()
        found: list[LogToClean] = []
        for directory, logs in self._logs_by_dir().items():
            for log in logs:
                if log.closed or not is_compacted(log):
                    continue
                tp = log.topic_partition
                with self._lock:
                    if tp in self._states:
                        continue
                    checkpoint = self._checkpoints.get(directory, {}).get(tp)
                try:
                    found.append(cleanable_section(log, directory, checkpoint, now))
                except (LogError, IndexError):  # closed or deleted meanwhile
                    continue
        return found

    def grab_filthiest_log(self) -> LogToClean | None:
        """The dirtiest log over its ``min_cleanable_dirty_ratio``, marked in progress; None if none."""
        candidates = self.cleanable_logs()
        self.max_dirty_ratio = max((c.dirty_ratio for c in candidates), default=0.0)
        eligible = [
            c
            for c in candidates
            if c.dirty_bytes > 0 and c.dirty_ratio >= c.log.config.min_cleanable_dirty_ratio
        ]
        for chosen in sorted(eligible, key=lambda c: c.dirty_ratio, reverse=True):
            tp = chosen.log.topic_partition
            with self._lock:
                if tp in self._states:
                    continue
                self._states[tp] = CleaningState.IN_PROGRESS
            return chosen
        return None

    def first_dirty_offset(self, log_dir: Path, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._checkpoints.get(log_dir, {}).get(tp)

    # ------------------------------------------------------------------------------------ in progress

    def state(self, tp: TopicPartition) -> CleaningState | None:
        """``tp``'s cleaning state; None when it is neither in progress nor paused."""
        with self._lock:
            return self._states.get(tp)

    def check_done(self, tp: TopicPartition) -> None:
        """Raise :class:`CleaningAbortedError` when the pass on ``tp`` must stop (the cleaner's checks)."""
        with self._lock:
            if self._states.get(tp) is CleaningState.ABORTED:
                raise CleaningAbortedError(f"{tp}: cleaning aborted (the log is being truncated or deleted)")

    def done_cleaning(self, cleaned: LogToClean, end_offset: int) -> None:
        """A pass finished: every offset below ``end_offset`` is clean; the checkpoint is rewritten."""
        tp = cleaned.log.topic_partition
        with self._lock:
            checkpoints = self._checkpoints.setdefault(cleaned.log_dir, {})
            checkpoints[tp] = end_offset
            self._write_locked(cleaned.log_dir)
            self._finish_locked(tp)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """A pass stopped (failed or aborted): the log is no longer in progress."""
        with self._lock:
            self._finish_locked(tp)

    def _finish_locked(self, tp: TopicPartition) -> None:
        state = self._states.get(tp)
        if state is CleaningState.ABORTED:
            self._states[tp] = CleaningState.PAUSED
            self._pause_counts[tp] = 1
        elif state is CleaningState.IN_PROGRESS:
            del self._states[tp]
        self._changed.notify_all()

    def _write_locked(self, log_dir: Path) -> None:
        try:
            write_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE_NAME, self._checkpoints[log_dir])
        except LogError:
            logger.exception("%s: cannot write the cleaner offset checkpoint", log_dir)

    # ------------------------------------------------------------------------------------ pausing

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = ABORT_WAIT_S) -> None:
        """Stop a pass on ``tp`` in progress (waiting up to ``timeout_s`` for it) and keep the cleaner off
        it until :meth:`resume`."""
        with self._lock:
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = CleaningState.PAUSED
                self._pause_counts[tp] = 1
                return
            if state is CleaningState.PAUSED:
                self._pause_counts[tp] += 1
                return
            if state is CleaningState.IN_PROGRESS:
                self._states[tp] = CleaningState.ABORTED
            if not self._changed.wait_for(lambda: self._states.get(tp) is CleaningState.PAUSED, timeout_s):
                logger.warning("%s: the cleaner did not stop within %.0f s; pausing anyway", tp, timeout_s)
                self._states[tp] = CleaningState.PAUSED
                self._pause_counts[tp] = 1
            else:
                self._pause_counts[tp] = self._pause_counts.get(tp, 1)

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._states.get(tp) is not CleaningState.PAUSED:
                return
            count = self._pause_counts.get(tp, 1) - 1
            if count <= 0:
                del self._states[tp]
                self._pause_counts.pop(tp, None)
            else:
                self._pause_counts[tp] = count

    @contextmanager
    def paused(self, log: Log, offset: int) -> Iterator[None]:
        """The truncation guard: no cleaning of ``log`` while it is truncated to ``offset`` (-1: fully);
        the checkpoint is then moved down to the new log end."""
        tp = log.topic_partition
        self.abort_and_pause(tp)
        try:
            yield
        finally:
            end = log.log_end_offset
            with self._lock:
                for directory, checkpoints in self._checkpoints.items():
                    if tp in checkpoints and checkpoints[tp] > end:
                        checkpoints[tp] = end
                        self._write_locked(directory)
            self.resume(tp)

    def remove(self, tp: TopicPartition) -> None:
        """Forget a deleted log: its checkpoint entry and its pause."""
        with self._lock:
            for directory, checkpoints in self._checkpoints.items():
                if checkpoints.pop(tp, None) is not None:
                    self._write_locked(directory)
            self._states.pop(tp, None)
            self._pause_counts.pop(tp, None)
            self._changed.notify_all()
