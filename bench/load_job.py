"""Load job benchmark: the Spark load (local[2]) against a one-process baseline of the same ranges.

Run from the repository root::

    .venv/bin/python bench/load_job.py                      # 5,000,000 records (several minutes)
    .venv/bin/python bench/load_job.py --records 1000000    # what a shared machine affords
    .venv/bin/python bench/load_job.py --records 200000 --scaling --demo   # + local[1] and spark-submit

What it does, all on 127.0.0.1 in one run:

1. starts a real ZooKeeper, a real schema registry process and a real broker process, creates a topic of
   ``--partitions`` partitions and produces ``--records`` page views (Avro, ``page_view_v2``, about 200 bytes
   with the 5-byte framing; 10,000 distinct payloads cycled) over three hours of record timestamps, each
   with a ``host`` header;
2. **baseline** (this process, one core): the same ranges read with the same client (a consumer per
   partition, CRC-checked fetches, :func:`pipeline.record_columns.batch_columns`), decoded with fastavro
   (:class:`pipeline.source.ChunkDecoder`), turned into the same Arrow columns and written with
   ``pyarrow.parquet`` (the load's codec) to one file per (partition, hour): everything the load does per
   record, without Spark, planning or committing;
3. **load**: :func:`pipeline.load_job.run_load` on a ``local[2]`` SparkSession (started before the clock
   starts): plan, Spark tasks that fetch, decode and write their own Parquet, manifest commit, moves, into
   a fresh warehouse; its committed row count must equal ``--records``. Also measured: CPU seconds per
   million records of the Spark JVM, of its Python workers and of the driver's Python (``/proc``), and the
   Parquet bytes per record against Spark's own writer (the same rows rewritten by
   ``DataFrame.write.parquet``, snappy: the writer the load used before);
4. ``--scaling``: the same load on ``local[1]`` (a new session, a fresh warehouse); ``--standalone``: on a
   Spark standalone cluster of its own (a master and one 2-core worker,
   :mod:`tests.support.spark_standalone`), the code shipped to the executors as ``spark-submit`` ships it;
5. ``--warehouse hdfs`` (a NameNode and a DataNode of its own, :mod:`lumber.dev.hdfs_server`, in the work
   folder) or ``--warehouse hdfs://nn:port/path``: the same load again, right after the ``file:`` one and
   on the same session, into HDFS (the tasks write through hdfs-native); its rate against ``file:``'s (goal
   >= 0.8) and the baseline's (goal >= 1.5);
6. ``--demo``: a one-hour load of the demo's size (``--demo-records``, 6,000) through ``spark-submit
   jobs/load.py``, split into spark-submit + JVM start (until the job's first line), Spark session start,
   and the run itself (lock to committed), from the job's progress lines.

It prints records/s of both and the ratio load / baseline; the target (issue 22) is >= 1.5, and the script
exits 1 below it. ``--profile`` also prints where the baseline's and the task code's time goes (cProfile,
wall clock).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
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

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.config import config_from_mapping, dump_config
from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from pipeline import avro_arrow
from pipeline.faults import Faults
from pipeline.fs import open_filesystem
from pipeline.load_job import parquet_settings, run_load, source_settings
from pipeline.ranges import OffsetRange
from pipeline.record_columns import RecordColumns, batch_columns
from pipeline.source import ChunkDecoder, ReadTask
from pipeline.spark_submit import build_code_zip, spark_submit_command, submit_environment
from pipeline.task_output import write_task
from schemas.avro_schema import AvroSchema
from schemas.client import RegistryClientSettings, SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text
from tests.support.broker_cluster import BrokerCluster
from tests.support.registry import launch_registry
from tests.support.spark_standalone import spark_standalone
from tests.support.zookeeper import make_chroot

TARGET_RATIO = 1.5
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


def baseline(
    servers: list[str],
    registry: RegistryClientSettings,
    ends: dict[int, int],
    out_dir: Path,
    compression: str,
) -> int:
    """Fetch + fastavro decode + pyarrow Parquet write of [0, end) of every partition, in this process."""
    client = SchemaRegistryClient.from_config(registry)
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
            pq.write_table(pa.Table.from_batches(batches), path, compression=compression)
    client.close()
    return rows


def task_path(config: Any, ends: dict[int, int], schema: Any, out: Path) -> int:
    """The load's own task code (:func:`pipeline.task_output.write_task`: fetch, decode once, write Parquet)
    run in this process over every partition, one after the other: the load's per-record cost without
    Spark."""
    settings = source_settings(config, Faults())
    fs = open_filesystem(str(out))
    rows = 0
    for partition, end in sorted(ends.items()):
        task = ReadTask(partition, OffsetRange(TOPIC, partition, 0, end), schema.schema, schema.schema_id)
        summary = write_task(
            task,
            settings,
            fs,
            f"p{partition}",
            attempt="0.0",
            attempt_number=0,
            window_ms=config.load.window_ms,
            parquet=parquet_settings(config.load),
        )
        rows += summary.rows
    return rows


def tree_cpu_s(root: int) -> tuple[float, float]:
    """CPU seconds (user + system) of process ``root`` itself, and of all its descendants (with the
    children they reaped), from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    own: dict[int, float] = {}
    reaped: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        own[pid] = (int(fields[11]) + int(fields[12])) / ticks
        reaped[pid] = (int(fields[13]) + int(fields[14])) / ticks
    below: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        below += children
        frontier += children
    return own.get(root, 0.0), sum(own[p] + reaped[p] for p in below)


def spark_session(master: str, work: Path, spark_conf: list[str]) -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415 - started after the baseline, on purpose

    builder = (
        SparkSession.builder.master(master)
        .appName("lumber-bench-load")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "spark-local"))
    )
    for entry in spark_conf:
        key, _, value = entry.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def load_config(
    zk: str, registry_url: str, servers: list[str], job: str, warehouse: Path | str, topic: str
) -> Any:
    return config_from_mapping(
        {
            "zookeeper": {"connect": zk},
            "registry": {"url": registry_url},
            "load": {
                "job": job,
                "warehouse_url": str(warehouse),
                "topics_allow": [topic],
                "bootstrap_servers": servers,
            },
        }
    )


def parquet_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.parquet"))


def timed_load(
    spark: Any, config: Any, records: int, executors_pid: int | None = None
) -> tuple[float, float, float, float, Any]:
    """(wall s, JVM CPU s, Python workers CPU s, driver Python CPU s, outcome) of one load.

    Local mode: the driver's JVM and the Python workers below it. ``executors_pid``: a standalone worker,
    whose tree holds the executors' JVMs and their Python workers (then "JVM" is the driver's JVM plus
    the worker's own, and "Python workers" everything below the worker: executor JVMs included)."""
    jvm_pid = spark.sparkContext._gateway.proc.pid
    jvm_before, workers_before = tree_cpu_s(jvm_pid)
    if executors_pid is not None:
        worker_before, below_before = tree_cpu_s(executors_pid)
        jvm_before += worker_before
        workers_before = below_before
    driver_before = time.process_time()
    started = time.monotonic()
    outcome = run_load(
        spark, config, progress=lambda line: print(f"  load {time.monotonic() - started:6.2f} s: {line}")
    )
    wall = time.monotonic() - started
    jvm_after, workers_after = tree_cpu_s(jvm_pid)
    if executors_pid is not None:
        worker_after, below_after = tree_cpu_s(executors_pid)
        jvm_after += worker_after
        workers_after = below_after
    assert outcome.record.rows == records, outcome.record
    return (
        wall,
        jvm_after - jvm_before,
        workers_after - workers_before,
        time.process_time() - driver_before,
        outcome,
    )


def demo_submit(work: Path, zk: str, registry_url: str, servers: list[str], records: int) -> dict[str, float]:
    """A one-hour load of ``records`` records through spark-submit; seconds per phase."""
    topic = "bench_demo"
    config = load_config(zk, registry_url, servers, "demo", work / "demo-warehouse", topic)
    config_path = work / "demo.toml"
    config_path.write_text(dump_config(config))
    code_zip = build_code_zip(work / "code.zip")
    argv = spark_submit_command(config.load, config_path=config_path, code_zip=code_zip, master="local[2]")
    started = time.monotonic()
    marks: dict[str, float] = {}
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=submit_environment(config.load),
        cwd=work,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            now = time.monotonic() - started
            if "driver started" in line:
                marks.setdefault("driver", now)
            elif " lock " in line and "taken" in line:
                marks.setdefault("session", now)
            elif line.startswith("lumber-load: committed manifest"):
                marks.setdefault("committed", now)
        code = process.wait(timeout=300)
    marks["exit"] = time.monotonic() - started
    assert code == 0, (code, marks)
    assert "committed" in marks, marks
    return marks


def produce_demo(servers: list[str], registry: RegistryClientSettings, cluster: Any, records: int) -> None:
    cluster.create_topic("bench_demo", 2)
    schema_id = SchemaRegistryClient.from_config(registry).register(
        "bench_demo-value", shipped_schema_text("page_view_v2")
    )
    values = payloads(schema_id, records)
    producer = Producer(ProducerConfig(bootstrap_servers=servers, linger_ms=5, acks="all", host_name="bench"))
    try:
        for index in range(0, records, 500):
            producer.send_many(
                "bench_demo",
                values[index : index + 500],
                partition=(index // 500) % 2,
                timestamp_ms=BASE_MS + index * HOUR_MS // records,
            )
        producer.flush()
    finally:
        producer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one, deleted after)")
    parser.add_argument("--profile", action="store_true", help="profile the baseline and the task code")
    parser.add_argument("--scaling", action="store_true", help="also run the load on local[1]")
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="also run the load on a Spark standalone cluster of our own (a master, a 2-core worker)",
    )
    parser.add_argument(
        "--warehouse", help="also load into HDFS: 'hdfs' (one of its own) or an hdfs://namenode:port/path URL"
    )
    parser.add_argument("--demo", action="store_true", help="also time a demo-size load via spark-submit")
    parser.add_argument("--demo-records", type=int, default=6000)
    parser.add_argument("--no-spark-writer", action="store_true", help="skip the Spark writer comparison")
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
        config = load_config(zookeeper.connect, registry.url, servers, "bench", work / "warehouse", TOPIC)
        schema_id = SchemaRegistryClient.from_config(config.registry).register(
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

        compression = config.load.parquet_compression
        profiler = cProfile.Profile() if args.profile else None
        started = time.monotonic()
        cpu_started = time.process_time()
        if profiler:
            profiler.enable()
        base_rows = baseline(servers, config.registry, ends, work / "baseline", compression)
        if profiler:
            profiler.disable()
        base_s = time.monotonic() - started
        base_cpu = time.process_time() - cpu_started
        assert base_rows == args.records, base_rows

        started = time.monotonic()
        cpu_started = time.process_time()
        latest = SchemaRegistryClient.from_config(config.registry).get_latest(f"{TOPIC}-value")
        task_profiler = cProfile.Profile() if args.profile else None
        if task_profiler:
            task_profiler.enable()
        assert task_path(config, ends, latest, work / "task-path") == args.records
        if task_profiler:
            task_profiler.disable()
        task_s = time.monotonic() - started
        task_cpu = time.process_time() - cpu_started

        spark = spark_session("local[2]", work, args.spark_conf)
        stoppers.append(spark.stop)
        load_s, jvm_cpu, workers_cpu, driver_cpu, outcome = timed_load(spark, config, args.records)
        millions = args.records / 1e6
        data_bytes = parquet_bytes(work / "warehouse" / TOPIC)
        spark_bytes = None
        if not args.no_spark_writer:
            frame = spark.read.parquet(str(work / "warehouse" / TOPIC))
            frame.write.partitionBy("dt", "hr").option("compression", "snappy").parquet(
                str(work / "spark-writer")
            )
            spark_bytes = parquet_bytes(work / "spark-writer")
        hdfs_run = None
        if args.warehouse:
            hdfs_url = args.warehouse
            if args.warehouse == "hdfs":
                hdfs = HdfsServer(work / "hdfs", HdfsPorts.free())
                hdfs.start()
                stoppers.append(hdfs.stop)
                hdfs_url = hdfs.url
            on_hdfs = load_config(
                zookeeper.connect, registry.url, servers, "bench-hdfs", f"{hdfs_url}/bench-warehouse", TOPIC
            )
            hdfs_run = timed_load(spark, on_hdfs, args.records)
        one_core = None
        if args.scaling:
            spark.stop()
            spark = spark_session("local[1]", work, args.spark_conf)
            stoppers.append(spark.stop)
            one = load_config(zookeeper.connect, registry.url, servers, "bench1", work / "warehouse1", TOPIC)
            one_core = timed_load(spark, one, args.records)
        cluster_run = None
        if args.standalone:
            spark.stop()
            with spark_standalone(work / "standalone", cores=2) as standalone:
                spark = spark_session(standalone.master_url, work, args.spark_conf)
                stoppers.append(spark.stop)
                spark.sparkContext.addPyFile(str(build_code_zip(work / "code.zip")))
                on_cluster = load_config(
                    zookeeper.connect, registry.url, servers, "bench-sa", work / "warehouse-sa", TOPIC
                )
                cluster_run = timed_load(spark, on_cluster, args.records, executors_pid=standalone.worker_pid)
                spark.stop()
        demo = None
        if args.demo:
            spark.stop()
            produce_demo(servers, config.registry, cluster, args.demo_records)
            demo = demo_submit(work, zookeeper.connect, registry.url, servers, args.demo_records)

        base_rate = args.records / base_s
        load_rate = args.records / load_s
        ratio = load_rate / base_rate
        print()
        print(
            f"records: {args.records:,} in {args.partitions} partitions, "
            f"{len(outcome.plan.tasks) if outcome.plan else 0} Spark tasks, Parquet {compression}"
        )
        print(f"{'':<44} {'seconds':>9} {'records/s':>12}")
        print(f"{'baseline (1 process: fetch+decode+write)':<44} {base_s:>9.1f} {base_rate:>12,.0f}")
        print(f"{'task code in 1 process (no Spark)':<44} {task_s:>9.1f} {args.records / task_s:>12,.0f}")
        print(f"{'load job (local[2]: plan..commit)':<44} {load_s:>9.1f} {load_rate:>12,.0f}")
        if hdfs_run is not None:
            label = "load job (local[2]) into HDFS"
            print(f"{label:<44} {hdfs_run[0]:>9.1f} {args.records / hdfs_run[0]:>12,.0f}")
        if one_core is not None:
            print(f"{'load job (local[1])':<44} {one_core[0]:>9.1f} {args.records / one_core[0]:>12,.0f}")
        if cluster_run is not None:
            label = "load job (standalone, 1 worker x 2 cores)"
            print(f"{label:<44} {cluster_run[0]:>9.1f} {args.records / cluster_run[0]:>12,.0f}")
        print(f"ratio load / baseline: {ratio:.2f} (target >= {TARGET_RATIO})")
        if hdfs_run is not None:
            print(
                f"HDFS: load into HDFS / load into file: {load_s / hdfs_run[0]:.2f} (goal >= 0.8), "
                f"/ baseline {base_s / hdfs_run[0]:.2f} (goal >= {TARGET_RATIO}); CPU s per million records: "
                f"JVM {hdfs_run[1] / millions:.1f}, Python workers {hdfs_run[2] / millions:.1f}, driver "
                f"Python {hdfs_run[3] / millions:.1f}"
            )
        if cluster_run is not None:
            print(
                f"standalone: ratio {base_s / cluster_run[0]:.2f}; CPU s per million records: driver JVM + "
                f"worker JVM {cluster_run[1] / millions:.1f}, executors (JVMs and Python workers) "
                f"{cluster_run[2] / millions:.1f}"
            )
        print(
            f"CPU s per million records: baseline {base_cpu / millions:.1f}; task code in 1 process "
            f"{task_cpu / millions:.1f}; load: JVM "
            f"{jvm_cpu / millions:.1f}, Python workers {workers_cpu / millions:.1f}, driver Python "
            f"{driver_cpu / millions:.1f}"
        )
        print(f"Parquet bytes per record: load {data_bytes / args.records:.1f}", end="")
        if spark_bytes is not None:
            print(
                f", Spark's writer (snappy) {spark_bytes / args.records:.1f} "
                f"({data_bytes / spark_bytes:.2f}x)"
            )
        else:
            print()
        if demo is not None:
            print(
                f"demo-size load ({args.demo_records:,} records, spark-submit local[2]): "
                f"{demo['exit']:.1f} s = spark-submit + JVM start {demo['driver']:.1f} s, Spark session "
                f"{demo['session'] - demo['driver']:.1f} s, run (lock..committed) "
                f"{demo['committed'] - demo['session']:.1f} s, stop {demo['exit'] - demo['committed']:.1f} s"
            )
        if profiler:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        if task_profiler:
            pstats.Stats(task_profiler).sort_stats("tottime").print_stats(15)
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
