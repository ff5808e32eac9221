"""Loading a partition folder at start-up, with crash recovery written as numbered passes.

Before pass 0, the log cleaner's interrupted swaps are finished or rolled back
(:func:`~broker.log.segment_swap.recover_swaps`: ``.cleaned`` files deleted, a committed ``.swap`` renamed
over the segments it replaces); a swapped-in segment is then validated like those after the checkpoint.
Pass 0, open: delete leftover ``*.tmp`` files and index files without a ``.log``; open every segment that
    needs no validation (its data was flushed: it lies before the recovery checkpoint, or the shutdown
    was clean), checking its indexes. A segment whose index is missing or fails its check joins the
    segments to validate.
Pass 1, validate: read every batch of the segments after the recovery checkpoint (from the segment that
    holds the checkpoint on; every segment when the checkpoint is unknown), checking magic, lengths,
    CRC-32C and offset sequence, and stop at the first torn or corrupt batch.
Pass 2, rebuild indexes: write fresh ``.index`` / ``.timeindex`` files for every validated segment, from
    its valid batches only.
Pass 3, truncate: cut the segment holding the first invalid batch right before it, delete every later
    segment (its offsets would follow a hole), and log exactly what was removed: file, byte range, the
    first offset lost and why.

Then the log rebuilds its idempotent producers' state (:mod:`broker.log.producer_state`): it deletes the
snapshots past the recovered log end, loads the newest readable one (a torn or corrupt one is reported and
deleted) and replays the batches after it; and it loads its leader epochs
(:mod:`broker.log.leader_epoch_cache`: a torn or corrupt checkpoint is reported and rebuilt from the
batches' ``partitionLeaderEpoch``), trimmed to the recovered ``[log_start_offset, log_end_offset]``. Pass 0
leaves the ``.snapshot`` files and the ``leader-epoch-checkpoint`` to them (a ``.tmp`` left by a crash
while one was written is deleted like any other).

Nothing invalid survives to be served: after these passes every byte of every segment is a whole batch
that was validated at append time (and flushed) or just now. The result says what each pass did.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from broker.log.errors import CorruptIndexError, LogStorageError
from broker.log.file_handle import fsync_dir
from broker.log.file_names import (
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT_FILE_NAME,
    LOG_SUFFIX,
    TEMP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_segment_file_name,
    parse_snapshot_file_name,
    segment_path,
)
from broker.log.segment import Segment
from broker.log.segment_scan import SegmentScan, fsync_file, scan_segment, truncate_log_file, write_indexes
from broker.log.segment_swap import recover_swaps
from broker.record.errors import CorruptRecordError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Truncation:
    """What pass 3 cut from the segment holding the first invalid batch."""

    path: str
    #: The segment's size before and after the cut.
    size_bytes: int
    valid_bytes: int
    #: The first offset that is gone (the log's end offset after recovery).
    first_lost_offset: int
    reason: str

    @property
    def truncated_bytes(self) -> int:
        return self.size_bytes - self.valid_bytes


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What loading a partition folder did, pass by pass."""

    where: str
    clean_shutdown: bool
    recovery_point: int
    #: Pass 0: stray files deleted.
    removed_files: tuple[str, ...] = ()
    #: The folder held no segment: a new, empty one was created at offset 0 (nothing fsynced yet).
    created_segment: bool = False
    #: Pass 0: segments whose index was missing or failed its sanity check (so they were validated too).
    bad_indexes: tuple[str, ...] = ()
    #: Pass 1: base offsets of the segments whose batches were validated, and how many batches were valid.
    validated_segments: tuple[int, ...] = ()
    validated_batches: int = 0
    #: Pass 2: base offsets of the segments whose indexes were rebuilt.
    rebuilt_indexes: tuple[int, ...] = ()
    #: Pass 3: the cut, if any, and the segments deleted after it.
    truncation: Truncation | None = None
    deleted_segments: tuple[str, ...] = ()

    @property
    def truncated(self) -> bool:
        return self.truncation is not None


def load_segments(
    directory: Path,
    *,
    where: str,
    recovery_point: int,
    clean_shutdown: bool,
    index_interval_bytes: int,
    now_ms: int,
) -> tuple[list[Segment], RecoveryResult]:
    """Open the segments of a partition folder, recovering as the module docstring describes.

    Always returns at least one segment (a new one at offset 0 for an empty folder, not fsynced: the log
    fsyncs it with the folder at its first flush).
    """
    swapped = recover_swaps(directory, where=where, index_interval_bytes=index_interval_bytes)
    # ---- pass 0: housekeeping, and open what needs no validation
    removed: list[str] = [*swapped.removed_files, *swapped.replaced_files]
    log_bases: set[int] = set()
    index_files: dict[int, list[Path]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.endswith(TEMP_SUFFIX):
            entry.unlink()
            removed.append(str(entry))
            continue
        parsed = parse_segment_file_name(entry.name)
        if parsed is None:
            if parse_snapshot_file_name(entry.name) is not None:
                continue  # a producer-state snapshot: the log's ProducerStateManager loads it
            if entry.name == LEADER_EPOCH_CHECKPOINT_FILE_NAME:
                continue  # the log's LeaderEpochCache loads it
            logger.warning("%s: ignoring %s, which is not a segment file", where, entry)
            continue
        base_offset, suffix = parsed
        if suffix == LOG_SUFFIX:
            log_bases.add(base_offset)
        else:
            index_files.setdefault(base_offset, []).append(entry)
    for base_offset, paths in index_files.items():
        if base_offset not in log_bases:
            for path in paths:
                path.unlink()
                removed.append(str(path))
    if removed:
        logger.warning("%s: pass 0 removed stray files %s", where, removed)
    bases = sorted(log_bases)
    if not bases:
        segment = Segment.create(directory, 0, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
        return [segment], RecoveryResult(
            where, clean_shutdown, recovery_point, removed_files=tuple(removed), created_segment=True
        )

    first_to_validate = len(bases) if clean_shutdown else max(bisect_right(bases, recovery_point) - 1, 0)
    loaded: dict[int, Segment] = {}
    to_validate: list[int] = []
    bad_indexes: list[str] = []
    for i, base_offset in enumerate(bases):
        if i >= first_to_validate or base_offset in swapped.completed_swaps:
            to_validate.append(base_offset)
            continue
        try:
            loaded[base_offset] = Segment.load(
                directory, base_offset, index_interval_bytes=index_interval_bytes, now_ms=now_ms
            )
        except (FileNotFoundError, CorruptIndexError, CorruptRecordError) as exc:
            logger.warning("%s: segment %d will be validated and re-indexed: %s", where, base_offset, exc)
            bad_indexes.append(str(segment_path(directory, base_offset, LOG_SUFFIX)))
            to_validate.append(base_offset)
    to_validate.sort()

    # ---- pass 1: validate every batch, stopping at the first invalid one
    scans: list[SegmentScan] = []
    invalid: SegmentScan | None = None
    for base_offset in to_validate:
        scan = scan_segment(
            segment_path(directory, base_offset, LOG_SUFFIX),
            base_offset,
            index_interval_bytes=index_interval_bytes,
        )
        scans.append(scan)
        if scan.error is not None:
            invalid = scan
            break
    if scans:
        logger.info(
            "%s: pass 1 validated %d batches in segments %s",
            where,
            sum(s.batch_count for s in scans),
            [s.base_offset for s in scans],
        )

    # ---- pass 2: rebuild the indexes of every validated segment
    for scan in scans:
        write_indexes(scan)

    # ---- pass 3: truncate at the first invalid batch, delete the segments after it
    truncation: Truncation | None = None
    deleted: list[str] = []
    deleted_bases: set[int] = set()
    if invalid is not None:
        truncate_log_file(invalid.path, invalid.valid_bytes)
        truncation = Truncation(
            path=str(invalid.path),
            size_bytes=invalid.size_bytes,
            valid_bytes=invalid.valid_bytes,
            first_lost_offset=invalid.next_offset,
            reason=invalid.error or "",
        )
        logger.warning(
            "%s: pass 3 truncated %s from %d to %d bytes (removed bytes [%d, %d), offsets from %d on): %s",
            where,
            invalid.path,
            invalid.size_bytes,
            invalid.valid_bytes,
            invalid.valid_bytes,
            invalid.size_bytes,
            invalid.next_offset,
            invalid.error,
        )
        for base_offset in bases:
            if base_offset <= invalid.base_offset:
                continue
            if base_offset in loaded:
                loaded.pop(base_offset).close()
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                segment_path(directory, base_offset, suffix).unlink(missing_ok=True)
            deleted.append(str(segment_path(directory, base_offset, LOG_SUFFIX)))
            deleted_bases.add(base_offset)
        if deleted:
            logger.warning("%s: pass 3 deleted the segments after the cut: %s", where, deleted)
        fsync_dir(directory)
    for scan in scans:
        if scan is not invalid:
            fsync_file(scan.path)  # what was validated is now durable: it becomes the recovery point

    segments: list[Segment] = []
    by_base = {scan.base_offset: scan for scan in scans}
    for base_offset in bases:
        if base_offset in deleted_bases:
            continue
        scan_of = by_base.get(base_offset)
        if scan_of is not None:
            segments.append(
                Segment.from_scan(scan_of, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
            )
        else:
            segments.append(loaded[base_offset])
    for previous, following in pairwise(segments):
        if previous.next_offset > following.base_offset:
            for segment in segments:
                segment.close()
            raise LogStorageError(
                f"{where}: segment {previous.path} ends at offset {previous.next_offset}, past the base "
                f"offset {following.base_offset} of the next segment {following.path}"
            )
    result = RecoveryResult(
        where=where,
        clean_shutdown=clean_shutdown,
        recovery_point=recovery_point,
        removed_files=tuple(removed),
        bad_indexes=tuple(bad_indexes),
        validated_segments=tuple(s.base_offset for s in scans),
        validated_batches=sum(s.batch_count for s in scans),
        rebuilt_indexes=tuple(s.base_offset for s in scans),
        truncation=truncation,
        deleted_segments=tuple(deleted),
    )
    return segments, result
