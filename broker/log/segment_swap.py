"""Swapping a cleaned segment in for the segments it replaces, crash-safely (Kafka's ``.cleaned`` ->
``.swap`` -> rename of ``LocalLog.replaceSegments``, and ``LogLoader``'s recovery of it).

The log cleaner (:mod:`broker.log.log_cleaner`) rewrites a group of consecutive segments ``[B, E)`` (their
offsets; ``E`` is the next segment's base offset) into one segment named by ``B``. On disk, in order:

1. **write**: ``<B>.log.cleaned``, ``<B>.index.cleaned``, ``<B>.timeindex.cleaned``, fsynced. The cleaned
   log holds what stays of the group's batches: its last batch may end before ``E`` (the group's emptied
   batches are dropped), and it may hold no batch at all (every record of the group superseded);
2. **commit** (:func:`commit_swap`): the indexes, then the log, renamed to ``.swap``; the folder fsynced.
   ``<B>.log.swap`` existing is the commit point;
3. **delete the old segments** (:meth:`broker.log.log.Log.replace_segments`): their three files unlinked
   (readers holding the old :class:`~broker.log.log_view.LogView` keep their open descriptors, as after
   retention: where Kafka renames them to ``.deleted`` and deletes them later, Lumber unlinks at once);
4. **finish** (:func:`finish_swap`): the indexes, then the log, renamed from ``.swap`` to their final names;
   the folder fsynced.

Steps 2-4 run under the log's append lock, after the log checked that the group is still the segments of
its current view (retention or a truncation may have replaced them meanwhile: then nothing is renamed and
the ``.cleaned`` files are deleted).

Recovery at load (:func:`recover_swaps`, before :mod:`broker.log.recovery`'s pass 0), for each state a kill
can leave:

* ``.cleaned`` files (a kill in step 1 or 2): deleted; every old segment is intact (rolled back);
* ``.swap`` index files without ``<B>.log.swap`` (a kill inside step 2): deleted (rolled back);
* ``<B>.log.swap`` (a kill in step 3 or 4): committed. The swap's own end ``E'`` (the offset after its last
  batch, ``B`` when it holds none) is read from its batches; every segment with a base offset in
  ``[B, max(E', B + 1))`` still present is deleted, the swap's index files are deleted, and
  ``<B>.log.swap`` is renamed to ``<B>.log`` (rolled forward). Its batches are then validated and its
  indexes rebuilt like any segment after the recovery point. Old segments of the group based at or past
  ``E'`` that step 3 had not deleted yet stay: they hold offsets past the swap's, uncleaned, a valid
  stretch of the log that the next pass cleans again (Kafka's ``LogLoader`` likewise deletes the
  segments in ``[min swap base, max swap next offset)`` only; ``E`` itself is written nowhere).

Each step is idempotent, so a kill during recovery is recovered the same way. Stateless functions; the
caller owns the folder (the log's lock, or loading before anyone else uses it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from broker.log.errors import LogStorageError
from broker.log.file_handle import fsync_dir
from broker.log.file_names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_cleaner_file_name,
    parse_segment_file_name,
    segment_path,
)
from broker.log.segment_scan import scan_segment

__all__ = ["SwapRecovery", "commit_swap", "delete_cleaned", "finish_swap", "recover_swaps"]

logger = logging.getLogger(__name__)

#: Renamed in this order at both steps: the log last, so that its name alone tells how far a step got.
_RENAME_ORDER = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)


def _path(directory: Path, base_offset: int, segment_suffix: str, suffix: str) -> Path:
    path = segment_path(directory, base_offset, segment_suffix)
    return path.with_name(path.name + suffix)


def _rename(source: Path, target: Path) -> None:
    try:
        source.replace(target)
    except OSError as exc:
        raise LogStorageError(f"{source}: cannot rename to {target.name}: {exc}") from exc


def commit_swap(directory: Path, base_offset: int) -> None:
    """Step 2: rename the cleaned segment ``base_offset``'s files from ``.cleaned`` to ``.swap``."""
    for segment_suffix in _RENAME_ORDER:
        _rename(
            _path(directory, base_offset, segment_suffix, CLEANED_SUFFIX),
            _path(directory, base_offset, segment_suffix, SWAP_SUFFIX),
        )
    fsync_dir(directory)


def finish_swap(directory: Path, base_offset: int) -> None:
    """Step 4: rename the swapped segment ``base_offset``'s files from ``.swap`` to their final names."""
    for segment_suffix in _RENAME_ORDER:
        _rename(
            _path(directory, base_offset, segment_suffix, SWAP_SUFFIX),
            segment_path(directory, base_offset, segment_suffix),
        )
    fsync_dir(directory)


def delete_cleaned(directory: Path, base_offset: int) -> None:
    """Remove an abandoned cleaned segment's files (a pass that was aborted or failed)."""
    for segment_suffix in SEGMENT_SUFFIXES:
        _path(directory, base_offset, segment_suffix, CLEANED_SUFFIX).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class SwapRecovery:
    """What :func:`recover_swaps` did in one partition folder."""

    #: Cleaner files deleted (rolled back).
    removed_files: tuple[str, ...] = ()
    #: Base offsets of the swaps rolled forward: their segments must be validated and re-indexed.
    completed_swaps: tuple[int, ...] = ()
    #: Old segment files deleted because a completed swap covers their offsets.
    replaced_files: tuple[str, ...] = ()


def recover_swaps(directory: Path, *, where: str, index_interval_bytes: int) -> SwapRecovery:
    """Finish or roll back every swap a kill interrupted (see the module docstring)."""
    removed: list[str] = []
    swaps: list[int] = []
    swap_indexes: list[tuple[int, Path]] = []
    for entry in sorted(directory.iterdir()):
        parsed = parse_cleaner_file_name(entry.name)
        if parsed is None:
            continue
        base_offset, segment_suffix, suffix = parsed
        if suffix == CLEANED_SUFFIX:
            entry.unlink()
            removed.append(str(entry))
        elif segment_suffix == LOG_SUFFIX:
            swaps.append(base_offset)
        else:
            swap_indexes.append((base_offset, entry))
    for base_offset, path in swap_indexes:
        if base_offset not in swaps:  # a kill inside step 2: not committed
            path.unlink()
            removed.append(str(path))
    if removed:
        logger.warning("%s: deleted the files of an interrupted cleaning: %s", where, removed)
    replaced: list[str] = []
    for base_offset in sorted(swaps):
        swap_log = _path(directory, base_offset, LOG_SUFFIX, SWAP_SUFFIX)
        scan = scan_segment(swap_log, base_offset, index_interval_bytes=index_interval_bytes)
        end = max(scan.next_offset, base_offset + 1)  # an empty swap replaces the old segment at its base
        for entry in sorted(directory.iterdir()):
            parsed_segment = parse_segment_file_name(entry.name)
            if parsed_segment is not None and base_offset <= parsed_segment[0] < end:
                entry.unlink()
                replaced.append(str(entry))
        for segment_suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            _path(directory, base_offset, segment_suffix, SWAP_SUFFIX).unlink(missing_ok=True)
        _rename(swap_log, segment_path(directory, base_offset, LOG_SUFFIX))
        fsync_dir(directory)
        logger.warning(
            "%s: finished the swap of cleaned segment %d (offsets [%d, %d)): replaced %s",
            where,
            base_offset,
            base_offset,
            end,
            replaced,
        )
    if removed:
        fsync_dir(directory)
    return SwapRecovery(tuple(removed), tuple(sorted(swaps)), tuple(replaced))
