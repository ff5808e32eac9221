"""One attempt of a load task writes its own Parquet files and returns a summary of them.

A Spark task of the load (:mod:`pipeline.staging` schedules them) runs :func:`write_task`: it fetches its
offset range (:func:`pipeline.source.fetch_range`), decodes it once (:func:`pipeline.source.convert_chunks`)
and writes, with pyarrow, straight to the warehouse's filesystem (:mod:`pipeline.fs`), into the folder of
its own attempt::

    _lumber/<job>/staging/<run_id>/<topic>/task=<id>/attempt=<a>/
        data/dt=YYYY-MM-DD/hr=HH/part-00000.parquet       the rows, by event-time hour
        errors/dt=YYYY-MM-DD/hr=HH/part-00000.parquet     the quarantined records, by record-time hour

``<a>`` is ``<attempt number>.<Spark's task attempt id>``: a retry, or a speculative copy running at the same
time, writes into a folder of its own, so attempts never touch each other's files. Nothing but the summary
goes back to the driver: a :class:`TaskSummary` (a few hundred bytes of JSON) naming every file with its
bytes, rows and CRC-32 (computed from the bytes as they were written), and the rows and quarantined records
per audit window. The driver keeps exactly one successful attempt per task, the one whose result Spark
returned, and its manifest names only that attempt's files (:mod:`pipeline.commit`): the counts are those
of the code that wrote the files, never read back.

Parquet as readers want it (``[load]`` keys, :class:`ParquetSettings`): the output schema is that of the
Spark writer it replaces (:func:`pipeline.avro_arrow.data_schema` / ``ERROR_SCHEMA``: same columns and types;
timestamps as INT64 microseconds, UTC-adjusted), row groups of ``parquet_row_group_rows`` rows (batches are
buffered per hour until a row group is full), dictionary encoding and column statistics on,
``parquet_compression`` (zstd by default), and a new file once one reaches ``target_file_bytes``.

A failed attempt deletes its folder (best effort); a killed one leaves it, and it goes when the run's
staging folder is deleted (at the commit, or by the next run's recovery).
"""

from __future__ import annotations

import contextlib
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import avro_arrow
from pipeline.fs import FileSystem, join
from pipeline.json_value import JsonValue
from pipeline.load_config import HdfsClient
from pipeline.record_columns import RecordColumns
from pipeline.source import Converted, ReadTask, SourceSettings, convert_chunks, fetch_range
from schemas.avro_schema import AvroSchema

DATASETS = ("data", "errors")


@dataclass(frozen=True)
class ParquetSettings:
    """How tasks write Parquet (see the module docstring)."""

    compression: str = "zstd"
    row_group_rows: int = 250_000
    target_file_bytes: int = 128 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class WrittenFile(JsonValue):
    """A file an attempt wrote: ``path`` relative to the warehouse."""

    JSON_WHAT: ClassVar[str] = "written file"

    dataset: str
    dt: str
    hr: str
    path: str
    bytes: int
    rows: int
    crc32: int


@dataclass(frozen=True)
class TaskSummary(JsonValue):
    """What one successful attempt of a task wrote (the task's whole result, sent to the driver as
    :meth:`~pipeline.json_value.JsonValue.dumps` ``(indent=None)``)."""

    JSON_WHAT: ClassVar[str] = "task summary"

    task: int
    attempt: str
    folder: str
    rows: int
    quarantined: int
    #: (window_start_ms, rows, quarantined), by record timestamp
    windows: tuple[tuple[int, int, int], ...]
    files: tuple[WrittenFile, ...]
    seconds: float = 0.0
    cpu_seconds: float = 0.0


class _ChecksumSink:
    """A write-only file that counts and CRC-32s the bytes on their way to ``stream``."""

    def __init__(self, stream: IO[bytes] | pa.NativeFile) -> None:
        self._stream = stream
        self.bytes = 0
        self.crc32 = 0
        self.closed = False

    def write(self, data: Any) -> int:
        self.crc32 = zlib.crc32(data, self.crc32)
        self.bytes += len(data)
        self._stream.write(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True  # the stream itself is closed by FileSystem.open_output


@dataclass
class _HourFiles:
    """The open file and the buffered rows of one (dataset, dt, hr) of one attempt."""

    dataset: str
    dt: str
    hr: str
    buffered: list[pa.RecordBatch] = field(default_factory=list)
    buffered_rows: int = 0
    part: int = 0
    stack: contextlib.ExitStack | None = None
    writer: pq.ParquetWriter | None = None
    sink: _ChecksumSink | None = None
    path: str = ""
    rows: int = 0


class TaskOutput:
    """The files of one attempt: rows go in by hour, files come out at the target size (see the module
    docstring). Not thread-safe (one per attempt)."""

    def __init__(
        self,
        fs: FileSystem,
        folder: str,
        schemas: Mapping[str, pa.Schema],
        parquet: ParquetSettings,
    ) -> None:
        self._fs = fs
        self._folder = folder
        self._schemas = schemas
        self._parquet = parquet
        self._open: dict[tuple[str, str, str], _HourFiles] = {}
        self.files: list[WrittenFile] = []

    def add(self, dataset: str, batch: pa.RecordBatch, hours: list[tuple[str, str]]) -> None:
        """Rows of ``batch`` go to the files of their hour (``hours[i]`` is row ``i``'s)."""
        if not batch.num_rows:
            return
        first = hours[0]
        if hours.count(first) == len(hours):  # the common case: one hour per batch
            self._add(dataset, first, batch)
            return
        by_hour: dict[tuple[str, str], list[int]] = {}
        for index, label in enumerate(hours):
            by_hour.setdefault(label, []).append(index)
        for label, indices in by_hour.items():
            self._add(dataset, label, batch.take(pa.array(indices, pa.int32())))

    def _add(self, dataset: str, label: tuple[str, str], batch: pa.RecordBatch) -> None:
        key = (dataset, *label)
        hour = self._open.get(key)
        if hour is None:
            hour = self._open[key] = _HourFiles(dataset, *label)
        hour.buffered.append(batch)
        hour.buffered_rows += batch.num_rows
        size = self._parquet.row_group_rows
        while hour.buffered_rows >= size:
            table = pa.Table.from_batches(hour.buffered)
            self._write(hour, table.slice(0, size))
            rest = table.slice(size)
            hour.buffered = rest.to_batches() if rest.num_rows else []
            hour.buffered_rows = rest.num_rows

    def _write(self, hour: _HourFiles, table: pa.Table) -> None:
        if hour.writer is None:
            hour.path = (
                f"{self._folder}/{hour.dataset}/dt={hour.dt}/hr={hour.hr}/part-{hour.part:05d}.parquet"
            )
            hour.stack = contextlib.ExitStack()
            stream = hour.stack.enter_context(self._fs.open_output(join(self._fs.root, hour.path)))
            hour.sink = _ChecksumSink(stream)
            compression = self._parquet.compression
            hour.writer = pq.ParquetWriter(
                hour.sink,
                self._schemas[hour.dataset],
                compression=None if compression == "none" else compression,
                use_dictionary=True,
                write_statistics=True,
                coerce_timestamps="us",
                allow_truncated_timestamps=False,
            )
        hour.writer.write_table(table, row_group_size=table.num_rows)
        hour.rows += table.num_rows
        if hour.sink is not None and hour.sink.bytes >= self._parquet.target_file_bytes:
            self._close_file(hour)

    def _close_file(self, hour: _HourFiles) -> None:
        if hour.writer is None or hour.sink is None or hour.stack is None:
            return
        hour.writer.close()
        hour.stack.close()
        self.files.append(
            WrittenFile(
                hour.dataset, hour.dt, hour.hr, hour.path, hour.sink.bytes, hour.rows, hour.sink.crc32
            )
        )
        hour.writer = hour.sink = hour.stack = None
        hour.part += 1
        hour.rows = 0

    def close(self) -> list[WrittenFile]:
        """Write what is buffered, close every file; returns every file written, in order."""
        for hour in self._open.values():
            if hour.buffered_rows:
                self._write(hour, pa.Table.from_batches(hour.buffered))
                hour.buffered, hour.buffered_rows = [], 0
            self._close_file(hour)
        self._open.clear()
        return sorted(self.files, key=lambda f: f.path)

    def abort(self) -> None:
        """Close what is open without finishing it (the attempt failed)."""
        for hour in self._open.values():
            with contextlib.suppress(Exception):
                if hour.writer is not None:
                    hour.writer.close()
            with contextlib.suppress(Exception):
                if hour.stack is not None:
                    hour.stack.close()
        self._open.clear()


def write_task(
    task: ReadTask,
    settings: SourceSettings,
    fs: FileSystem,
    folder: str,
    *,
    attempt: str,
    attempt_number: int,
    window_ms: int,
    parquet: ParquetSettings,
    chunks: Iterable[RecordColumns] | None = None,
) -> TaskSummary:
    """Read ``task``'s range (or ``chunks``, when given) and write it below ``folder`` (relative to the
    warehouse ``fs`` is rooted at); returns the summary (see the module docstring)."""
    started, cpu_started = time.monotonic(), time.process_time()
    payload = avro_arrow.payload_schema(AvroSchema.parse(task.reader_schema))
    schemas = {"data": avro_arrow.data_schema(payload), "errors": avro_arrow.ERROR_SCHEMA}
    output = TaskOutput(fs, folder, schemas, parquet)
    source = chunks if chunks is not None else fetch_range(task.range, settings, task.task_id)
    rows: Counter[int] = Counter()
    quarantined: Counter[int] = Counter()
    try:
        for index, converted in enumerate(convert_chunks(task, settings, source)):
            _count(converted, window_ms, rows, quarantined)
            output.add("data", converted.data, converted.data_hours)
            output.add("errors", converted.errors, converted.error_hours)
            if index == 0:
                settings.faults.in_task(task.task_id, attempt_number)
        files = output.close()
    except BaseException:
        output.abort()
        with contextlib.suppress(Exception):
            fs.delete(join(fs.root, folder), recursive=True, missing_ok=True)
        raise
    windows = tuple(
        (start, rows.get(start, 0), quarantined.get(start, 0))
        for start in sorted(set(rows) | set(quarantined))
    )
    return TaskSummary(
        task.task_id,
        attempt,
        folder,
        sum(rows.values()),
        sum(quarantined.values()),
        windows,
        tuple(files),
        time.monotonic() - started,
        time.process_time() - cpu_started,
    )


def _count(converted: Converted, window_ms: int, rows: Counter[int], quarantined: Counter[int]) -> None:
    for timestamps, counter in (
        (converted.data_timestamps_ms, rows),
        (converted.error_timestamps_ms, quarantined),
    ):
        if not timestamps:
            continue
        low = min(timestamps) // window_ms
        if max(timestamps) // window_ms == low:  # the common case, at C speed
            counter[low * window_ms] += len(timestamps)
        else:
            counter.update(ts // window_ms * window_ms for ts in timestamps)


def spark_task(
    settings: SourceSettings,
    warehouse_url: str,
    webhdfs_url: str,
    hdfs_client: HdfsClient,
    staging: str,
    window_ms: int,
    parquet: ParquetSettings,
) -> Any:
    """The function for ``RDD.mapPartitions`` over an RDD of :meth:`ReadTask.dumps` texts, one per Spark
    partition: yields each task's :meth:`TaskSummary.dumps`. ``staging`` is the run's staging folder,
    relative to the warehouse."""

    def run(texts: Iterator[str]) -> Iterator[str]:
        from pyspark import TaskContext  # noqa: PLC0415 - executors only

        from pipeline.fs import open_filesystem  # noqa: PLC0415

        context = TaskContext.get()
        number = context.attemptNumber() if context is not None else 0
        attempt = f"{number}.{context.taskAttemptId() if context is not None else 0}"
        fs = open_filesystem(warehouse_url, webhdfs_url=webhdfs_url, hdfs_client=hdfs_client)
        for text in texts:
            task = ReadTask.loads(text, "the task's description")
            folder = f"{staging}/{task.range.topic}/task={task.task_id}/attempt={attempt}"
            summary = write_task(
                task,
                settings,
                fs,
                folder,
                attempt=attempt,
                attempt_number=number,
                window_ms=window_ms,
                parquet=parquet,
            )
            yield summary.dumps(indent=None)

    return run
