"""Every partition log of a broker, across one or more log dirs, with the flusher and retention threads.

Start-up, per log dir: take an exclusive ``flock`` on its ``.lock`` file (a second broker on the same dir
fails with :class:`~broker.log.errors.LogDirLockedError`), remove partitions whose deletion a crash
interrupted, read the recovery-point and replication-offset checkpoints, and open every
``<topic>-<partition>`` folder as a :class:`~broker.log.log.Log` (with its replicated high watermark,
if the checkpoint has one: the log caps it at its end). Without the clean-shutdown marker, each log
recovers from its checkpoint (:mod:`broker.log.recovery`); the marker is then removed, so that a crash
from now on is noticed.

Running (after :meth:`LogManager.start`):

* the flusher thread flushes a log as soon as it holds ``flush_messages`` unflushed messages (appends
  wake it), a waiting ``acks=-1`` produce asks for it (``flush_on_ack``: group commit, one fsync per
  turn answers every waiter, see :mod:`broker.log.log`) or its oldest unflushed message is ``flush_ms``
  old. It looks only at the logs that have something to flush (the *dirty* logs: each tells the manager
  through ``wake_flusher`` when its first unflushed message starts a deadline, when ``flush_messages`` is
  reached and when a flush is requested), so a broker with thousands of idle partitions pays nothing for
  them per turn (it scanned and sorted them all, twice a turn: 0.15 of a core at 4,000 partitions). It
  rewrites each dir's checkpoints every ``recovery_checkpoint_interval_ms``:
  ``recovery-point-offset-checkpoint`` (every log's flushed offset) and ``replication-offset-checkpoint``
  (Kafka's name and format: the replicated high watermark of every log that has one, see
  :mod:`broker.log.log_replication`). The latter is written only once a log of the dir has one or the
  file exists (a broker without replication keeps its dir as before); ``log-start-offset-checkpoint``
  likewise, the log starts DeleteRecords raised past their first segments (:mod:`broker.log.log_cleanup`);
* the log cleaner's ``cleaner_threads`` threads compact the logs whose ``cleanup_policy`` holds
  ``compact`` (:mod:`broker.log.log_cleaner`; its bookkeeping and ``cleaner-offset-checkpoint`` in
  :mod:`broker.log.log_cleaner_manager`), each log by its own config. A log's truncation pauses its
  cleaning (each log's truncation guard) and :meth:`LogManager.delete_log` stops it first (Kafka's
  ``abortAndPauseCleaning``);
* the retention thread applies each log's ``retention_ms`` / ``retention_bytes`` (its topic's, where the
  topic overrides them: :meth:`LogManager.update_topic_config`) every
  ``retention_check_interval_ms``, and forgets the idempotent producers whose last batch is
  ``producer_id_expiration_ms`` old (``[broker]``, Kafka's ``producer.id.expiration.ms``).

:meth:`LogManager.close` stops the threads (the cleaner's first, a pass in progress stopping at its next
check), flushes and closes every log, writes the checkpoints and the
clean-shutdown markers, and releases the locks. All methods are thread-safe.

Concurrency of the dirty logs (``_dirty``, under ``_dirty_lock``): a log is added by ``_wake_flusher``
(an appending, truncating or requesting thread) and removed only by a flush turn that finds it with
nothing to flush, which removes it first and then looks again, adding it back if it has become dirty
meanwhile: an append between the look and the removal is seen by the second look, one after the removal
adds the log itself. So every log with unflushed messages is in the set.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from broker.clock import Clock, system_clock_ms
from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.errors import LogClosedError, LogDirLockedError, LogError, LogStorageError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import (
    CLEAN_SHUTDOWN_FILE_NAME,
    LOCK_FILE_NAME,
    LOG_START_OFFSET_CHECKPOINT_FILE_NAME,
    RECOVERY_POINT_CHECKPOINT_FILE_NAME,
    REPLICATION_OFFSET_CHECKPOINT_FILE_NAME,
    is_deleted_partition_dir_name,
    parse_partition_dir_name,
    partition_dir,
)
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.log.log_listeners import HighWatermarkListener
from broker.record.errors import RecordError
from broker.record.topic_name import validate_partition, validate_topic_name
from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_MAX_FLUSHER_SLEEP_MS = 1000


def _topic_partition(log: Log) -> TopicPartition:
    return log.topic_partition


class LogManager:
    """Owns every partition in ``config.log_dirs``. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        config: LogConfig,
        *,
        clock: Clock = system_clock_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self._config = config
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._clock = clock
        self._dirs = [Path(d).absolute() for d in config.log_dirs]
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._listeners: tuple[HighWatermarkListener, ...] = ()
        #: told the seconds of each flush the flusher thread does (the broker's metrics)
        self._flush_listeners: tuple[Callable[[TopicPartition, float], None], ...] = ()
        self._lock_fds: dict[Path, int] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._dirty: set[Log] = set()
        self._dirty_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        try:
            for directory in self._dirs:
                self._lock_dir(directory)
            for directory in self._dirs:
                self._load_dir(directory)
            self._cleaner = LogCleaner(
                config, LogCleanerManager(self._dirs, self._logs_by_dir, clock), clock=clock
            )
        except BaseException:
            for log in self._logs.values():
                try:
                    log.close()
                except LogError:
                    logger.exception("%s: could not close after a failed start-up", log.topic_partition)
            self._release_locks()
            raise

    # ------------------------------------------------------------------------------------ start-up

    def _lock_dir(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogStorageError(f"{directory}: cannot create the log dir: {exc}") from exc
        lock_path = directory / LOCK_FILE_NAME
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise LogDirLockedError(
                f"{directory}: the log dir is in use by another broker ({lock_path} is locked"
                + (f" by pid {holder}" if holder else "")
                + "); only one broker may use a log dir at a time"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise LogStorageError(f"{lock_path}: cannot lock: {exc}") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fds[directory] = fd

    def _load_dir(self, directory: Path) -> None:
        marker = directory / CLEAN_SHUTDOWN_FILE_NAME
        clean = marker.exists()
        checkpoint_path = directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME
        try:
            checkpoint = read_checkpoint(checkpoint_path)
        except LogStorageError as exc:
            logger.warning("%s; every partition in %s is recovered from its start", exc, directory)
            checkpoint = {}
            clean = False
        try:
            replicated = read_checkpoint(directory / REPLICATION_OFFSET_CHECKPOINT_FILE_NAME)
        except LogStorageError as exc:
            logger.warning(
                "%s; the partitions in %s start without a replicated high watermark", exc, directory
            )
            replicated = {}
        try:
            starts = read_checkpoint(directory / LOG_START_OFFSET_CHECKPOINT_FILE_NAME)
        except LogStorageError as exc:
            logger.warning("%s; the partitions in %s start at their first segments", exc, directory)
            starts = {}
        for entry in sorted(directory.iterdir()):
            if not entry.is_dir():
                continue
            if is_deleted_partition_dir_name(entry.name):
                logger.info("%s: finishing the deletion of %s", directory, entry.name)
                shutil.rmtree(entry)
                continue
            tp = parse_partition_dir_name(entry.name)
            if tp is None:
                logger.warning(
                    "%s: ignoring folder %s, which is not named <topic>-<partition>", directory, entry
                )
                continue
            if tp in self._logs:
                raise LogStorageError(
                    f"partition {tp} is in two log dirs: {self._dir_of[tp]} and {directory}; remove one"
                )
            log = Log(
                entry,
                self._config,
                recovery_point=checkpoint.get(tp, 0),
                clean_shutdown=clean and tp in checkpoint,
                clock=self._clock,
                wake_flusher=self._wake_flusher,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                replicated_high_watermark=replicated.get(tp),
                log_start_offset=starts.get(tp, 0),
            )
            log.set_truncation_guard(self._pause_cleaning)
            self._logs[tp] = log
            self._dir_of[tp] = directory
        if clean:
            marker.unlink()
            fsync_dir(directory)
        self._write_checkpoint(directory)

    # ------------------------------------------------------------------------------------ partitions

    @property
    def log_dirs(self) -> list[Path]:
        return list(self._dirs)

    @property
    def config(self) -> LogConfig:
        """The broker's ``[log]`` section (a topic's overrides make its logs' own config from it)."""
        return self._config

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created (in the log dir holding the fewest partitions) if needed, with
        ``config`` (its topic's effective config; default: the broker's ``[log]``). An existing log keeps
        its config: :meth:`update_topic_config` changes it.

        Raises :class:`~broker.log.errors.InvalidTopicError` for names that break Kafka's rules.
        """
        validate_topic_name(topic)
        validate_partition(partition)
        tp = TopicPartition(topic, partition)
        with self._lock:
            self._check_open()
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if len(self._dirs) == 1:
                directory = self._dirs[0]
            else:  # the log dir holding the fewest partitions (counted in C: thousands of partitions)
                counts = Counter(self._dir_of.values())
                directory = min(self._dirs, key=lambda d: counts[d])
            path = partition_dir(directory, tp)
            try:
                path.mkdir(exist_ok=True)
                fsync_dir(directory)
            except OSError as exc:
                raise LogStorageError(f"{path}: cannot create the partition folder: {exc}") from exc
            log = Log(
                path,
                config if config is not None else self._config,
                recovery_point=0,
                clean_shutdown=False,
                clock=self._clock,
                wake_flusher=self._wake_flusher,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
            )
            for listener in self._listeners:
                log.add_listener(listener)
            log.set_truncation_guard(self._pause_cleaning)
            self._logs[tp] = log
            self._dir_of[tp] = directory
            logger.info("created the log of %s in %s", tp, directory)
            return log

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def all_logs(self) -> list[Log]:
        """Every partition's log, ordered by topic and partition."""
        with self._lock:
            return [self._logs[tp] for tp in sorted(self._logs)]

    @property
    def cleaner(self) -> LogCleaner:
        """The log cleaner (its threads run after :meth:`start` when ``cleaner_threads`` > 0)."""
        return self._cleaner

    def _logs_by_dir(self) -> dict[Path, list[Log]]:
        with self._lock:
            by_dir: dict[Path, list[Log]] = {d: [] for d in self._dirs}
            for tp in sorted(self._logs):
                by_dir[self._dir_of[tp]].append(self._logs[tp])
            return by_dir

    @contextlib.contextmanager
    def _pause_cleaning(self, log: Log, offset: int) -> Iterator[None]:
        """Each log's truncation guard: no cleaning of it while it is truncated."""
        with self._cleaner.manager.paused(log, offset):
            yield

    def delete_log(self, topic: str, partition: int) -> bool:
        """Delete one partition's log and its files; False when there is no such partition. A cleaning
        pass on it is stopped first."""
        tp = TopicPartition(topic, partition)
        cleaning = self._cleaner.manager
        cleaning.abort_and_pause(tp)
        try:
            return self._delete_log(tp)
        finally:
            cleaning.remove(tp)

    def _delete_log(self, tp: TopicPartition) -> bool:
        with self._lock:
            # Under the lock, so that a get_or_create_log of the same partition waits until the folder
            # is gone instead of opening it while it is being removed.
            self._check_open()
            log = self._logs.pop(tp, None)
            self._dir_of.pop(tp, None)
            if log is None:
                return False
            log.delete()
        return True

    def delete_topic(self, topic: str) -> int:
        """Delete every partition of ``topic``; returns how many there were."""
        validate_topic_name(topic)
        with self._lock:
            partitions = [tp.partition for tp in self._logs if tp.topic == topic]
        return sum(self.delete_log(topic, partition) for partition in partitions)

    def update_topic_config(self, topic: str, config: LogConfig) -> int:
        """Give every log of ``topic`` ``config`` (its topic's configs changed, :meth:`Log.update_config`);
        returns how many logs there were."""
        with self._lock:
            logs = [log for tp, log in self._logs.items() if tp.topic == topic]
        for log in logs:
            log.update_config(config)
        return len(logs)

    def add_listener(self, listener: HighWatermarkListener) -> None:
        """Register a high-watermark listener on every log, present and future."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
            logs = list(self._logs.values())
        for log in logs:
            log.add_listener(listener)

    def add_flush_listener(self, listener: Callable[[TopicPartition, float], None]) -> None:
        """Call ``listener(partition, seconds)`` after each flush of :meth:`flush_due_logs` (the flusher
        thread's; it must be quick)."""
        with self._lock:
            self._flush_listeners = (*self._flush_listeners, listener)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the log manager is closed")

    # ------------------------------------------------------------------------------------ background work

    def start(self) -> None:
        """Start the flusher and retention threads."""
        with self._lock:
            self._check_open()
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=self._flusher_loop, name="lumber-log-flusher", daemon=True),
                threading.Thread(target=self._retention_loop, name="lumber-log-retention", daemon=True),
            ]
        for thread in self._threads:
            thread.start()
        self._cleaner.start()

    def _wake_flusher(self, log: Log) -> None:
        """A log has a flush due (M, or a waiter's :meth:`Log.request_flush`) or a new flush deadline (S):
        wake the flusher, or flush now if the threads are not running and a flush is due. Either way the
        log is dirty until a flush turn finds it clean (see the module docstring)."""
        with self._dirty_lock:
            self._dirty.add(log)
        if self._threads and not self._stop.is_set():
            self._wake.set()
            return
        if log.unflushed_messages >= self._config.flush_messages or log.flush_requested:
            # Closed or deleted meanwhile: close() flushed it, or there is nothing left to flush.
            with contextlib.suppress(LogClosedError):
                log.flush()

    def flush_due_logs(self, now_ms: int | None = None) -> list[TopicPartition]:
        """Flush every log whose flush policy asks for it; returns which were flushed."""
        now = self._clock() if now_ms is None else now_ms
        flushed: list[TopicPartition] = []
        for log in self._dirty_logs():
            if log.flush_due(now):
                started = time.perf_counter()
                try:
                    log.flush()
                except LogClosedError:
                    pass  # deleted meanwhile: forgotten below
                except LogError:
                    logger.exception("%s: flush failed", log.topic_partition)
                else:
                    flushed.append(log.topic_partition)
                    for listener in self._flush_listeners:
                        listener(log.topic_partition, time.perf_counter() - started)
            if not log.flush_pending():
                with self._dirty_lock:
                    self._dirty.discard(log)
                if log.flush_pending():  # an append came between the two looks: it stays
                    with self._dirty_lock:
                        self._dirty.add(log)
        return flushed

    def _dirty_logs(self) -> list[Log]:
        """The logs that may have something to flush, ordered by topic and partition."""
        with self._dirty_lock:
            dirty = list(self._dirty)
        dirty.sort(key=_topic_partition)
        return dirty

    def apply_retention(self, now_ms: int | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        """Apply retention to every log; returns the base offsets of the deleted segments per partition."""
        now = self._clock() if now_ms is None else now_ms
        deleted: dict[TopicPartition, tuple[int, ...]] = {}
        for log in self.all_logs():
            try:
                removed = log.apply_retention(now)
            except (LogError, RecordError):  # a batch that no longer reads is the partition's problem alone
                logger.exception("%s: retention failed", log.topic_partition)
                continue
            if removed:
                deleted[log.topic_partition] = removed
        return deleted

    def remove_expired_producers(self, now_ms: int | None = None) -> dict[TopicPartition, list[int]]:
        """Forget expired idempotent producers in every log; returns their ids per partition."""
        now = self._clock() if now_ms is None else now_ms
        expired: dict[TopicPartition, list[int]] = {}
        for log in self.all_logs():
            removed = log.remove_expired_producers(now)
            if removed:
                expired[log.topic_partition] = removed
        return expired

    def checkpoint_recovery_points(self) -> None:
        """Rewrite every log dir's checkpoints: the logs' flushed offsets and replicated high watermarks."""
        for directory in self._dirs:
            self._write_checkpoint(directory)

    def _write_checkpoint(self, directory: Path) -> None:
        with self._lock:
            logs = [log for tp, log in self._logs.items() if self._dir_of[tp] == directory]
        offsets = {log.topic_partition: log.flushed_offset for log in logs}
        replicated: dict[TopicPartition, int] = {}
        for log in logs:
            high_watermark = log.replicated_high_watermark
            if high_watermark is not None:
                replicated[log.topic_partition] = high_watermark
        # DeleteRecords' starts: only those past their first segment (Kafka's log-start-offset-checkpoint)
        starts = {
            log.topic_partition: log.log_start_offset
            for log in logs
            if log.segments and log.log_start_offset > log.segments[0].base_offset
        }
        replication_path = directory / REPLICATION_OFFSET_CHECKPOINT_FILE_NAME
        starts_path = directory / LOG_START_OFFSET_CHECKPOINT_FILE_NAME
        with self._checkpoint_lock:
            write_checkpoint(directory / RECOVERY_POINT_CHECKPOINT_FILE_NAME, offsets)
            if replicated or replication_path.exists():
                write_checkpoint(replication_path, replicated)
            if starts or starts_path.exists():
                write_checkpoint(starts_path, starts)

    def _flusher_loop(self) -> None:
        last_checkpoint_ms = self._clock()
        interval_ms = self._config.recovery_checkpoint_interval_ms
        while not self._stop.is_set():
            try:
                self._wake.clear()
                self.flush_due_logs()
                now = self._clock()
                if now - last_checkpoint_ms >= interval_ms:
                    self.checkpoint_recovery_points()
                    last_checkpoint_ms = now
                sleep_ms = min(_MAX_FLUSHER_SLEEP_MS, interval_ms - (now - last_checkpoint_ms))
                for log in self._dirty_logs():
                    deadline = log.next_flush_deadline_ms()
                    if deadline is not None:
                        sleep_ms = min(sleep_ms, deadline - now)
            except Exception:
                logger.exception("log flusher iteration failed")
                sleep_ms = _MAX_FLUSHER_SLEEP_MS
            self._wake.wait(max(sleep_ms, 1) / 1000)

    def _retention_loop(self) -> None:
        interval_s = self._config.retention_check_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                self.apply_retention()
                self.remove_expired_producers()
            except Exception:
                logger.exception("log retention iteration failed")

    # ------------------------------------------------------------------------------------ shutdown

    def close(self) -> None:
        """Stop the threads, close every log (flushing it), write checkpoints and clean-shutdown markers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads, self._threads = self._threads, []
        self._cleaner.shutdown()
        self._stop.set()
        self._wake.set()
        for thread in threads:
            thread.join()
        failures: list[str] = []
        for log in self.all_logs():
            try:
                log.close()
            except LogError as exc:
                failures.append(f"{log.topic_partition}: {exc}")
        try:
            for directory in self._dirs:
                self._write_checkpoint(directory)
                if not failures:
                    marker = FileHandle.open(directory / CLEAN_SHUTDOWN_FILE_NAME, create=True)
                    marker.fsync()
                    marker.close()
                    fsync_dir(directory)
        except LogError as exc:
            failures.append(str(exc))
        finally:
            self._release_locks()
        if failures:
            raise LogStorageError(
                "unclean log shutdown (recovery will run at the next start): " + "; ".join(failures)
            )

    def _release_locks(self) -> None:
        for fd in self._lock_fds.values():
            os.close(fd)  # closing the descriptor releases the flock
        self._lock_fds.clear()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
