"""A log dir's recovery-point checkpoint: ``recovery-point-offset-checkpoint``.

It records, for every partition in the dir, the flushed offset: every offset below it was on disk when
the file was written, so after a crash recovery validates only the batches from there on.

File format (Kafka's offset checkpoint files), UTF-8 text, one item per line::

    0                              version
    2                              number of entries
    clicks 0 1200                  <topic> <partition> <offset>
    clicks 1 977

It is written atomically: a ``.tmp`` sibling is written and fsynced, renamed over the file, and the folder
is fsynced. A file that cannot be read raises :class:`~broker.log.errors.LogStorageError` naming the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from broker.log.errors import LogStorageError
from broker.log.file_handle import FileHandle, fsync_dir
from broker.log.file_names import temp_path
from broker.record.topic_partition import TopicPartition

VERSION = 0


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Replace ``path`` with ``offsets`` (atomically and durably)."""
    lines = [str(VERSION), str(len(offsets))]
    lines.extend(f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
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


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; an empty mapping when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
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
    offsets: dict[TopicPartition, int] = {}
    for number, line in enumerate(entries, start=3):
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
