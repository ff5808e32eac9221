"""Log storage benchmark: append and read throughput of ``broker.log`` against the raw OS calls.

Run from the repository root::

    .venv/bin/python bench/log_ingest.py [--total-mb 1024] [--dir PATH] [--rounds 2]

What it measures, all in this one process and run:

1. **Record batches**: records/s to build (:class:`RecordBatchBuilder`) and to parse (``validate()`` +
   ``records()``) 200-byte records in batches of 1 and of 50 (the paper's producer batch sizes).
2. **Ingest**: ``--total-mb`` (>= 1024 by default) of pre-built ~1 MiB record batches of 200-byte records
   appended to a :class:`~broker.log.log.Log` (through a :class:`LogManager`, flush policy out of the way),
   against ``os.write`` of exactly the same bytes to a plain file.
3. **Reads**: the whole log fetched as 1 MiB reads, each :class:`FileRegion` sent with ``sendfile`` to a
   loopback TCP socket, against raw ``sendfile`` of the same segment files in the same 1 MiB chunks.

After a warm-up write (so that neither side pays for first-touch page-cache memory), each side runs
``--rounds`` times, alternating, with the page cache written back between runs; the best round counts.
Targets (issue 3): both ratios >= 0.5 of raw. The script prints MB/s and ratios and exits 1 when a target
is missed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.config import LogConfig
from broker.log.log_manager import LogManager
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder

MIB = 1024 * 1024
MB = 1_000_000
RECORD_VALUE_BYTES = 200
BATCH_BYTES = MIB
DISTINCT_BATCHES = 16
TARGET_RATIO = 0.5
FETCH_BYTES = MIB


def make_value(rng: random.Random) -> bytes:
    # Log-line-like text: compressible, but not trivially so (the codec is NONE here anyway).
    words = [b"GET", b"POST", b"/api/v1/items", b"/home", b"200", b"404", b"user=", b"session=", b"ms"]
    out = bytearray()
    while len(out) < RECORD_VALUE_BYTES:
        out += rng.choice(words) + b" " + str(rng.randrange(10**6)).encode() + b" "
    return bytes(out[:RECORD_VALUE_BYTES])


def build_batch(rng: random.Random, target_bytes: int) -> bytes:
    builder = RecordBatchBuilder()
    timestamp_ms = 1_700_000_000_000
    value = make_value(rng)
    while builder.size_in_bytes() + builder.estimate_size_in_bytes(None, value) <= target_bytes:
        builder.append(timestamp_ms, None, value, (("host", b"bench-host"),))
        timestamp_ms += 1
        value = make_value(rng)
    return builder.build()


def record_rates(rng: random.Random) -> list[tuple[int, float, float]]:
    """(batch size, build records/s, parse records/s) for 200-byte records."""
    results = []
    values = [make_value(rng) for _ in range(1000)]
    for batch_size in (1, 50):
        total_records = 200_000
        batches: list[bytes] = []
        started = time.perf_counter()
        i = 0
        for _ in range(total_records // batch_size):
            builder = RecordBatchBuilder()
            for _ in range(batch_size):
                builder.append(1_700_000_000_000 + i, None, values[i % 1000])
                i += 1
            batches.append(builder.build())
        build_rate = total_records / (time.perf_counter() - started)
        started = time.perf_counter()
        parsed = 0
        for data in batches:
            batch = RecordBatch(data)
            batch.validate()
            for _ in batch.records():
                parsed += 1
        parse_rate = parsed / (time.perf_counter() - started)
        if parsed != total_records:
            raise SystemExit(f"parsed {parsed} records, built {total_records}")
        results.append((batch_size, build_rate, parse_rate))
    return results


def drop_dirty_pages() -> None:
    os.sync()


def raw_write(path: Path, batches: list[bytes], count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        started = time.perf_counter()
        for i in range(count):
            view = memoryview(batches[i % len(batches)])
            while view:
                view = view[os.write(fd, view) :]
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
    return elapsed


def log_append(log_dir: Path, batches: list[bytes], count: int) -> tuple[float, LogManager]:
    config = LogConfig(
        log_dirs=[str(log_dir)],
        flush_messages=2**62,
        flush_ms=2**62,
        expose="appended",
        retention_ms=-1,
    )
    manager = LogManager(config)
    log = manager.get_or_create_log("bench", 0)
    started = time.perf_counter()
    for i in range(count):
        log.append(batches[i % len(batches)])
    elapsed = time.perf_counter() - started
    return elapsed, manager


class Sink:
    """A loopback TCP connection whose far end a thread drains and counts."""

    def __init__(self) -> None:
        server = socket.create_server(("127.0.0.1", 0))
        self.sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
        server.close()
        self.received = 0
        self._receiver = receiver
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        buffer = bytearray(4 * MIB)
        while True:
            n = self._receiver.recv_into(buffer)
            if n == 0:
                return
            self.received += n

    def wait_for(self, total: int) -> None:
        while self.received < total:
            time.sleep(0.0005)

    def close(self) -> None:
        self.sender.close()
        self._thread.join()
        self._receiver.close()


def send_all(out_fd: int, in_fd: int, position: int, count: int) -> None:
    sent = 0
    while sent < count:
        sent += os.sendfile(out_fd, in_fd, position + sent, count - sent)


def raw_sendfile(sink: Sink, files: list[Path]) -> tuple[float, int]:
    total = 0
    out_fd = sink.sender.fileno()
    before = sink.received
    started = time.perf_counter()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for position in range(0, size, FETCH_BYTES):
                count = min(FETCH_BYTES, size - position)
                send_all(out_fd, fd, position, count)
                total += count
        finally:
            os.close(fd)
    sink.wait_for(before + total)
    return time.perf_counter() - started, total


def log_sendfile(sink: Sink, manager: LogManager) -> tuple[float, int]:
    log = manager.get_or_create_log("bench", 0)
    out_fd = sink.sender.fileno()
    before = sink.received
    total = 0
    offset = log.log_start_offset
    end = log.high_watermark
    started = time.perf_counter()
    while offset < end:
        region = log.read(offset, FETCH_BYTES)
        if region is None:
            break
        sent = 0
        while sent < region.size_bytes:
            sent += region.transfer_to(out_fd, sent)
        total += region.size_bytes
        offset = region.next_offset
    sink.wait_for(before + total)
    return time.perf_counter() - started, total


def best_of(rounds: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(rounds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--total-mb", type=int, default=1024, help="MiB appended per run (default 1024)")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary folder)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per side; the best counts (default 2)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="lumber-bench-", dir=args.dir))
    rng = random.Random(42)
    try:
        print("record batches, 200-byte records")
        for batch_size, build_rate, parse_rate in record_rates(rng):
            print(
                f"  batch of {batch_size:>2}: build {build_rate:>10,.0f} records/s"
                f"   parse {parse_rate:>10,.0f} records/s"
            )

        batches = [build_batch(rng, BATCH_BYTES) for _ in range(DISTINCT_BATCHES)]
        count = max(1, args.total_mb * MIB // len(batches[0]))
        total_bytes = sum(len(batches[i % len(batches)]) for i in range(count))
        records_per_batch = RecordBatch(batches[0]).record_count
        print(
            f"\ningest: {count} batches of {len(batches[0]):,} bytes ({records_per_batch} records of "
            f"{RECORD_VALUE_BYTES} bytes), {total_bytes / MB:,.0f} MB per run, best of {args.rounds}"
        )
        # Warm-up: the first writes into never-used memory are several times slower on a VM (the host
        # backs guest pages on first touch). Write and delete the same amount once so that both sides
        # then write into recycled page-cache memory; each side's files are deleted right after its run.
        raw_path = scratch / "raw.bin"
        raw_write(raw_path, batches, count)
        raw_path.unlink()
        raw_times: list[float] = []
        log_times: list[float] = []
        manager: LogManager | None = None
        for round_number in range(args.rounds):
            drop_dirty_pages()
            raw_times.append(raw_write(raw_path, batches, count))
            raw_path.unlink()
            drop_dirty_pages()
            elapsed, manager = log_append(scratch / "logs", batches, count)
            log_times.append(elapsed)
            if round_number < args.rounds - 1:  # the last round's log stays for the read benchmark
                manager.close()
                shutil.rmtree(scratch / "logs")
        assert manager is not None
        print(f"  rounds (s): raw {[round(t, 3) for t in raw_times]}  log {[round(t, 3) for t in log_times]}")
        raw_mbps = total_bytes / MB / min(raw_times)
        log_mbps = total_bytes / MB / min(log_times)
        ingest_ratio = log_mbps / raw_mbps
        print(f"  raw os.write   {raw_mbps:>9,.0f} MB/s")
        records_per_s = log_mbps * MB / len(batches[0]) * records_per_batch
        print(f"  Log.append     {log_mbps:>9,.0f} MB/s   ({records_per_s:,.0f} records/s)")
        print(f"  ratio          {ingest_ratio:>9.2f}   (target >= {TARGET_RATIO})")

        log = manager.get_or_create_log("bench", 0)
        segment_files = [segment.path for segment in log.segments]
        drop_dirty_pages()
        sink = Sink()
        try:
            raw_read: list[float] = []
            log_read: list[float] = []
            read_total = 0
            for _ in range(args.rounds):
                elapsed, raw_total = raw_sendfile(sink, segment_files)
                raw_read.append(elapsed)
                elapsed, read_total = log_sendfile(sink, manager)
                log_read.append(elapsed)
                if read_total != raw_total:
                    raise SystemExit(f"the log sent {read_total} bytes, the files hold {raw_total}")
        finally:
            sink.close()
        raw_read_mbps = read_total / MB / min(raw_read)
        log_read_mbps = read_total / MB / min(log_read)
        read_ratio = log_read_mbps / raw_read_mbps
        print(
            f"\nreads: {read_total / MB:,.0f} MB as {FETCH_BYTES:,}-byte fetches over loopback TCP, "
            f"best of {args.rounds}"
        )
        print(f"  raw sendfile            {raw_read_mbps:>9,.0f} MB/s")
        print(f"  Log.read + sendfile     {log_read_mbps:>9,.0f} MB/s")
        print(f"  ratio                   {read_ratio:>9.2f}   (target >= {TARGET_RATIO})")
        manager.close()
        ok = ingest_ratio >= TARGET_RATIO and read_ratio >= TARGET_RATIO
        print("\nresult: " + ("both targets met" if ok else "TARGET MISSED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
