"""Load job benchmark: the Spark load (local[2]) against a one-process baseline of the same ranges.

Run from the repository root::

    .venv/bin/python bench/load_job.py                      # 5,000,000 records (about 6 minutes)
    .venv/bin/python bench/load_job.py --records 200000     # a quick run

What it does, all on 127.0.0.1 in one run:

1. starts a real ZooKeeper, a real schema registry process and a real broker process, creates a topic of
   ``--partitions`` partitions and produces ``--records`` page views (Avro, ``page_view_v2``, about 200 bytes
   with the 5-byte framing; 10,000 distinct payloads cycled) over three hours of record timestamps, each
   with a ``host`` header;
2. **baseline** (this process, one core): the same ranges read with the same client (a consumer per
   partition, CRC-checked fetches, :func:`pipeline.record_columns.batch_columns`), decoded with fastavro
   (:class:`pipeline.source.ChunkDecoder`), turned into the same Arrow columns and written with
   ``pyarrow.parquet`` to one file per (partition, hour): everything the load does per record, without
   Spark, staging, counting or committing;
3. **load**: :func:`pipeline.load_job.run_load` on a ``local[2]`` SparkSession (started before the clock
   starts): plan, read in Spark tasks, stage, count back, commit (manifest and moves), into a fresh
   warehouse; its committed row count must equal ``--records``.

It prints records/s of both and the ratio load / baseline; the target (issue 7) is >= 1.0, and the script
exits 1 below it. ``--profile`` also prints where the baseline's time goes (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import pyarrow as pa
import pyarrow.parquet as pq
from fastavro import parse_schema, schemaless_writer

from broker.client.consumer import Consumer
from broker.client.consumer_config import ConsumerConfig
from broker.client.producer import Producer
from broker.client.producer_config import ProducerConfig
from broker.log.topic_partition import TopicPartition
from pipeline import avro_arrow
from pipeline.config import config_from_mapping
from pipeline.dev.process import free_port
from pipeline.dev.zookeeper_server import ZooKeeperServer
from pipeline.load_job import run_load
from pipeline.record_columns import RecordColumns, batch_columns
from pipeline.source import ChunkDecoder
from schemas.client import SchemaRegistryClient
from schemas.registry.avro_schema import AvroSchema
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import BrokerCluster
from tests.support.registry import launch_registry
from tests.support.zookeeper import make_chroot

TARGET_RATIO = 1.0
TOPIC = "bench_page_view"
BASE_MS = 1_795_334_400_000  # 2026-11-22T08:00:00Z
SPAN_MS = 3 * 3_600_000
DISTINCT = 10_000
HOUR_MS = 3_600_000


def payloads(schema_id: int, count: int) -> list[bytes]:
    parsed = parse_schema(json.loads(shipped_schema_text("page_view_v2")))
    out = []
    for n in range(count):
        record = {
            "event_id": f"{n:032x}",
            "timestamp_ms": BASE_MS + n,
            "host": f"web-{n % 40}.prod.example.org",
            "member_id": None if n % 7 == 0 else 10_000_000 + n,
            "session_id": f"{n * 7919:024x}",
            "page_key": ("profile_view", "feed", "job_search", "company_page")[n % 4],
            "page_url": f"https://www.example.org/in/member-{n % 100_000}/details",
            "referrer_url": None if n % 3 else f"https://www.example.org/feed/{n % 1000}",
            "user_agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0)",
            "ip_address": f"10.{n % 256}.{n // 256 % 256}.{n % 97}",
            "load_time_ms": None if n % 11 == 0 else n % 3000,
        }
        stream = io.BytesIO()
        stream.write(b"\x00" + schema_id.to_bytes(4, "big"))
        schemaless_writer(stream, parsed, record)
        out.append(stream.getvalue())
    return out


def produce(servers: list[str], schema_id: int, records: int, partitions: int) -> None:
    values = payloads(schema_id, DISTINCT)
    producer = Producer(
        ProducerConfig(
            bootstrap_servers=servers,
            linger_ms=20,
            batch_size=1024 * 1024,
            acks="1",
            enable_idempotence=False,
            host_name="bench",
        )
    )
    chunk = 5000
    sent = 0
    started = time.monotonic()
    try:
        while sent < records:
            count = min(chunk, records - sent)
            start = sent % DISTINCT
            batch = (
                (values[start:] + values)[:count]
                if start + count > DISTINCT
                else values[start : start + count]
            )
            ts = BASE_MS + sent * SPAN_MS // records
            producer.send_many(TOPIC, batch, partition=(sent // chunk) % partitions, timestamp_ms=ts)
            sent += count
        producer.flush()
    finally:
        producer.close()
    elapsed = time.monotonic() - started
    print(f"produced {records:,} records in {elapsed:.1f} s ({records / elapsed:,.0f} records/s)")


def baseline(servers: list[str], registry_url: str, ends: dict[int, int], out_dir: Path) -> int:
    """Fetch + fastavro decode + pyarrow Parquet write of [0, end) of every partition, in this process."""
    client = SchemaRegistryClient(registry_url)
    reader = AvroSchema.parse(client.get_latest(f"{TOPIC}-value").schema)
    decoder = ChunkDecoder(AvroSerde(client), reader)
    table_schema = avro_arrow.data_schema(avro_arrow.payload_schema(reader))
    payload = avro_arrow.payload_schema(reader)
    rows = 0
    config = ConsumerConfig(bootstrap_servers=servers, auto_offset_reset="none", fetch_max_wait_ms=100)
    for partition, end in sorted(ends.items()):
        tp = TopicPartition(TOPIC, partition)
        by_hour: dict[int, list[pa.RecordBatch]] = defaultdict(list)
        with Consumer(config, partitions=[tp]) as consumer:
            consumer.seek(tp, 0)
            position = 0
            while position < end:
                for fetched in consumer.poll_batches(timeout_ms=500):
                    columns: RecordColumns = batch_columns(fetched, end)
                    position += len(columns)
                    decoded = decoder.decode(columns.values)
                    records = [record for record, _ in decoded]
                    arrays = [
                        *avro_arrow.columns(records, payload),
                        pa.array([TOPIC] * len(records), pa.string()),
                        pa.array([partition] * len(records), pa.int32()),
                        pa.array(columns.offsets, pa.int64()),
                        pa.array(columns.timestamps_ms, pa.int64()),
                        pa.array([int.from_bytes(v[1:5], "big") for v in columns.values], pa.int32()),  # type: ignore[index]
                        pa.array([h.decode() if h else None for h in columns.hosts], pa.string()),
                    ]
                    batch = pa.RecordBatch.from_arrays(arrays, schema=table_schema)
                    hour = columns.timestamps_ms[0] // HOUR_MS
                    by_hour[hour].append(batch)
                    rows += batch.num_rows
                    if position >= end:
                        break
        for hour, batches in by_hour.items():
            path = out_dir / f"p{partition}" / f"hr={hour}" / "part.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_batches(batches), path, compression="snappy")
    client.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one, deleted after)")
    parser.add_argument("--profile", action="store_true", help="profile the baseline (cProfile)")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)"
    )
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="lumber-bench-load-"))
    work.mkdir(parents=True, exist_ok=True)
    zookeeper = ZooKeeperServer(work / "zookeeper", free_port())
    zookeeper.start()
    stoppers: list[Any] = [zookeeper.stop]
    try:
        registry = launch_registry(zookeeper.connect, work / "registry")
        stoppers.append(registry.stop)
        cluster = BrokerCluster(make_chroot(zookeeper.connect, "bench"), work / "brokers")
        stoppers.append(cluster.stop)
        broker = cluster.add_broker()
        servers = [broker.address]
        cluster.create_topic(TOPIC, args.partitions)
        cluster.create_topic("_audit", 1)  # the load publishes its counts there; brokers create no topics
        schema_id = SchemaRegistryClient(registry.url).register(
            f"{TOPIC}-value", shipped_schema_text("page_view_v2")
        )
        produce(servers, schema_id, args.records, args.partitions)
        with Consumer(ConsumerConfig(bootstrap_servers=servers)) as consumer:
            deadline = time.monotonic() + 60  # acks=1: wait until the broker has flushed (exposed) it all
            while True:
                partitions = [TopicPartition(TOPIC, p) for p in range(args.partitions)]
                ends = {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
                if sum(ends.values()) == args.records or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        assert sum(ends.values()) == args.records, ends

        profiler = cProfile.Profile() if args.profile else None
        started = time.monotonic()
        if profiler:
            profiler.enable()
        base_rows = baseline(servers, registry.url, ends, work / "baseline")
        if profiler:
            profiler.disable()
        base_s = time.monotonic() - started
        assert base_rows == args.records, base_rows

        from pyspark.sql import SparkSession  # noqa: PLC0415 - started after the baseline, on purpose

        builder = (
            SparkSession.builder.master("local[2]")
            .appName("lumber-bench-load")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.local.dir", str(work / "spark-local"))
        )
        for entry in args.spark_conf:
            key, _, value = entry.partition("=")
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        stoppers.append(spark.stop)
        config = config_from_mapping(
            {
                "zookeeper": {"connect": zookeeper.connect},
                "registry": {"url": registry.url},
                "load": {
                    "job": "bench",
                    "warehouse_url": str(work / "warehouse"),
                    "topics_allow": [TOPIC],
                    "bootstrap_servers": servers,
                },
            }
        )
        started = time.monotonic()
        outcome = run_load(spark, config, progress=lambda line: print(f"  load: {line}"))
        load_s = time.monotonic() - started
        assert outcome.record.rows == args.records, outcome.record

        base_rate = args.records / base_s
        load_rate = args.records / load_s
        ratio = load_rate / base_rate
        print()
        print(
            f"records: {args.records:,} in {args.partitions} partitions, "
            f"{len(outcome.plan.tasks) if outcome.plan else 0} Spark tasks"
        )
        print(f"{'':<44} {'seconds':>9} {'records/s':>12}")
        print(f"{'baseline (1 process: fetch+decode+write)':<44} {base_s:>9.1f} {base_rate:>12,.0f}")
        print(f"{'load job (local[2]: plan..commit)':<44} {load_s:>9.1f} {load_rate:>12,.0f}")
        print(f"ratio load / baseline: {ratio:.2f} (target >= {TARGET_RATIO})")
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        return 0 if ratio >= TARGET_RATIO else 1
    finally:
        for stopper in reversed(stoppers):
            try:
                stopper()
            except Exception as exc:
                print(f"cleanup: {exc}", file=sys.stderr)
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
