"""A partition's leader epochs and the offset each began at (Kafka's ``LeaderEpochFileCache``), persisted as
``leader-epoch-checkpoint`` in the partition folder.

A leader stamps its epoch into every batch it appends (``partitionLeaderEpoch``, bytes 12..15 of the
header, :mod:`broker.record.batch_header`) and records here the first offset of each epoch; a follower
records the epochs of the batches it copies. A follower that became one, or a leader after an election,
asks the leader for the end offset of its latest epoch (:meth:`LeaderEpochCache.end_offset_for`, what
OffsetsForLeaderEpoch answers) and truncates its log there.

File format (Kafka's ``LeaderEpochCheckpointFile``, through :mod:`broker.log.checkpoint`), UTF-8 text::

    0                  version
    2                  number of entries
    0 0                <epoch> <start_offset>, one line per epoch, oldest first
    3 1200

Invariants: epochs and start offsets both strictly increase from entry to entry (:meth:`assign` removes
the entries a new one contradicts, as Kafka's ``maybeTruncateNonMonotonicEntries`` does); after the log
loads, every start offset lies in ``[log_start_offset, log_end_offset]``.

Durability (Lumber differs from Kafka, which flushes truncations asynchronously): every change rewrites
the file atomically before the call returns (temp file, fsync, rename, fsync of the folder). The log calls
:meth:`assign` *before* it writes the batches of a new epoch and truncates the cache *after* it cut its
segments, so after a kill at any point the file is never behind the log, only ahead of it, and the load
trims it to the recovered log end (:meth:`truncate_from_end`). A file that is torn or corrupt anyway (a
disk that lies, a hand edit) is reported with its file and line and rebuilt from the
``partitionLeaderEpoch`` of the log's batches (:meth:`LeaderEpochCache.load`). A missing file is an empty
cache (a log that never had a leader epoch).

Concurrency: the owning :class:`~broker.log.log.Log` makes every change under its append lock; readers
(:attr:`latest_epoch`, :meth:`entries`, :meth:`end_offset_for`) take no lock: the entries are one
immutable tuple, replaced as a whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from broker.log.checkpoint import read_checkpoint_lines, write_checkpoint_lines
from broker.log.errors import LogStorageError
from broker.log.file_names import LEADER_EPOCH_CHECKPOINT_FILE_NAME

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]

logger = logging.getLogger(__name__)

#: Kafka's ``OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH`` and ``UNDEFINED_EPOCH_OFFSET``.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

EpochEntry = tuple[int, int]


class LeaderEpochCache:
    """The ``(epoch, start_offset)`` entries of one partition and their checkpoint file. Create with
    :meth:`load`."""

    __slots__ = ("_entries", "_path", "_where", "folder_synced")

    def __init__(self, path: Path, *, where: str, entries: Iterable[EpochEntry] = ()) -> None:
        self._path = path
        self._where = where
        self._entries: tuple[EpochEntry, ...] = tuple(entries)
        #: Whether a change was written since this cache was made, and so the partition folder fsynced
        #: with it (the log's flush needs no fsync of its own for the folder's files made before).
        self.folder_synced = False

    @classmethod
    def load(
        cls, directory: Path, *, where: str, batch_epochs: Callable[[], Iterable[EpochEntry]]
    ) -> LeaderEpochCache:
        """The cache of the partition folder ``directory``, read from its checkpoint.

        A torn or corrupt checkpoint is reported (file and line) and rebuilt from ``batch_epochs()``: the
        ``(partitionLeaderEpoch, base_offset)`` of every batch of the log, in offset order.
        """
        path = directory / LEADER_EPOCH_CHECKPOINT_FILE_NAME
        try:
            return cls(path, where=where, entries=_read(path))
        except LogStorageError as exc:
            logger.warning("%s: %s; rebuilding the leader epochs from the log's batches", where, exc)
        cache = cls(path, where=where)
        latest = UNDEFINED_EPOCH
        rebuilt: list[EpochEntry] = []
        for epoch, base_offset in batch_epochs():
            if epoch > latest:
                rebuilt.append((epoch, base_offset))
                latest = epoch
        cache._replace(tuple(rebuilt))
        logger.warning("%s: rebuilt %s from the log: %s", where, path, rebuilt)
        return cache

    # ------------------------------------------------------------------------------------ reading

    @property
    def path(self) -> Path:
        return self._path

    @property
    def latest_epoch(self) -> int:
        """The newest epoch (-1 when there is none)."""
        entries = self._entries
        return entries[-1][0] if entries else UNDEFINED_EPOCH

    def entries(self) -> list[EpochEntry]:
        """Every ``(epoch, start_offset)``, oldest first."""
        return list(self._entries)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(epoch, end_offset)`` where epoch is the largest known epoch <=
        ``requested_epoch`` and end_offset the start offset of the first epoch after it (``log_end_offset``
        for the latest epoch); ``(-1, -1)`` when undefined (no epoch requested, or one above every known
        epoch). An epoch below every known one answers ``(requested_epoch, first start offset)``: its data
        is gone, and the follower replicates from the leader's oldest epoch on."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        floor: EpochEntry | None = None
        for entry in entries:
            if entry[0] > requested_epoch:
                if floor is None:
                    return requested_epoch, entry[1]
                return floor[0], entry[1]
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    # ------------------------------------------------------------------------------------ changing

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` begins at ``start_offset`` (a no-op when it is the latest epoch and began
        there or before). Entries with an epoch or a start offset at or above the new one are removed
        first (a warning says so when data was written under them). Writes the file."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"{self._where}: invalid leader epoch entry: epoch {epoch} at offset {start_offset}"
            )
        entries = self._entries
        if entries and entries[-1][0] == epoch and entries[-1][1] <= start_offset:
            return
        kept = list(entries)
        removed: list[EpochEntry] = []
        while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start_offset):
            removed.append(kept.pop())
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            logger.warning(
                "%s: leader epoch %d at offset %d removed the conflicting entries %s",
                self._where,
                epoch,
                start_offset,
                removed[::-1],
            )
        kept.append((epoch, start_offset))
        self._replace(tuple(kept))
        logger.info("%s: leader epoch %d starts at offset %d", self._where, epoch, start_offset)

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Remove the entries starting at or after ``end_offset`` (the log was cut there); returns them.
        Writes the file when anything was removed."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1][1] < end_offset:
            return []
        kept = [entry for entry in entries if entry[1] < end_offset]
        removed = list(entries[len(kept) :])
        self._replace(tuple(kept))
        logger.info(
            "%s: removed leader epochs %s at or after the log end offset %d", self._where, removed, end_offset
        )
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """The log now starts at ``start_offset``: the entries starting at or before it are removed and the
        newest of them is kept as starting at ``start_offset`` (Kafka's ``truncateFromStart``, exclusive:
        an entry at ``start_offset`` stays). Returns the removed entries; writes the file when any."""
        entries = self._entries
        if not entries or entries[0][1] > start_offset:
            return []
        removed = [entry for entry in entries if entry[1] <= start_offset]
        if len(removed) == 1 and removed[0][1] == start_offset:
            return []
        kept = ((removed[-1][0], start_offset), *entries[len(removed) :])
        self._replace(kept)
        logger.info(
            "%s: leader epochs %s removed below the log start offset %d; epoch %d now starts there",
            self._where,
            removed[:-1],
            start_offset,
            removed[-1][0],
        )
        return removed

    def clear(self) -> None:
        """Remove every entry (the log was emptied) and write the empty file."""
        self._replace(())

    def _replace(self, entries: tuple[EpochEntry, ...]) -> None:
        write_checkpoint_lines(self._path, [f"{epoch} {offset}" for epoch, offset in entries])
        self._entries = entries
        self.folder_synced = True

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._where}, {list(self._entries)})"


def _read(path: Path) -> list[EpochEntry]:
    """The entries of the checkpoint at ``path`` (none when there is no file); :class:`LogStorageError`
    naming the file and line when it is malformed or breaks the invariants."""
    entries: list[EpochEntry] = []
    for number, line in read_checkpoint_lines(path) or ():
        fields = line.split()
        try:
            epoch, offset = int(fields[0]), int(fields[1])
        except (IndexError, ValueError) as exc:
            raise LogStorageError(
                f"{path}: line {number}: expected '<epoch> <start_offset>' got {line!r}"
            ) from exc
        if len(fields) != 2:
            raise LogStorageError(f"{path}: line {number}: expected '<epoch> <start_offset>' got {line!r}")
        if epoch < 0 or offset < 0:
            raise LogStorageError(f"{path}: line {number}: negative epoch or offset in {line!r}")
        if entries and (epoch <= entries[-1][0] or offset <= entries[-1][1]):
            raise LogStorageError(
                f"{path}: line {number}: entry ({epoch}, {offset}) does not follow "
                f"({entries[-1][0]}, {entries[-1][1]}): epochs and start offsets must both increase"
            )
        entries.append((epoch, offset))
    return entries
