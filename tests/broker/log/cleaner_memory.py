"""The child processes of the cleaner's memory test: one writes a log of distinct keys, another cleans it
and reports how much its resident memory grew.

Usage: ``python -m tests.broker.log.cleaner_memory write LOG_DIR KEYS`` (a compacted log of ``KEYS``
records, each with its own key, in segments of 8 MiB), then ``python -m tests.broker.log.cleaner_memory
clean LOG_DIR DEDUPE_BYTES``: opens the log, loads the cleaner's compiled kernels (numba's import and
code are the process's, not the map's: their RSS is reported apart), notes its resident set size, resets
the kernel's peak (``/proc/self/clear_refs``), cleans until nothing is dirty, and prints one JSON line:
passes, the keys each mapped, the RSS the kernels took (all, and the anonymous part: the rest is shared
library pages) and how long they took to load, the baseline RSS
and the peak RSS (``VmHWM``) in bytes, and the seconds taken.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

from broker.clock import system_clock_ms
from broker.config import LogConfig
from broker.log.kernel_load import load_kernels
from broker.log.log import Log
from broker.log.log_cleaner import LogCleaner
from broker.log.log_cleaner_manager import LogCleanerManager
from broker.record.record_batch_builder import RecordBatchBuilder

TOPIC_DIR = "big-0"


def log_config(log_dir: str, dedupe_bytes: int = 16 * 1024 * 1024) -> LogConfig:
    return LogConfig(
        log_dirs=[log_dir],
        cleanup_policy="compact",
        segment_bytes=8 * 1024 * 1024,
        min_cleanable_dirty_ratio=0.0,
        cleaner_dedupe_buffer_bytes=dedupe_bytes,
        expose="appended",
        flush_messages=10**9,
        flush_ms=10**9,
    )


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def write(log_dir: str, keys: int) -> None:
    directory = Path(log_dir) / TOPIC_DIR
    directory.mkdir(parents=True, exist_ok=True)
    log = Log(directory, log_config(log_dir))
    per_batch = 1000
    for start in range(0, keys, per_batch):
        builder = RecordBatchBuilder()
        for i in range(start, min(start + per_batch, keys)):
            builder.append(1_700_000_000_000, b"key-%08d" % i, b"value-%08d" % i)
        log.append(builder.build())
    log.roll()
    log.close()
    print(json.dumps({"log_end_offset": log.log_end_offset, "segments": len(log.segments)}))


def clean(log_dir: str, dedupe_bytes: int) -> None:
    directory = Path(log_dir) / TOPIC_DIR
    config = log_config(log_dir, dedupe_bytes)
    log = Log(directory, config, clean_shutdown=True, recovery_point=1 << 62)
    manager = LogCleanerManager([Path(log_dir)], lambda: {Path(log_dir): [log]}, system_clock_ms)
    log_cleaner = LogCleaner(config, manager)
    before_kernels = _status_bytes("VmRSS")
    before_kernels_anonymous = _status_bytes("RssAnon")
    started = time.perf_counter()
    load_kernels()
    kernels_seconds = time.perf_counter() - started
    gc.collect()
    baseline = _status_bytes("VmRSS")
    anonymous = _status_bytes("RssAnon")
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
    started = time.perf_counter()
    cleaner = log_cleaner.new_cleaner()
    passes = []
    while (stats := log_cleaner.clean_once(cleaner)) is not None:
        passes.append(stats.map_keys)
    seconds = time.perf_counter() - started
    peak = _status_bytes("VmHWM")
    records = sum(1 for segment in log.segments for _ in segment.batches(0, segment.size_bytes, 1 << 20))
    log.close()
    print(
        json.dumps(
            {
                "passes": len(passes),
                "map_keys": passes,
                "map_bytes": cleaner.offset_map.memory_bytes,
                "kernels_rss": baseline - before_kernels,
                "kernels_anonymous_rss": anonymous - before_kernels_anonymous,
                "kernels_seconds": kernels_seconds,
                "baseline_rss": baseline,
                "peak_rss": peak,
                "seconds": seconds,
                "batches_after": records,
            }
        )
    )


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        clean(sys.argv[2], int(sys.argv[3]))
