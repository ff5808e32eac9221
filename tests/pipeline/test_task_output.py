"""A load task writing its own Parquet (real registry, real files): its counts are its files' contents, the
Parquet is as configured, and of two attempts of one task running at once only one is published."""

from __future__ import annotations

import threading
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.record.topic_partition import TopicPartition
from pipeline import avro_arrow
from pipeline.commit import CommitProtocol
from pipeline.fs import FileSystem, open_filesystem
from pipeline.load_errors import ReadError
from pipeline.load_plan import LoadPlan
from pipeline.manifest import Manifest
from pipeline.ranges import OffsetRange
from pipeline.record_columns import RecordColumns
from pipeline.source import ReadTask, SourceSettings
from pipeline.staging import choose_attempts, range_results, staged_files, window_counts
from pipeline.task_output import ParquetSettings, TaskSummary, write_task
from schemas.avro_schema import AvroSchema
from schemas.client import SchemaRegistryClient
from schemas.registry.config import RegistryConfig
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.load_job import unique_topic
from tests.support.registry import RegistryProcess

HOUR_9 = 1_795_338_000_000  # 2026-11-22T09:00:00Z
WINDOW_MS = 600_000
RECORDS = 3000
BAD = {17, 1234, 2999}  # offsets of undecodable records
STEP_MS = 3 * 3_600_000 // RECORDS  # three hours of record timestamps


def view(n: int, ts: int) -> dict[str, Any]:
    return {
        "event_id": f"e{n}",
        "timestamp_ms": ts,
        "host": f"web{n % 3}",
        "member_id": None if n % 2 else n,
        "session_id": f"s{n % 50}",
        "page_key": ("feed", "profile_view")[n % 2],
        "page_url": f"/p/{n % 100}",
        "referrer_url": None,
        "user_agent": "ua",
        "ip_address": "10.0.0.1",
        "load_time_ms": n,
    }


@pytest.fixture
def records(load_registry: RegistryProcess) -> Any:
    topic = unique_topic("pv")
    client = SchemaRegistryClient(load_registry.url)
    schema_id = client.register(f"{topic}-value", shipped_schema_text("page_view_v2"))
    latest = client.get_latest(f"{topic}-value")
    serde = AvroSerde(client)
    out = []
    for offset in range(RECORDS):
        ts = HOUR_9 + offset * STEP_MS
        value = b"\x00\x00" if offset in BAD else serde.encode(schema_id, view(offset, ts))
        out.append(ConsumerRecord(topic, 2, offset, ts, b"k", value, (("host", b"h1"),)))
    task = ReadTask(7, OffsetRange(topic, 2, 0, RECORDS), latest.schema, latest.schema_id)
    yield task, out
    client.close()


def chunks(records: list[ConsumerRecord]) -> list[RecordColumns]:
    return [RecordColumns.from_records(records[i : i + 700]) for i in range(0, len(records), 700)]


def run_attempt(
    task: ReadTask,
    records: list[ConsumerRecord],
    fs: FileSystem,
    url: str,
    attempt: str,
    parquet: ParquetSettings,
) -> TaskSummary:
    return write_task(
        task,
        SourceSettings(registry=RegistryConfig(url=url), arrow_batch_records=250),
        fs,
        f"_lumber/j/staging/r1/{task.range.topic}/task={task.task_id}/attempt={attempt}",
        attempt=attempt,
        attempt_number=int(attempt.split(".", maxsplit=1)[0]),
        window_ms=WINDOW_MS,
        parquet=parquet,
        chunks=chunks(records),
    )


def test_counts_are_the_files_contents_and_the_parquet_is_as_configured(
    records: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    task, produced = records
    fs = open_filesystem(str(tmp_path))
    parquet = ParquetSettings(compression="zstd", row_group_rows=400, target_file_bytes=12_000)
    summary = run_attempt(task, produced, fs, load_registry.url, "0.11", parquet)
    assert (summary.rows, summary.quarantined) == (RECORDS - len(BAD), len(BAD))

    payload = avro_arrow.payload_schema(AvroSchema.parse(task.reader_schema))
    expected_schema = {"data": avro_arrow.data_schema(payload), "errors": avro_arrow.ERROR_SCHEMA}
    by_dataset: Counter[str] = Counter()
    for written in summary.files:
        path = tmp_path / written.path
        data = path.read_bytes()
        assert (len(data), zlib.crc32(data)) == (written.bytes, written.crc32), written.path
        meta = pq.ParquetFile(path).metadata
        assert meta.num_rows == written.rows
        assert pq.read_schema(path).remove_metadata() == expected_schema[written.dataset]
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        assert all(g.num_rows <= 400 for g in groups)
        assert all(g.num_rows == 400 for g in groups[:-1])
        for group in groups:
            for c in range(group.num_columns):
                column = group.column(c)
                assert column.compression == "ZSTD"
                assert column.is_stats_set, (written.path, column.path_in_schema)
        page_key = (
            next(
                groups[0].column(c)
                for c in range(groups[0].num_columns)
                if groups[0].column(c).path_in_schema == "page_key"
            )
            if written.dataset == "data"
            else None
        )
        if page_key is not None:
            assert "RLE_DICTIONARY" in page_key.encodings
        by_dataset[written.dataset] += written.rows
        # each file holds only its hour (data: event time = record time here)
        table = pq.read_table(path)
        hours = {
            (ts // 3_600_000 * 3_600_000 - HOUR_9) // 3_600_000 + 9
            for ts in table.column("_timestamp").to_pylist()
        }
        assert hours == {int(written.hr)}, written.path
    assert by_dataset == {"data": RECORDS - len(BAD), "errors": len(BAD)}
    # three hours of data, files rolled at the target size: several parts per hour
    data_files = [f for f in summary.files if f.dataset == "data"]
    assert {f.hr for f in data_files} == {"09", "10", "11"}
    assert len(data_files) > 3
    assert all(f.path.rsplit("/", 1)[-1].startswith("part-0000") for f in data_files)

    # the audit windows in the summary are what DuckDB counts in the files
    folder = tmp_path / summary.folder
    counted: dict[int, list[int]] = {}
    for dataset, column in (("data", 1), ("errors", 2)):
        query = (
            f"SELECT _timestamp // {WINDOW_MS} * {WINDOW_MS} AS w, count(*) FROM "
            f"read_parquet('{folder}/{dataset}/*/*/*.parquet') GROUP BY w"
        )
        for window, count in duckdb.connect().execute(query).fetchall():
            counted.setdefault(window, [window, 0, 0])[column] = count
    assert sorted(tuple(v) for v in counted.values()) == list(summary.windows)
    offsets = (
        duckdb.connect()
        .execute(f"SELECT list(_offset ORDER BY _offset) FROM read_parquet('{folder}/errors/*/*/*.parquet')")
        .fetchone()
    )
    assert offsets is not None
    assert offsets[0] == sorted(BAD)


def test_a_failed_attempt_removes_its_folder(
    records: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    task, produced = records
    fs = open_filesystem(str(tmp_path))
    with pytest.raises(ReadError, match=f"expected {RECORDS}"):
        run_attempt(task, produced[:-1], fs, load_registry.url, "0.1", ParquetSettings(row_group_rows=100))
    assert not (
        tmp_path / "_lumber" / "j" / "staging" / "r1" / task.range.topic / "task=7" / "attempt=0.1"
    ).exists()


def test_two_attempts_of_one_task_at_once_publish_one_attempts_files(
    records: Any, load_registry: RegistryProcess, tmp_path: Path
) -> None:
    """Speculation: two attempts of the same task write at the same time; the driver keeps one summary per
    task and the commit publishes exactly that attempt's files (the other's go with the staging folder)."""
    task, produced = records
    fs = open_filesystem(str(tmp_path / "warehouse"))
    parquet = ParquetSettings(row_group_rows=500, target_file_bytes=30_000)
    start = threading.Barrier(2)
    summaries: dict[str, TaskSummary] = {}
    failures: list[BaseException] = []

    def attempt(name: str) -> None:
        try:
            start.wait(10)
            summaries[name] = run_attempt(task, produced, fs, load_registry.url, name, parquet)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=attempt, args=(name,)) for name in ("0.21", "1.22")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    first, second = summaries["0.21"], summaries["1.22"]
    assert first.files
    assert [f.rows for f in first.files] == [f.rows for f in second.files]
    assert not {f.path for f in first.files} & {f.path for f in second.files}

    tp = TopicPartition(task.range.topic, task.range.partition)
    plan = LoadPlan("j", "r1", 0, 0, None, (), {}, {tp: RECORDS}, (task.range,), (), (task,), {})
    chosen = choose_attempts(plan, [second, first])  # the one Spark returned first wins
    assert chosen == {task.task_id: second}
    protocol = CommitProtocol(fs, "j")
    protocol.persist_plan("r1", {"run_id": "r1", "base_sequence": 0})
    files = protocol.name_files("r1", staged_files(plan, chosen))
    manifest = Manifest(
        job="j",
        sequence=1,
        run_id="r1",
        committed_at_ms=0,
        window_ms=WINDOW_MS,
        offsets={tp: RECORDS},
        ranges=range_results(plan, chosen),
        counts=window_counts(plan, chosen),
        files=tuple(files),
        staging=protocol.layout.staging_rel("r1"),
    )
    protocol.commit(manifest)
    warehouse = tmp_path / "warehouse"
    published = sorted(p for p in warehouse.rglob("*.parquet") if "_lumber" not in p.parts)
    assert len(published) == len(second.files)
    assert sorted(zlib.crc32(p.read_bytes()) for p in published) == sorted(f.crc32 for f in second.files)
    assert not (warehouse / "_lumber" / "j" / "staging").exists() or not any(
        (warehouse / "_lumber" / "j" / "staging").iterdir()
    )
    rows = (
        duckdb.connect()
        .execute(
            "SELECT count(*), count(DISTINCT _offset) FROM "
            f"read_parquet('{warehouse}/{task.range.topic}/*/*/*.parquet')"
        )
        .fetchone()
    )
    assert rows == (RECORDS - len(BAD), RECORDS - len(BAD))
    assert (manifest.rows, manifest.quarantined) == (RECORDS - len(BAD), len(BAD))


def test_a_task_that_did_not_account_for_its_range_is_refused(records: Any) -> None:
    task, _ = records
    tp = TopicPartition(task.range.topic, task.range.partition)
    plan = LoadPlan("j", "r1", 0, 0, None, (), {}, {tp: RECORDS}, (task.range,), (), (task,), {})
    short = TaskSummary(task.task_id, "0.1", "f", RECORDS - 1, 0, (), ())
    with pytest.raises(
        ReadError, match=rf"2999 rows \+ 0 quarantined = 2999, in files of 0 rows, expected {RECORDS}"
    ):
        choose_attempts(plan, [short])
    with pytest.raises(ReadError, match="no attempt reported"):
        choose_attempts(plan, [])
    with pytest.raises(ReadError, match="task 99, which run r1's plan does not have"):
        choose_attempts(plan, [TaskSummary(99, "0.1", "f", 0, 0, (), ())])
    assert TaskSummary.from_json(short.to_json()) == short
