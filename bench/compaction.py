"""What log compaction costs (issue 20): the cleaner's throughput, and a producer's rate while it runs.

Run from the repository root::

    .venv/bin/python bench/compaction.py [--records 500000] [--keys 50000] [--rounds 3]
                                         [--produce-seconds 8] [--skip-produce] [--skip-throughput]
                                         [--throttle BYTES_PER_SECOND ...]

1. **cleaner throughput** (in this process, real files): a compacted log of ``--records`` records of 100-byte
   values over ``--keys`` keys (batches of 100 records, segments of 8 MiB, one dedupe buffer big enough for
   one pass) is cleaned once; MB/s = the log's bytes / the pass's seconds (map + rewrite + swap). Against,
   in the same round and on the same segments: a **plain sequential read from disk** (the files' pages
   evicted with ``posix_fadvise(POSIX_FADV_DONTNEED)`` after an fsync, then 512 KiB reads, no decoding), the
   same **read from the page cache** (a memory copy), and a **decoding read** (every batch through the
   record walker, as a consumer's ``records()`` does). The cleaner runs twice per round, on fresh copies:
   **from disk** (pages evicted first, as the disk read) and **from the cache** (right after the reads).
   Goal: the cleaner from disk >= 0.3x the read from disk. The work files live under the current
   directory (the repository's disk), not in a tmpfs. The best of ``--rounds`` counts.
2. **produce while cleaning** (unless ``--skip-produce``): a real ZooKeeper and one Lumber broker process,
   compaction on (``[log] cleanup_policy = "compact"``, 1 MiB segments, ``min_cleanable_dirty_ratio``
   0.01, back-off 50 ms); a confluent-kafka producer (acks=1, linger 5 ms) writes 100-byte values over
   ``--keys`` keys to a 1-partition topic for ``--produce-seconds``; the same on a broker with
   ``cleaner_threads = 0``. Before each measured run the topic is filled with ``--records`` records so the
   cleaner has work from the first second. Records/s with the cleaner against without (goal >= 0.8x); the
   cleaner's passes during the run are printed, to show it ran.

Everything is printed; BENCHMARKS.md ("Compaction (issue 20)") records the runs with their date.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.clock import system_clock_ms
from broker.config import LogConfig
from broker.log.checkpoint import read_checkpoint
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.kernel_load import load_kernels
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.support.broker_cluster import BrokerCluster, bench_cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer as ConfluentProducer

TOPIC = "changelog"
READ_BYTES = 512 * 1024


def log_config(root: Path) -> LogConfig:
    return LogConfig(
        log_dirs=[str(root)],
        cleanup_policy="compact",
        segment_bytes=8 * 1024 * 1024,
        min_cleanable_dirty_ratio=0.0,
        cleaner_dedupe_buffer_bytes=64 * 1024 * 1024,
        expose="appended",
        flush_messages=10**9,
        flush_ms=10**9,
    )


def build_log(root: Path, records: int, keys: int) -> int:
    directory = root / f"{TOPIC}-0"
    directory.mkdir(parents=True)
    log = Log(directory, log_config(root))
    rng = random.Random(20)
    value = b"v" * 100
    for start in range(0, records, 100):
        builder = RecordBatchBuilder()
        for _ in range(start, min(start + 100, records)):
            builder.append(1_700_000_000_000, b"key-%08d" % rng.randrange(keys), value)
        log.append(builder.build())
    log.roll()
    size = log.size_bytes
    log.close()
    return size


def drop_pages(directory: Path) -> None:
    """Evict the segment files' pages from the page cache (written back first), so the next read of them
    comes from the disk."""
    for path in sorted(directory.glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def plain_read(directory: Path) -> float:
    started = time.perf_counter()
    for path in sorted(directory.glob("*.log")):
        with path.open("rb", buffering=0) as file:
            while file.read(READ_BYTES):
                pass
    return time.perf_counter() - started


def decoding_read(log: Log) -> float:
    started = time.perf_counter()
    count = 0
    for segment in log.segments:
        for batch in segment.batches(0, segment.size_bytes, READ_BYTES):
            count += len(batch.records())
    return time.perf_counter() - started


def clean_pass(root: Path) -> tuple[float, int]:
    directory = root / f"{TOPIC}-0"
    config = log_config(root)
    log = Log(directory, config, clean_shutdown=True, recovery_point=1 << 62)
    manager = LogCleanerManager([root], lambda: {root: [log]}, system_clock_ms)
    log_cleaner = LogCleaner(config, manager)
    cleaner = log_cleaner.new_cleaner()
    load_kernels()  # numba's import and the compiled code, once per process: not a pass's work
    started = time.perf_counter()
    stats = log_cleaner.clean_once(cleaner)
    seconds = time.perf_counter() - started
    if stats is None or stats.end_offset != log.log_end_offset:
        raise RuntimeError(f"the pass did not clean the whole log: {stats}")
    written = stats.bytes_written
    cleaner.close()
    log_cleaner.shutdown()
    log.close()
    return seconds, written


def cleaner_throughput(records: int, keys: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-compaction-", dir=Path.cwd()) as tmp:
        pristine = Path(tmp) / "pristine"
        size = build_log(pristine, records, keys)
        mb = size / 1e6
        print(f"log: {records:,} records over {keys:,} keys, {mb:.1f} MB in segments of 8 MiB")
        best: dict[str, float] = {}
        for round_number in range(rounds):
            work = Path(tmp) / f"round-{round_number}"
            shutil.copytree(pristine, work)
            directory = work / f"{TOPIC}-0"
            drop_pages(directory)
            disk_s = plain_read(directory)
            cached_s = plain_read(directory)
            log = Log(directory, log_config(work), clean_shutdown=True, recovery_point=1 << 62)
            decode_s = decoding_read(log)
            log.close()
            clean_s, written = clean_pass(work)
            shutil.rmtree(work)
            shutil.copytree(pristine, work)
            drop_pages(directory)
            cold_s, _ = clean_pass(work)
            shutil.rmtree(work)
            seconds = {
                "disk": disk_s,
                "cached": cached_s,
                "decode": decode_s,
                "clean": clean_s,
                "cold": cold_s,
            }
            for name, taken in seconds.items():
                best[name] = min(best.get(name, float("inf")), taken)
            print(
                f"round {round_number + 1}: disk read {mb / disk_s:7.1f} MB/s   cached read "
                f"{mb / cached_s:8.1f} MB/s   decoding read {mb / decode_s:6.1f} MB/s   cleaner from disk "
                f"{mb / cold_s:6.1f} MB/s   cleaner from cache {mb / clean_s:6.1f} MB/s "
                f"({written / 1e6:.1f} MB written, {cold_s:.2f} s / {clean_s:.2f} s)"
            )
        disk, cached, decode, clean, cold = (
            mb / best[k] for k in ("disk", "cached", "decode", "clean", "cold")
        )
        print(
            f"best: disk read {disk:.1f} MB/s, cached read {cached:.1f} MB/s, decoding read "
            f"{decode:.1f} MB/s, cleaner from disk {cold:.1f} MB/s, from cache {clean:.1f} MB/s"
        )
        print(
            f"cleaner from disk / disk read = {cold / disk:.2f}x (goal >= 0.3x); cleaner from cache / cached "
            f"read = {clean / cached:.4f}x; cleaner from cache / decoding read = {clean / decode:.2f}x"
        )


def produce_for(cluster: BrokerCluster, seconds: float, keys: int, count: int | None = None) -> float:
    """Records/s of a confluent-kafka producer writing for ``seconds`` (or ``count`` records)."""
    producer = ConfluentProducer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 256 * 1024,
        }
    )
    rng = random.Random(21)
    value = b"p" * 100
    sent = 0
    started = time.perf_counter()
    while (count is None and time.perf_counter() - started < seconds) or (count is not None and sent < count):
        for _ in range(1000):
            while True:
                try:
                    producer.produce(TOPIC, value, b"key-%08d" % rng.randrange(keys), partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
            sent += 1
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("the producer could not deliver every record")
    return sent / (time.perf_counter() - started)


def passes_so_far(cluster: BrokerCluster) -> int:
    path = cluster.brokers[0].log_dir / CLEANER_OFFSET_CHECKPOINT_FILE_NAME
    return read_checkpoint(path).get(TopicPartition(TOPIC, 0), 0) if path.exists() else 0


def produce_while_cleaning(records: int, keys: int, seconds: float, rounds: int, throttle: int) -> None:
    print(f"produce while cleaning, cleaner_io_max_bytes_per_second = {throttle:,} (0: no cap)")
    settings: dict[str, Any] = {
        "cleaner_io_max_bytes_per_second": throttle,
        "cleanup_policy": "compact",
        "segment_bytes": 1024 * 1024,
        "min_cleanable_dirty_ratio": 0.01,
        "cleaner_backoff_ms": 50,
    }
    rates: dict[int, list[float]] = {0: [], 1: []}
    for round_number in range(rounds):
        for threads in (0, 1):
            with (
                tempfile.TemporaryDirectory(prefix="bench-compaction-broker-") as tmp,
                bench_cluster(Path(tmp), 1, cleaner_threads=threads, **settings) as cluster,
            ):
                cluster.create_topic(TOPIC, 1)
                produce_for(cluster, 0, keys, count=records)  # the dirty log the cleaner starts on
                first_dirty_before = passes_so_far(cluster)
                rate = produce_for(cluster, seconds, keys)
                first_dirty_after = passes_so_far(cluster)
                rates[threads].append(rate)
                print(
                    f"round {round_number + 1}: cleaner_threads={threads}: {rate:,.0f} records/s "
                    f"(cleaner checkpoint {first_dirty_before:,} -> {first_dirty_after:,})"
                )
    without, with_cleaner = max(rates[0]), max(rates[1])
    print(
        f"best: without the cleaner {without:,.0f} records/s, with it {with_cleaner:,.0f} records/s: "
        f"{with_cleaner / without:.2f}x (goal >= 0.8x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--produce-seconds", type=float, default=8.0)
    parser.add_argument("--skip-produce", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--throttle",
        type=int,
        action="append",
        default=None,
        help="cleaner_io_max_bytes_per_second for the produce case (repeat for several; 0: no cap)",
    )
    args = parser.parse_args()
    print(f"Compaction benchmark, {time.strftime('%Y-%m-%d %H:%M')}")
    if not args.skip_throughput:
        cleaner_throughput(args.records, args.keys, args.rounds)
    if not args.skip_produce:
        for throttle in args.throttle or [0]:
            produce_while_cleaning(args.records, args.keys, args.produce_seconds, args.rounds, throttle)


if __name__ == "__main__":
    main()
