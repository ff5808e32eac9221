"""The audit outbox's journal: what one emitter counted, took and published, in a local append-only file.

An :class:`~audit.audit_counter.AuditCounter` with a journal writes every count to it *before* the count
can be forgotten (before the producer's callbacks learn of the acknowledgement; before the mirror commits
the source offsets it copied), every take (the events of one emission, with their ids) and every sequence
whose events the brokers all confirmed. A process killed at any point restarts from it
(:meth:`AuditJournal.open`): the events taken but not confirmed are published again with the same ids
(readers drop the second copy: :func:`audit.audit_report.dedupe`), the counts not taken yet become the
next emission, and nothing counted is lost or counted twice.

**Where.** ``[audit] state_dir``/``<tier>-<name>.journal``: one file per emitter, ``name`` its stable name
(the producer's ``client_id``, the mirror's ``mirror-<group>``), so that the same process restarted with
the same settings finds its journal. The file is locked (``flock``) while open: a second emitter with the
same name in the same state dir is refused (:class:`~audit.errors.AuditError`) rather than sharing it.

**The file format.** A sequence of frames, nothing else::

    frame   = length (u32 big-endian) | crc (u32 big-endian, CRC-32 of the payload) | payload
    payload = one JSON object (UTF-8), "k" its kind:

    {"k": "open", "counter": C, "tier": T, "host": H, "window_ms": W}
        a process started counting: the counter id C (kept for the journal's life, so that the ids of
        the events it publishes are stable), the window of the "count" entries that follow
    {"k": "count", "c": [[topic, window_start_ms, count, bytes, missing_timestamp_count], ...],
                   "r": [[topic, partition, from_offset, to_offset], ...]}
        counts confirmed since the previous entry; "r" (mirror tier only) the source offsets
        [from, to) they are of, so that a copy made again after a restart is not counted again
    {"k": "take", "s": S, "events": [<AuditEvent.to_record()>, ...]}
        the counts so far became the events of sequence S (the count entries before it are consumed)
    {"k": "done", "s": S}
        every event of sequence S is confirmed by the brokers of the audit topic

Replaying the file gives the state: the counter id and last sequence, the events of every take without a
done (to publish again), the counts after the last take (to take next) and the mirror's counted ranges.
When the file exceeds :data:`COMPACT_BYTES` and a sequence is done, it is rewritten as that state (an
open, the pending takes, one count entry) into a temporary file that replaces it by ``rename`` (atomic:
a crash leaves the old file or the new one).

**Torn and corrupted tails.** A frame whose header or payload is cut short, whose CRC does not match or
whose payload is not a JSON object ends the journal: :meth:`AuditJournal.open` truncates the file at the
end of the last whole frame, exactly, and logs what it dropped (path, offset, bytes) at WARNING level.
Only the last frame can be torn by a killed process; a bad frame inside the file (a disk's corruption)
drops everything after it too, which the log line says.

**What survives what.** Every entry is one ``write()`` of the whole frame, without ``fsync``: once it
returned, the bytes are in the kernel's page cache and survive ``kill -9`` of the process. A crash of the
machine (power, kernel) loses what the kernel had not written back yet (up to ``vm.dirty_expire_centisecs``,
30 s by default), and may leave a torn frame, which the next open truncates: those counts are lost, as the
in-memory outbox lost them on any crash. ``fsync`` per count would bound that loss but costs a disk flush
per acknowledged batch; Lumber does not pay it, as Kafka's producers keep their own state in memory.

Thread safety: one lock guards the file; :class:`~audit.audit_counter.AuditCounter` calls :meth:`append`
under its own lock so that the entries are in the order of its state changes.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.audit_event import AuditEvent
from audit.errors import AuditError

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">II")
#: A frame larger than this is not one (a corrupted length).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: Rewrite the journal as its state once it is this large and a sequence was confirmed.
COMPACT_BYTES = 4 * 1024 * 1024

#: (topic, window start) -> [count, bytes, missing timestamp count]
Cells = dict[tuple[str, int], list[int]]
#: (topic, partition) -> sorted disjoint [from, to) offset ranges
Ranges = dict[tuple[str, int], list[list[int]]]


def journal_path(state_dir: str | Path, tier: str, name: str) -> Path:
    """The journal of the emitter ``name`` of ``tier`` under ``state_dir`` (``name`` made file-safe)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return Path(state_dir) / f"{tier}-{safe}.journal"


def frame(entry: dict[str, Any]) -> bytes:
    """One journal frame holding ``entry`` (see the module docstring)."""
    payload = json.dumps(entry, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class JournalState:
    """What a journal's entries add up to (see the module docstring)."""

    counter: str = ""
    tier: str = ""
    host: str = ""
    window_ms: int = 0
    sequence: int = 0
    #: sequence -> its events, taken and not all confirmed
    pending: dict[int, list[AuditEvent]] = field(default_factory=dict)
    #: counts after the last take, in the window of the last open
    cells: Cells = field(default_factory=dict)
    ranges: Ranges = field(default_factory=dict)

    def apply(self, entry: dict[str, Any]) -> None:
        kind = entry["k"]
        if kind == "open":
            self.counter = str(entry["counter"])
            self.tier = str(entry.get("tier", ""))
            self.host = str(entry.get("host", ""))
            self.window_ms = int(entry["window_ms"])
        elif kind == "count":
            for topic, start, count, size, missing in entry.get("c", ()):
                add_cell(self.cells, (str(topic), int(start)), int(count), int(size), int(missing))
            for topic, partition, start, end in entry.get("r", ()):
                add_range(self.ranges, (str(topic), int(partition)), int(start), int(end))
        elif kind == "take":
            sequence = int(entry["s"])
            events = [AuditEvent.from_record(r) for r in entry["events"]]
            self.sequence = max(self.sequence, sequence)
            if events:
                self.pending[sequence] = events
            self.cells = {}
        elif kind == "done":
            self.pending.pop(int(entry["s"]), None)
        else:
            raise ValueError(f"unknown entry kind {kind!r}")

    def entries(self) -> list[dict[str, Any]]:
        """The entries that replay to this state (a compacted journal)."""
        out: list[dict[str, Any]] = [open_entry(self.counter, self.tier, self.host, self.window_ms)]
        for sequence, events in sorted(self.pending.items()):
            out.append(take_entry(sequence, events))
        if self.sequence and self.sequence not in self.pending:
            out.append({"k": "take", "s": self.sequence, "events": []})
        out.append(count_entry(self.cells, self.ranges))
        return out


def open_entry(counter: str, tier: str, host: str, window_ms: int) -> dict[str, Any]:
    return {"k": "open", "counter": counter, "tier": tier, "host": host, "window_ms": window_ms}


def count_entry(cells: Cells, ranges: Ranges | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"k": "count", "c": [[t, w, *v] for (t, w), v in sorted(cells.items())]}
    if ranges:
        entry["r"] = [[t, p, a, b] for (t, p), spans in sorted(ranges.items()) for a, b in spans]
    return entry


def take_entry(sequence: int, events: Sequence[AuditEvent]) -> dict[str, Any]:
    return {"k": "take", "s": sequence, "events": [e.to_record() for e in events]}


def add_cell(cells: Cells, key: tuple[str, int], count: int, size: int, missing: int) -> None:
    found = cells.get(key)
    if found is None:
        cells[key] = [count, size, missing]
    else:
        found[0] += count
        found[1] += size
        found[2] += missing


def add_range(ranges: Ranges, key: tuple[str, int], start: int, end: int) -> None:
    """Add [start, end) to ``key``'s sorted disjoint ranges, merging touching ones."""
    spans = ranges.setdefault(key, [])
    merged: list[list[int]] = []
    placed = False
    for a, b in spans:
        if b < start or (placed and a > end):
            merged.append([a, b])
        elif a > end:
            merged.append([start, end])
            merged.append([a, b])
            placed = True
        else:
            start, end = min(a, start), max(b, end)
    if not placed:
        merged.append([start, end])
    merged.sort()
    ranges[key] = merged


def covered(ranges: Ranges, key: tuple[str, int], offset: int) -> bool:
    """Whether ``offset`` is in one of ``key``'s ranges."""
    for a, b in ranges.get(key, ()):
        if a <= offset < b:
            return True
        if a > offset:
            return False
    return False


class AuditJournal:
    """One emitter's journal file, open and locked; see the module docstring."""

    #: rewrite the file as its state past this size (:meth:`AuditCounter.published` does)
    compact_bytes = COMPACT_BYTES

    def __init__(self, path: Path, fd: int, state: JournalState, size: int) -> None:
        self.path = path
        self._fd = fd
        self.state = state
        self._size = size
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> AuditJournal:
        """Open (creating it and its directory), lock and replay the journal at ``path``, truncating a torn
        or corrupted tail: :attr:`state` is what it holds. Raises :class:`AuditError` when another emitter
        holds it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AuditError(
                f"audit journal {path} is in use by another emitter: give each producer (or mirror) "
                "sharing [audit] state_dir a client id of its own"
            ) from None
        try:
            state, good = _replay(fd, path)
            size = os.fstat(fd).st_size
            if good < size:
                os.ftruncate(fd, good)
            return cls(path, fd, state, good)
        except BaseException:
            os.close(fd)
            raise

    def append(self, entry: dict[str, Any]) -> None:
        """Write ``entry`` as one frame, with one ``write()`` (see the module docstring)."""
        data = frame(entry)
        with self._lock:
            if self._fd < 0:
                log.error("audit journal %s is closed; not journaled: %s", self.path, entry)
                return
            written = os.write(self._fd, data)
            while written < len(data):  # a short write to a regular file: finish it
                written += os.write(self._fd, data[written:])
            self._size += len(data)

    @property
    def size(self) -> int:
        with self._lock:
            return self._size

    def compact(self, state: JournalState) -> None:
        """Replace the file by the entries of ``state`` (write a temporary file, rename it over)."""
        data = b"".join(frame(e) for e in state.entries())
        tmp = self.path.with_name(self.path.name + ".tmp")
        with self._lock:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                tmp.rename(self.path)  # the new file is locked before anyone can open it by its name
            except BaseException:
                os.close(fd)
                raise
            os.close(self._fd)
            self._fd = fd
            self._size = len(data)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def _entry(payload: bytes) -> dict[str, Any]:
    entry = json.loads(payload)
    if not isinstance(entry, dict):
        raise TypeError(f"not a JSON object but {type(entry).__name__}")
    return entry


def _replay(fd: int, path: Path) -> tuple[JournalState, int]:
    """The state of the journal open at ``fd`` and the length of its whole, valid frames."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    state = JournalState()
    position = 0
    reason = ""
    while position < len(data):
        if len(data) - position < _HEADER.size:
            reason = f"a frame header cut short ({len(data) - position} of {_HEADER.size} bytes)"
            break
        length, crc = _HEADER.unpack_from(data, position)
        if length > MAX_FRAME_BYTES:
            reason = f"a frame length of {length} bytes (at most {MAX_FRAME_BYTES})"
            break
        start = position + _HEADER.size
        payload = data[start : start + length]
        if len(payload) < length:
            reason = f"a frame payload cut short ({len(payload)} of {length} bytes)"
            break
        actual = zlib.crc32(payload)
        if actual != crc:
            reason = f"a CRC mismatch (expected {crc:#010x}, computed {actual:#010x})"
            break
        try:
            state.apply(_entry(payload))
        except (ValueError, KeyError, TypeError) as exc:
            reason = f"an entry that does not read ({exc})"
            break
        position = start + length
    if reason:
        log.warning(
            "audit journal %s: %s at offset %d; truncated there, %d bytes dropped",
            path,
            reason,
            position,
            len(data) - position,
        )
    return state, position
