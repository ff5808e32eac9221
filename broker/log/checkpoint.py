"""Kafka's checkpoint files: small text files of entries, replaced atomically.

Three files use this format (Kafka's ``CheckpointFile``), UTF-8 text, one item per line::

    0                              version
    2                              number of entries
    clicks 0 1200                  one entry per line, as its file defines them
    clicks 1 977

* ``recovery-point-offset-checkpoint`` (per log dir): ``<topic> <partition> <offset>``, the flushed
  offset of every partition: every offset below it was on disk when the file was written, so after a
  crash recovery validates only the batches from there on;
* ``replication-offset-checkpoint`` (per log dir): ``<topic> <partition> <offset>``, the replicated high
  watermark of every partition that has one (:mod:`broker.log.log_replication`);
* ``leader-epoch-checkpoint`` (per partition folder): ``<epoch> <start_offset>``
  (:mod:`broker.log.leader_epoch_cache`).

:func:`write_checkpoint_lines` / :func:`read_checkpoint_lines` handle the version, the count and the
atomic replacement; :func:`write_checkpoint` / :func:`read_checkpoint` are the offset files' entries.

Writing is atomic and durable: a ``.tmp`` sibling is written and fsynced, renamed over the file, and the
folder is fsynced, so a kill at any point leaves either the old file or the new one (and at worst a stray
``.tmp``, which the next write replaces). A file that cannot be read raises
:class:`~broker.log.errors.LogStorageError` naming the file and the line. Stateless functions: the caller
serialises writes of one file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.log.errors import LogStorageError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path
from broker.record.topic_partition import TopicPartition

VERSION = 0


def write_checkpoint_lines(path: Path, entries: Sequence[str]) -> None:
    """Replace ``path`` with the version, the count and ``entries`` (atomically and durably)."""
    lines = [str(VERSION), str(len(entries)), *entries]
    payload = ("\n".join(lines) + "\n").encode("utf-8")
    tmp = temp_path(path)
    file = FileHandle.open(tmp, create=True)
    try:
        file.truncate(0)
        file.append(payload)
        file.fsync()
    finally:
        file.close()
    try:
        tmp.replace(path)
    except OSError as exc:
        raise LogStorageError(f"{path}: cannot replace the checkpoint: {exc}") from exc
    fsync_dir(path.parent)


def read_checkpoint_lines(path: Path) -> list[tuple[int, str]] | None:
    """The entry lines of ``path`` with their line numbers (1-based, counting the header); None when the
    file does not exist. Checks the version and the count."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LogStorageError(f"{path}: cannot read the checkpoint: {exc}") from exc
    lines = text.splitlines()
    if len(lines) < 2:
        raise LogStorageError(
            f"{path}: a checkpoint needs a version and a count line, found {len(lines)} lines"
        )
    if lines[0].strip() != str(VERSION):
        raise LogStorageError(f"{path}: line 1: expected version {VERSION} got {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise LogStorageError(f"{path}: line 2: expected an entry count got {lines[1]!r}") from exc
    entries = lines[2:]
    if len(entries) != count:
        raise LogStorageError(f"{path}: line 2 announces {count} entries, the file has {len(entries)}")
    return list(enumerate(entries, start=3))


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Replace the offset checkpoint ``path`` with ``offsets`` (atomically and durably)."""
    write_checkpoint_lines(
        path, [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    )


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in the offset checkpoint ``path``; an empty mapping when the file does not exist."""
    offsets: dict[TopicPartition, int] = {}
    for number, line in read_checkpoint_lines(path) or ():
        fields = line.split(" ")
        try:
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError) as exc:
            raise LogStorageError(
                f"{path}: line {number}: expected '<topic> <partition> <offset>' got {line!r}"
            ) from exc
        if len(fields) != 3 or partition < 0 or offset < 0:
            raise LogStorageError(
                f"{path}: line {number}: expected '<topic> <partition> <offset>' got {line!r}"
            )
        offsets[TopicPartition(topic, partition)] = offset
    return offsets
