"""A cleaner thread's reads of segments, ahead of its work (:class:`ChunkReader`).

A cleaning pass reads segments one after the other: its map phase reads each from the disk where the page
cache does not hold it, its rewrite reads them again. A :class:`ChunkReader` reads the spans of segments
a pass asks for (:meth:`ChunkReader.start`) on a thread of its own, in *blocks* of a fixed size, one
``pread`` each, going on across span ends while the cleaner thread works on the blocks read before: the
disk and the cleaner's work overlap. :mod:`broker.log.cleaner_chunk` turns blocks into chunks of whole
batches.

The reader thread does nothing but the reads: it holds the interpreter lock only between two ``pread``
calls (which wait on the disk without it), for a few microseconds. It must: a thread that needs the lock
while the cleaner thread runs Python code waits for it up to the interpreter's switch interval (5 ms),
so a reader that also parsed what it read would fall behind the cleaner, which would then wait for it.

A block's bytes lie at :data:`CARRY_ROOM` in its buffer: the room before them takes the start of a batch
that the previous block cut (copied there by the cleaner thread), so that the batch is whole in one
buffer without copying the block.

How far ahead: at most :data:`MAX_BUFFERS` blocks are held at once (the one worked on, the ones read
ahead, the one being read). Buffers are kept from one pass to the next.

Concurrency: ``_changed`` (a condition) guards the buffers' bookkeeping (``_free``, ``_held``) and each
reading's state (:class:`_Reading`: its blocks read and not yet taken, whether it is stopped or done).
The reader thread takes a free buffer (waiting while :data:`MAX_BUFFERS` are held), reads into it without
the lock, and hands the block over. The cleaner thread takes blocks in order (:meth:`next_block`) and
gives each back when done with it (:meth:`give_back`): a buffer is written by one thread at a time, the
reader until it hands it over, then the cleaner thread. :meth:`stop` (also at the next :meth:`start`)
stops the reads and waits until the reader thread is done with every buffer, so no buffer is ever
written by a read nobody waits for. A read's error is raised by :meth:`next_block` in its place, after
the blocks read before it. One :class:`ChunkReader` belongs to one cleaner thread, one reading at a time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from broker.log.errors import LogStorageError
from broker.log.segment import Segment

__all__ = ["CARRY_ROOM", "MAX_BUFFERS", "Block", "ChunkReader", "Span"]

#: Blocks held at once: the one worked on, and two read ahead or being read (of 1 MiB by default: enough
#: for the disk to keep up with a cleaner thread, measured with ``bench/compaction.py``; each buffer
#: counts in the cleaner's memory, which ``test_cleaning_2m_distinct_keys...`` bounds).
MAX_BUFFERS = 3
#: Room before a block's bytes for the start of a batch the previous block cut (a larger one is copied).
CARRY_ROOM = 256 * 1024

#: A segment's bytes ``[position, max_position)`` to read.
Span = tuple[Segment, int, int]


@dataclass(slots=True)
class Block:
    """``length`` bytes of span ``span`` (its index) from ``position`` in its segment, at
    ``buffer[start:]`` (``start``: the room left before them, :data:`CARRY_ROOM`)."""

    span: int
    position: int
    length: int
    buffer: bytearray
    start: int

    @property
    def data(self) -> memoryview:
        return memoryview(self.buffer)[self.start : self.start + self.length]


class _Reading:
    """One reading's state (guarded by its reader's ``_changed``)."""

    def __init__(self) -> None:
        self.ready: deque[Block | BaseException] = deque()
        self.stopped = False
        self.done = False
        self.running: Future[None] | None = None


class ChunkReader:
    """One cleaner thread's buffers and reader thread (see the module docstring)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._free: list[bytearray] = []
        self._held = 0  # buffers taken and not given back (being read, read ahead, worked on)
        self._reading: _Reading | None = None
        self._executor: ThreadPoolExecutor | None = None

    def start(self, spans: Sequence[Span], block_bytes: int) -> None:
        """Start reading ``spans`` in blocks of at most ``block_bytes`` (a span's last may be shorter),
        after stopping the reading before, if any."""
        self.stop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lumber-log-cleaner-read")
        reading = self._reading = _Reading()
        reading.running = self._executor.submit(self._read_spans, reading, list(spans), block_bytes)

    @property
    def blocks_ahead(self) -> int:
        """Blocks read and not yet taken by :meth:`next_block`."""
        with self._changed:
            return len(self._reading.ready) if self._reading is not None else 0

    def next_block(self) -> Block | None:
        """The next block read, in order (waiting for it); None after the last. Raises what its read
        raised."""
        reading = self._reading
        if reading is None:
            return None
        with self._changed:
            while not reading.ready and not reading.done:
                self._changed.wait()
            if not reading.ready:
                return None
            item = reading.ready.popleft()
        if isinstance(item, BaseException):
            raise item
        return item

    def give_back(self, block: Block) -> None:
        """The caller is done with ``block``: its buffer may be read into again."""
        with self._changed:
            self._release(block.buffer)

    def stop(self) -> None:
        """Stop the reading, wait until the reader thread is done with its buffers, and take back those
        of the blocks not taken (the blocks the caller took are its to give back)."""
        reading, self._reading = self._reading, None
        if reading is None:
            return
        with self._changed:
            reading.stopped = True
            self._changed.notify_all()
        if reading.running is not None:
            reading.running.result()
        with self._changed:
            while reading.ready:
                left = reading.ready.popleft()
                if isinstance(left, Block):
                    self._release(left.buffer)

    def close(self) -> None:
        """Stop the reading, if any, and end the reader thread (its cleaner thread is ending)."""
        self.stop()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _read_spans(self, reading: _Reading, spans: list[Span], block_bytes: int) -> None:
        """The reader thread's loop."""
        try:
            for index, (segment, start, max_position) in enumerate(spans):
                position = start
                while position < max_position:
                    length = min(block_bytes, max_position - position)
                    room = CARRY_ROOM
                    buffer = self._take(reading, room + length)
                    if buffer is None:
                        return
                    try:
                        _read(segment, memoryview(buffer)[room:], position, length)
                    except BaseException:
                        with self._changed:
                            self._release(buffer)
                        raise
                    with self._changed:
                        reading.ready.append(Block(index, position, length, buffer, room))
                        self._changed.notify_all()
                    position += length
        except BaseException as exc:  # noqa: BLE001 - raised by next_block, in its place
            with self._changed:
                reading.ready.append(exc)
        finally:
            with self._changed:
                reading.done = True
                self._changed.notify_all()

    def _take(self, reading: _Reading, size: int) -> bytearray | None:
        """A free buffer of at least ``size`` bytes once fewer than :data:`MAX_BUFFERS` are held; None
        once the reading is stopped (reader thread)."""
        with self._changed:
            while not reading.stopped and self._held >= MAX_BUFFERS:
                self._changed.wait()
            if reading.stopped:
                return None
            buffer = self._free.pop() if self._free else bytearray()
            self._held += 1
        if len(buffer) < size:
            buffer = bytearray(size)  # a larger block than before: grown once, kept
        return buffer

    def _release(self, buffer: bytearray) -> None:
        """``buffer`` free again (with ``_changed`` held)."""
        self._held -= 1
        self._free.append(buffer)
        self._changed.notify_all()


def _read(segment: Segment, into: memoryview, position: int, length: int) -> None:
    """Read ``length`` bytes of ``segment`` from ``position`` into ``into``."""
    got = segment.read_into(into, length, position)
    if got != length:
        raise LogStorageError(
            f"{segment.path}: {got} bytes at position {position}, expected {length}: the segment is cut short"
        )
