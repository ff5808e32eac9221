"""Every file-name rule of the log storage, in one place.

A log dir holds::

    .lock                               exclusive flock while a broker (LogManager) uses the dir
    .lumber_cleanshutdown               present only after a clean shutdown; removed at start-up
    recovery-point-offset-checkpoint    flushed offset of every partition (see broker.log.checkpoint)
    cleaner-offset-checkpoint           how far each compacted partition is clean (its first dirty
                                        offset; broker.log.log_cleaner_manager)
    replication-offset-checkpoint       replicated high watermark of every partition that has one
                                        (written once one has it: see broker.log.log_manager)
    <topic>-<partition>/                one folder per partition
    <topic>-<partition>.<32 hex>-delete/   a partition being deleted (renamed first, then removed)

A partition folder holds segments, each named by its base offset as 20 zero-padded digits::

    00000000000000000000.log        the record batches
    00000000000000000000.index      sparse offset index  (broker.log.offset_index)
    00000000000000000000.timeindex  sparse time index    (broker.log.time_index)
    00000000000000000042.snapshot   the idempotent producers' state as of offset 42
                                    (broker.log.producer_state); written at rolls and clean shutdowns
    leader-epoch-checkpoint         the leader epochs and their start offsets
                                    (broker.log.leader_epoch_cache)
    *.tmp                           an index or checkpoint being written; left over only by a crash,
                                    deleted at load
    00000000000000000000.log.cleaned   a segment the log cleaner is writing (with .index.cleaned and
                                    .timeindex.cleaned); deleted at load
    00000000000000000000.log.swap   a cleaned segment committed to replace the segments whose offsets it
                                    covers (indexes likewise); recovery finishes the swap
                                    (broker.log.recovery, broker.log.log_cleaner)

Topic names follow Kafka's rules (:func:`broker.record.topic_name.validate_topic_name`), so a partition
folder name can never contain a path separator or be ``.`` / ``..``.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_partition, validate_topic_name
from broker.record.topic_partition import TopicPartition

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TEMP_SUFFIX = ".tmp"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

LOCK_FILE_NAME = ".lock"
CLEAN_SHUTDOWN_FILE_NAME = ".lumber_cleanshutdown"
RECOVERY_POINT_CHECKPOINT_FILE_NAME = "recovery-point-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE_NAME = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE_NAME = "replication-offset-checkpoint"
#: Log start offsets raised by DeleteRecords past the first segment's base offset (Kafka's name).
LOG_START_OFFSET_CHECKPOINT_FILE_NAME = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE_NAME = "leader-epoch-checkpoint"

OFFSET_DIGITS = 20

_SEGMENT_FILE = re.compile(r"(\d{20})(\.log|\.index|\.timeindex)")
_CLEANER_FILE = re.compile(r"(\d{20})(\.log|\.index|\.timeindex)(\.cleaned|\.swap)")
_SNAPSHOT_FILE = re.compile(r"(\d{20})\.snapshot")
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_DELETED_PARTITION_DIR = re.compile(r"(.+)-(\d+)\.([0-9a-f]{32})-delete")


def partition_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>``, after checking both by Kafka's rules."""
    validate_topic_name(tp.topic)
    validate_partition(tp.partition)
    return f"{tp.topic}-{tp.partition}"


def partition_dir(log_dir: Path, tp: TopicPartition) -> Path:
    """The folder of ``tp`` inside ``log_dir``; checked to stay directly inside it."""
    path = log_dir / partition_dir_name(tp)
    if path.parent != log_dir or path.name in {"", ".", ".."}:
        raise InvalidTopicError(f"partition {tp} would not be a folder directly inside {log_dir}")
    return path


def parse_partition_dir_name(name: str) -> TopicPartition | None:
    """The partition a folder name stands for, or None when it is not a valid partition folder name."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    tp = TopicPartition(match.group(1), int(match.group(2)))
    if str(tp) != name:  # "t-007" is not the canonical folder of partition 7
        return None
    try:
        validate_topic_name(tp.topic)
        validate_partition(tp.partition)
    except InvalidTopicError:
        return None
    return tp


def deleted_partition_dir_name(tp: TopicPartition) -> str:
    """A unique name to rename a partition folder to before removing it."""
    return f"{partition_dir_name(tp)}.{uuid.uuid4().hex}-delete"


def is_deleted_partition_dir_name(name: str) -> bool:
    return _DELETED_PARTITION_DIR.fullmatch(name) is not None


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``<20-digit base offset><suffix>``, e.g. ``00000000000000000042.log``."""
    if suffix not in SEGMENT_SUFFIXES:
        raise ValueError(f"unknown segment file suffix {suffix!r}")
    if not 0 <= base_offset < 10**OFFSET_DIGITS:
        raise ValueError(f"base offset {base_offset} does not fit in {OFFSET_DIGITS} digits")
    return f"{base_offset:0{OFFSET_DIGITS}d}{suffix}"


def segment_path(partition_dir_path: Path, base_offset: int, suffix: str) -> Path:
    return partition_dir_path / segment_file_name(base_offset, suffix)


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """``(base_offset, suffix)`` of a segment file name, or None for any other name."""
    match = _SEGMENT_FILE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def parse_cleaner_file_name(name: str) -> tuple[int, str, str] | None:
    """``(base_offset, segment suffix, .cleaned or .swap)`` of a cleaner's file name, or None."""
    match = _CLEANER_FILE.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2), match.group(3)


def temp_path(path: Path) -> Path:
    return path.with_name(path.name + TEMP_SUFFIX)


def snapshot_file_name(offset: int) -> str:
    """``<20-digit offset>.snapshot``: the producer state as of ``offset`` (broker.log.producer_state)."""
    if not 0 <= offset < 10**OFFSET_DIGITS:
        raise ValueError(f"offset {offset} does not fit in {OFFSET_DIGITS} digits")
    return f"{offset:0{OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> int | None:
    """The offset of a producer-state snapshot file name, or None for any other name."""
    match = _SNAPSHOT_FILE.fullmatch(name)
    return None if match is None else int(match.group(1))
