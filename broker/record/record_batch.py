"""A record batch v2 as read: :class:`RecordBatch`, a zero-copy view of one batch's bytes.

The header's layout and what the CRC covers are documented in :mod:`broker.record.batch_header`, a
record's layout in :mod:`broker.record.record`. A view checks on construction only that its buffer holds
the whole batch its ``batchLength`` announces; :meth:`RecordBatch.validate` checks magic, lengths, codec
and CRC, :meth:`RecordBatch.validate_records` the records' framing, :meth:`RecordBatch.records` decodes.
Batches are built by :mod:`broker.record.record_batch_builder` and split out of buffers by
:mod:`broker.record.batch_scan`.

This module is the way into a batch: callers ask it, not the layout.

* **The body.** :meth:`RecordBatch.body` is the records' bytes (a view, or decompressed). Every body is read
  by :mod:`broker.record.record_walker`, through the reader that fits, which the batch chooses:
  :meth:`RecordBatch.records` (the plain walk), :meth:`RecordBatch.values` (offsets and values: the
  columnar reader, :mod:`broker.record.value_columns`, from
  :data:`~broker.record.record_walker.VECTORISED_MIN_RECORDS` records when it vouches for them, else the
  values walk), :meth:`RecordBatch.values_of` (the same for a consumer's fetch of many batches: the
  columnar reader over all of them at once, else each batch's :meth:`~RecordBatch.values`; the consumer
  picks no reader), :meth:`RecordBatch.validate_records` (bytes compared for records of one layout, else the
  walk). Where every record lies, with its key (the log cleaner's way: :meth:`RecordBatch.key_columns`
  of batch views, :meth:`RecordBatch.key_columns_of` of batches in a read of a segment, in place): the
  compiled reader of many batches at once (:mod:`broker.record.key_columns`), else the same columns by the
  walk, which names what is wrong; the cleaner picks no reader and falls back on none.
  ``tests/broker/record/test_body_readers.py`` runs every reader over the same batches. For the batches
  of one request the batches choose too: :meth:`RecordBatch.records_validator`
  (a run of one-record batches proved together, else each batch's :meth:`~RecordBatch.validate_records`)
  and :meth:`RecordBatch.first_keyless_record` (the key columns for many records once compiled, else the
  walk): the log validator asks them, it picks no reader.
* **In-place changes of the header**, on a writable buffer holding the batch at ``position``:
  :func:`set_base_offset` (a field the CRC does not cover), :func:`set_producer_fields` (the idempotent
  producer's id, epoch and base sequence) and :func:`restamp_crc` (the CRC again, after a change of covered
  bytes: the producer's stamp, the cleaner's rewritten counts). :meth:`RecordBatch.stamped_prefix` is a
  batch's first 16 bytes with a new base offset and leader epoch, for a writer that writes them in front of
  the rest (the segment's append).

Thread safety: a :class:`RecordBatch` is an immutable view (safe to share); its bytes are changed in place
only by the one thread that owns the buffer before it is shared.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING

import crc32c

from broker import compiled
from broker.record.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    PRODUCER_FIELDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
)
from broker.record.compression import CompressionType, decompress
from broker.record.errors import CorruptRecordError, UnsupportedCompressionError
from broker.record.key_columns import (
    KeyColumns,
    batch_key_columns,
    key_columns,
    key_columns_in,
    walked_key_columns_in,
)
from broker.record.layout_check import one_record_batches_valid, records_of_one_layout
from broker.record.record import Record
from broker.record.record_walker import NO_OFFSET_LIMIT as NO_OFFSET_LIMIT  # noqa: PLC0414 - re-exported
from broker.record.record_walker import VECTORISED_MIN_RECORDS, walk_records, walk_values
from broker.record.value_columns import decode_values_vectorised, load_decoder
from broker.record.varint import Buffer

if TYPE_CHECKING:
    from broker.record.batch_header_columns import BatchHeaderColumns

__all__ = [
    "KEY_COLUMNS_MIN_RECORDS",
    "RecordBatch",
    "restamp_crc",
    "set_base_offset",
    "set_producer_fields",
]

_INT64 = struct.Struct(">q")
_CRC = struct.Struct(">I")
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch

#: From this many records in a request, the key columns find a keyless record
#: (:meth:`RecordBatch.first_keyless_record`); below, walking them is cheaper than the columns' numpy
#: passes, whose fixed cost is about 75 us (a one-record commit to ``__consumer_offsets``: 77 us by
#: columns, 2.5 walked).
KEY_COLUMNS_MIN_RECORDS = 64


class RecordBatch:
    """A zero-copy view over the bytes of one batch, with its header fields as properties.

    Construction checks only that the buffer holds the whole batch its ``batchLength`` announces;
    :meth:`validate` checks magic, lengths, codec and CRC. ``where`` and ``position`` (the batch's byte
    position in its file, partition or request) only serve error messages.
    """

    __slots__ = ("_buffer", "_header", "_position", "_where")

    def __init__(self, buffer: Buffer, *, where: str = "<buffer>", position: int | None = None) -> None:
        view = memoryview(buffer)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        available = len(view)
        if available < HEADER_SIZE:
            raise CorruptRecordError(
                where,
                f"{available} bytes cannot hold a batch header ({HEADER_SIZE} bytes)",
                position=position,
            )
        header: tuple[int, ...] = HEADER.unpack_from(view)
        length = header[1]
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                where,
                f"batchLength {length} is below the minimum {MIN_BATCH_LENGTH}",
                position=position,
                offset=header[0],
            )
        size = LOG_OVERHEAD + length
        if size > available:
            raise CorruptRecordError(
                where,
                f"batchLength {length} announces {size} bytes but only {available} are there",
                position=position,
                offset=header[0],
            )
        self._buffer = view if size == available else view[:size]
        self._header = header
        self._where = where
        self._position = position

    # -- header fields

    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (exactly ``size_bytes`` of them)."""
        return self._buffer

    @property
    def where(self) -> str:
        """The file, partition or request the batch was read from (for messages)."""
        return self._where

    @property
    def position(self) -> int | None:
        """The batch's byte position in the file, partition or request it was read from, if known."""
        return self._position

    @property
    def base_offset(self) -> int:
        # Read live: the base offset is the one field the broker rewrites in place.
        base_offset: int = _INT64.unpack_from(self._buffer)[0]
        return base_offset

    @property
    def batch_length(self) -> int:
        length: int = self._header[1]
        return length

    @property
    def size_bytes(self) -> int:
        return len(self._buffer)

    @property
    def partition_leader_epoch(self) -> int:
        epoch: int = self._header[2]
        return epoch

    @property
    def magic(self) -> int:
        magic: int = self._header[3]
        return magic

    @property
    def crc(self) -> int:
        crc: int = self._header[4]
        return crc

    @property
    def attributes(self) -> int:
        attributes: int = self._header[5]
        return attributes

    @property
    def compression(self) -> CompressionType:
        """The codec; raises :class:`UnsupportedCompressionError` for codec ids Kafka does not define."""
        codec_id = self._header[5] & COMPRESSION_MASK
        if codec_id > CompressionType.ZSTD:
            raise UnsupportedCompressionError(
                self._where, f"unknown compression codec {codec_id}", position=self._position
            )
        return CompressionType(codec_id)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self._header[5] & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self._header[5] & TRANSACTIONAL_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self._header[5] & CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the log cleaner may drop this batch's tombstones (KIP-534); None until it set one."""
        if self._header[5] & DELETE_HORIZON_MASK:
            horizon: int = self._header[7]
            return horizon
        return None

    @property
    def last_offset_delta(self) -> int:
        delta: int = self._header[6]
        return delta

    @property
    def last_offset(self) -> int:
        """The offset of the last record (inclusive)."""
        return self.base_offset + self._header[6]

    @property
    def next_offset(self) -> int:
        """The offset after the last record (exclusive)."""
        return self.base_offset + self._header[6] + 1

    @property
    def first_timestamp_ms(self) -> int:
        ts: int = self._header[7]
        return ts

    @property
    def max_timestamp_ms(self) -> int:
        ts: int = self._header[8]
        return ts

    @property
    def producer_id(self) -> int:
        pid: int = self._header[9]
        return pid

    @property
    def producer_epoch(self) -> int:
        epoch: int = self._header[10]
        return epoch

    @property
    def base_sequence(self) -> int:
        seq: int = self._header[11]
        return seq

    @property
    def record_count(self) -> int:
        count: int = self._header[12]
        return count

    def compute_crc(self) -> int:
        """The CRC-32C of bytes [21, end): what the ``crc`` field must hold."""
        crc: int = crc32c.crc32c(self._buffer[ATTRIBUTES_OFFSET:])
        return crc

    # -- validation and records

    def validate(self) -> None:
        """Check magic, record count, codec and CRC; raise :class:`CorruptRecordError` naming the batch."""
        where, position = self._where, self._position
        offset = self.base_offset
        if self.magic != MAGIC:
            raise CorruptRecordError(
                where, f"expected magic {MAGIC} got {self.magic}", position=position, offset=offset
            )
        if self.record_count < 0:
            raise CorruptRecordError(
                where, f"negative record count {self.record_count}", position=position, offset=offset
            )
        if self._header[5] & COMPRESSION_MASK > CompressionType.ZSTD:
            raise UnsupportedCompressionError(
                where,
                f"unknown compression codec {self._header[5] & COMPRESSION_MASK}",
                position=position,
                offset=offset,
            )
        actual = self.compute_crc()
        if actual != self.crc:
            raise CorruptRecordError(
                where, f"expected CRC 0x{self.crc:08x} got 0x{actual:08x}", position=position, offset=offset
            )

    def records(
        self,
        *,
        from_offset: int = 0,
        until_offset: int = NO_OFFSET_LIMIT,
        body: bytes | memoryview | None = None,
    ) -> list[Record]:
        """The records whose offsets are in ``[from_offset, until_offset)``, decompressed when needed.
        Call :meth:`validate` first for untrusted bytes. ``body``: :meth:`body`, when the caller has it."""
        header = self._header
        log_append_ms = header[8] if header[5] & TIMESTAMP_TYPE_MASK else None
        data = self.records_data() if body is None else body
        return walk_records(
            data.tobytes() if type(data) is memoryview else data,
            header[12],
            self.base_offset,
            header[7],
            log_append_ms,
            self._where,
            self._position,
            from_offset=from_offset,
            until_offset=until_offset,
        )

    def body(self) -> bytes | memoryview:
        """The records' bytes: a view of the batch's buffer when uncompressed, else decompressed (as
        :meth:`records_data`, which copies a plain body)."""
        if not self._header[5] & COMPRESSION_MASK:
            return self._buffer[HEADER_SIZE:]
        return decompress(
            self.compression, self._buffer[HEADER_SIZE:], where=self._where, position=self._position
        )

    def values(
        self, from_offset: int = 0, *, body: bytes | memoryview | None = None, where: str | None = None
    ) -> tuple[Sequence[int], list[bytes | None]]:
        """Offsets and values of the records at ``from_offset`` or later (no per-record objects), read by the
        reader that fits: the columnar one from ``VECTORISED_MIN_RECORDS`` records when it vouches for them,
        else the values walk, which names what is wrong (:class:`CorruptRecordError`, naming ``where``,
        default the batch's). ``body``: :meth:`body`, when the caller has it already."""
        data = self.body() if body is None else body
        header = self._header
        count: int = header[12]
        base_offset = self.base_offset
        if count >= VECTORISED_MIN_RECORDS:
            found = decode_values_vectorised([data], [count], [base_offset], [from_offset])
            if found is not None:
                return found[0]
        if type(data) is memoryview:
            data = data.tobytes()  # slicing bytes is cheaper than slicing a view, per record
        return walk_values(
            data,
            count,
            base_offset,
            from_offset,
            self._where if where is None else where,
            None if where is not None else self._position,
        )

    @staticmethod
    def load_columns() -> bool:
        """Import numpy, which the columnar readers need, now rather than in the middle of the first read
        (50-100 ms, once per process: :func:`~broker.record.value_columns.load_decoder`); False without
        numpy (the walks then read every batch)."""
        return load_decoder()

    @staticmethod
    def values_of(
        batches: Sequence[RecordBatch],
        from_offsets: Sequence[int],
        *,
        bodies: Sequence[bytes | memoryview] | None = None,
    ) -> Sequence[tuple[Sequence[int], list[bytes | None]]]:
        """``[batch.values(start) for batch, start in zip(batches, from_offsets)]`` (a consumer's fetch, of
        any partitions), read together by the columnar reader from ``VECTORISED_MIN_RECORDS`` records
        between them when it vouches for them all, else batch by batch (:meth:`values`: the first batch
        that does not decode raises). ``bodies``: the batches' :meth:`body`, when the caller has them."""
        data = [batch.body() for batch in batches] if bodies is None else bodies
        counts = [batch._header[12] for batch in batches]
        if sum(counts) >= VECTORISED_MIN_RECORDS:
            base_offsets = [batch.base_offset for batch in batches]
            found = decode_values_vectorised(data, counts, base_offsets, from_offsets)
            if found is not None:
                return found
        return [
            batch.values(start, body=body)
            for batch, start, body in zip(batches, from_offsets, data, strict=True)
        ]

    def stamped_prefix(self, base_offset: int, leader_epoch: int) -> bytes:
        """The batch's first 16 bytes with ``base_offset`` and ``leader_epoch`` (its ``batchLength`` kept):
        what a writer puts in front of ``buffer[16:]`` (the CRC covers neither field)."""
        return _OFFSET_LENGTH_EPOCH.pack(base_offset, self._header[1], leader_epoch)

    def with_log_append_time(self, now_ms: int) -> RecordBatch:
        """A copy of the batch stamped as Kafka's ``LogAppendTime`` stamps it: the timestamp-type bit set,
        ``maxTimestamp`` set to ``now_ms`` (every record reads it), the CRC recomputed; the records and
        ``baseTimestamp`` unchanged."""
        buffer = bytearray(self._buffer)
        buffer[ATTRIBUTES_OFFSET + 1] |= TIMESTAMP_TYPE_MASK  # attributes is an int16: its low byte
        _INT64.pack_into(buffer, MAX_TIMESTAMP_OFFSET, now_ms)
        restamp_crc(buffer)
        return RecordBatch(buffer, where=self._where, position=self._position)

    def records_data(self) -> bytes:
        """The records' bytes, decompressed when needed (:class:`CorruptRecordError` when they do not
        decompress, :class:`UnsupportedCompressionError` for an unknown codec)."""
        codec = self._header[5] & COMPRESSION_MASK
        if codec == CompressionType.NONE:
            return bytes(self._buffer[HEADER_SIZE:])
        body = self._buffer[HEADER_SIZE:]
        return decompress(self.compression, body, where=self._where, position=self._position)

    def validate_records(self) -> None:
        """Walk (and decompress) every record without building them, checking its framing.

        The same walker as :meth:`records` (:func:`~broker.record.record_walker.walk_records`), stricter:
        every varint, length and header must fit its record and each record's length must be exactly what
        its fields take (:class:`CorruptRecordError`); the records must be exactly ``recordCount``, fill
        the (decompressed) data exactly and carry offset deltas 0, 1, 2, ... (:class:`InvalidRecordError`).
        Records of one layout are proved by :func:`~broker.record.layout_check.records_of_one_layout`
        instead, which declines everything else to the walk. Check the header and CRC first
        (:meth:`validate`): this reads only the records.
        """
        header = self._header
        data = self.records_data()
        count: int = header[12]
        if count > 1 and records_of_one_layout(data, count, self._where, self._position):
            return
        walk_records(data, count, header[0], header[7], None, self._where, self._position, decode=False)

    # -- the batches of one request: they choose the reader

    @staticmethod
    def records_validator(batches: Sequence[RecordBatch]) -> Callable[[RecordBatch], None]:
        """What checks the records of each of ``batches`` (one request's), chosen by the batches: nothing
        more when they are proved valid together (a pipelining producer's run of uncompressed one-record
        batches of one size: :func:`~broker.record.layout_check.one_record_batches_valid`), else
        :meth:`validate_records`, batch by batch. Call it on each batch in order, after the batch's other
        checks, so that the first failure is the one raised."""
        if len(batches) > 1 and one_record_batches_valid(batches):  # a request of one batch: one call less
            return _proved
        return RecordBatch.validate_records

    @staticmethod
    def first_keyless_record(
        batches: Sequence[RecordBatch], *, load_columns: Callable[[], object] | None = None
    ) -> tuple[RecordBatch, int, Record] | None:
        """The first record of ``batches`` without a key, with its batch and its index there; None when
        every record has one. Read by the reader that fits: the key columns
        (:func:`~broker.record.key_columns.batch_key_columns`: one compiled loop over the batches, no
        record decoded) from :data:`KEY_COLUMNS_MIN_RECORDS` records once the loop is loaded
        (:func:`broker.compiled.loaded`), else the walk, which also names the record the columns find or
        decline. ``load_columns``: called instead when the batches hold that many records and the loop is
        not loaded yet (the caller starts its load in the background: a request never waits for numba's
        import and compile)."""
        if sum(batch._header[12] for batch in batches) >= KEY_COLUMNS_MIN_RECORDS:
            if compiled.loaded():
                columns = batch_key_columns(batches)
                if columns is not None and (len(columns.key_lengths) == 0 or columns.key_lengths.min() >= 0):
                    return None
            elif load_columns is not None:
                load_columns()
        for batch in batches:
            for index, record in enumerate(batch.records()):
                if record.key is None:
                    return batch, index, record
        return None

    @staticmethod
    def key_columns(batches: Sequence[RecordBatch], *, keys_only: bool = False) -> KeyColumns:
        """Where every record of ``batches`` lies, with its offset, timestamp delta, key and whether its
        value is null (:class:`~broker.record.key_columns.KeyColumns`, positions into the batches' bodies,
        decompressed, end to end; a control batch counts no records), read by the reader the batches
        choose: the compiled loop (:func:`~broker.record.key_columns.key_columns`), else the walk
        (:func:`~broker.record.key_columns.walked_key_columns_in`: the same columns, or the walk's error
        naming the record). ``keys_only``: keys and offsets (the timestamp deltas 0, no value null). Needs
        numpy (the broker's storage reads this way)."""
        bodies = [b"" if batch.is_control_batch else batch.body() for batch in batches]
        counts = [0 if batch.is_control_batch else batch._header[12] for batch in batches]
        base_offsets = [batch.base_offset for batch in batches]
        columns = key_columns(bodies, counts, base_offsets, keys_only=keys_only) if batches else None
        if columns is not None:
            return columns
        ends = list(accumulate((len(body) for body in bodies), initial=0))
        return walked_key_columns_in(
            b"".join(bodies),
            ends[:-1],
            ends[1:],
            counts,
            base_offsets,
            [(batch._where, batch._position) for batch in batches],
            keys_only=keys_only,
        )

    @staticmethod
    def key_columns_of(
        data: bytearray | memoryview,
        headers: BatchHeaderColumns,
        *,
        keys_only: bool = False,
        where: str = "<buffer>",
        position: int = 0,
    ) -> KeyColumns:
        """:meth:`key_columns` of the whole batches lying in ``data`` where ``headers`` say (a read of a
        segment at byte ``position`` of ``where``: the log cleaner's chunks). Uncompressed data batches
        only are read where they lie, between their headers (positions into ``data``, no copy); batches
        of other kinds among them make it :meth:`key_columns` of views of the batches."""
        body_starts = headers.positions + HEADER_SIZE
        if (headers.attributes & (COMPRESSION_MASK | CONTROL_MASK)).any():
            return RecordBatch.key_columns(
                [
                    RecordBatch(data[at : at + size], where=where, position=position + at)
                    for at, size in zip(headers.positions.tolist(), headers.sizes.tolist(), strict=True)
                ],
                keys_only=keys_only,
            )
        body_ends = headers.positions + headers.sizes
        columns = key_columns_in(
            data, body_starts, body_ends, headers.record_counts, headers.base_offsets, keys_only=keys_only
        )
        if columns is not None:
            return columns
        return walked_key_columns_in(
            data,
            body_starts,
            body_ends,
            headers.record_counts,
            headers.base_offsets,
            [(where, position + at) for at in headers.positions.tolist()],
            keys_only=keys_only,
        )

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records={self.record_count}, size_bytes={self.size_bytes}, codec={self._header[5] & 7}, "
            f"max_timestamp_ms={self.max_timestamp_ms})"
        )


def _proved(batch: RecordBatch) -> None:
    """The check of records already proved valid with their request's other batches: nothing more."""


def set_base_offset(buffer: bytearray | memoryview, base_offset: int, position: int = 0) -> None:
    """Rewrite the base offset of the batch at ``position`` in place (the CRC does not cover it)."""
    _INT64.pack_into(buffer, position, base_offset)


def set_producer_fields(
    buffer: bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    position: int = 0,
) -> None:
    """Rewrite the producer id, epoch and base sequence of the batch at ``position`` in place; the CRC covers
    them: :func:`restamp_crc` after."""
    _PRODUCER_FIELDS.pack_into(
        buffer, position + PRODUCER_FIELDS_OFFSET, producer_id, producer_epoch, base_sequence
    )


def restamp_crc(buffer: bytearray | memoryview, position: int = 0, end: int | None = None) -> None:
    """Recompute the CRC-32C of the batch at ``position`` (ending at ``end``, default the buffer's end) over
    its bytes now, and write it: after an in-place change of bytes the CRC covers."""
    view = memoryview(buffer)
    _CRC.pack_into(
        buffer,
        position + CRC_OFFSET,
        crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : len(view) if end is None else end]),
    )
