"""The log cleaner running in a broker (broker/log/log_cleaner.py, log_manager.py): the log manager's cleaner
threads, a 16 MiB dedupe buffer over 2M distinct keys (slow), a keyless record refused on a compacted log by
both key checks, and retention under compact and compact,delete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker import compiled
from broker.log.checkpoint import read_checkpoint
from broker.log.file_names import CLEANER_OFFSET_CHECKPOINT_FILE_NAME
from broker.log.kernel_load import load_kernels
from broker.log.log_manager import LogManager
from broker.record.compression import CompressionType
from broker.record.errors import InvalidRecordError
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from tests.broker.log.compacted_logs import (
    append_ops,
    first_dirty,
    log_map,
    open_log,
    read_records,
    replay,
)
from tests.broker.log.helpers import BASE_TS, config


def test_a_compact_only_log_deletes_nothing_by_retention_and_compact_delete_does(tmp_path: Path) -> None:
    for policy, deleted in (("compact", False), ("compact,delete", True)):
        log = open_log(tmp_path / policy, cleanup_policy=policy, retention_ms=1, segment_bytes=4096)
        append_ops(log, [(f"k{i}".encode(), b"v" * 100) for i in range(500)])
        segments = len(log.segments)
        removed = log.apply_retention(now_ms=BASE_TS + 10_000)
        assert bool(removed) is deleted
        assert len(log.segments) == (1 if deleted else segments)
        log.close()


@pytest.mark.parametrize("compiled_loaded", [False, True], ids=["walked", "by-columns"])
def test_a_keyless_record_on_a_compacted_log_is_refused_naming_the_partition_and_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled_loaded: bool
) -> None:
    """Both routes of the key check: walked (before the cleaner has loaded the compiled loops: a produce
    never waits for numba) and by the key columns (after)."""
    if compiled_loaded:
        load_kernels()
        assert compiled.loaded()
    else:
        monkeypatch.setattr(compiled, "loaded", lambda: False)
    log = open_log(tmp_path)
    append_ops(log, [(b"a", b"1")])
    builder = RecordBatchBuilder()
    builder.append(BASE_TS, b"b", b"2")
    builder.append(BASE_TS, b"c", b"3")
    builder.append(BASE_TS, None, b"keyless")
    builder.append(BASE_TS, None, b"keyless too")
    size = log.size_bytes
    with pytest.raises(
        InvalidRecordError, match=r"compacted-0 append: .*without a key: record #2 at offset 2"
    ):
        log.append(builder.build())
    assert (log.log_end_offset, log.size_bytes) == (1, size)
    # a request of several batches (read by columns together), the keyless record in a gzip batch
    keyed = RecordBatchBuilder()
    for i in range(70):
        keyed.append(BASE_TS, b"k%d" % i, b"v")
    zipped = RecordBatchBuilder(CompressionType.GZIP)
    zipped.append(BASE_TS, b"d", b"4")
    zipped.append(BASE_TS, None, b"keyless")
    with pytest.raises(InvalidRecordError, match=r"without a key: record #1 at offset 1 of the batch \(of 2"):
        log.append(keyed.build() + zipped.build())
    assert (log.log_end_offset, log.size_bytes) == (1, size)
    log.append(keyed.build() + keyed.build())
    assert log.log_end_offset == 141
    log.close()


def thread_nice(thread: threading.Thread) -> int:
    """The kernel's nice value of ``thread`` (field 19 of ``/proc/self/task/<tid>/stat``)."""
    stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


def test_the_log_manager_runs_the_cleaner_threads(tmp_path: Path) -> None:
    """...at ``cleaner_nice`` below the broker's priority, with the threads they start."""
    log_config = config(
        tmp_path,
        cleanup_policy="compact",
        cleaner_backoff_ms=20,
        min_cleanable_dirty_ratio=0.0,
        segment_bytes=8 * 1024,
        cleaner_nice=7,
    )
    before = set(threading.enumerate())
    with LogManager(log_config) as manager:
        manager.start()
        log = manager.get_or_create_log("changelog", 0)
        ops = [(f"k{i % 20}".encode(), f"v{i}".encode()) for i in range(3_000)]
        append_ops(log, ops)
        log.roll()
        deadline = time.monotonic() + 30
        while first_dirty(tmp_path, log) != log.log_end_offset:
            assert time.monotonic() < deadline, "the cleaner thread did not clean the log"
            time.sleep(0.05)
        assert len(read_records(log)) == 20
        assert log_map(log) == replay(ops)
        assert manager.cleaner.totals.passes >= 1
        own = thread_nice(threading.current_thread())
        names = ("lumber-log-cleaner-0", "lumber-log-cleaner-read_0")  # the thread, and its reader
        niced = {t.name: thread_nice(t) for t in set(threading.enumerate()) - before if t.name in names}
        assert niced == dict.fromkeys(names, min(own + 7, 19))
        assert thread_nice(threading.current_thread()) == own
        manager.delete_log("changelog", 0)
        assert TopicPartition("changelog", 0) not in read_checkpoint(
            tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE_NAME
        )


@pytest.mark.slow
def test_cleaning_2m_distinct_keys_under_a_16_mib_dedupe_buffer_stays_within_it_over_several_passes(
    tmp_path: Path,
) -> None:
    """The cleaning runs in a process of its own, whose resident set is measured (``VmRSS`` before, the
    kernel's peak ``VmHWM`` after): it grows by the map's 16 MiB and a bounded working set (one chunk of
    decoded records, the I/O reads), not with the keys. numba and the cleaner's compiled kernels are
    loaded before the measurement (once per process, whatever the log: bounded apart). Takes 45-85 s on
    the shared 2-core machine."""
    run = [sys.executable, "-m", "tests.broker.log.cleaner_memory"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    written = json.loads(
        subprocess.run(
            [*run, "write", str(tmp_path), "2000000"], check=True, capture_output=True, env=env
        ).stdout
    )
    assert written["log_end_offset"] == 2_000_000
    report = json.loads(
        subprocess.run(
            [*run, "clean", str(tmp_path), str(16 * 1024 * 1024)], check=True, capture_output=True, env=env
        ).stdout
    )
    map_bytes = report["map_bytes"]
    assert 16 * 1024 * 1024 - 1024 <= map_bytes <= 16 * 1024 * 1024  # the largest prime slot count
    max_keys = int(map_bytes // 24 * 0.9)
    assert report["passes"] == 4  # 2M keys, at most 629,000 per pass
    assert sum(report["map_keys"]) == 2_000_000
    assert all(keys <= max_keys for keys in report["map_keys"])
    growth = report["peak_rss"] - report["baseline_rss"]
    assert growth <= map_bytes + 12 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB"
    # numba's import and the kernels' code: mostly LLVM's shared library pages (shared between processes)
    kernels, anonymous = report["kernels_rss"], report["kernels_anonymous_rss"]
    assert 0 < anonymous <= 64 * 1024 * 1024, f"the kernels took {anonymous / 2**20:.1f} MiB of anonymous RSS"
    assert anonymous < kernels <= 224 * 1024 * 1024, f"numba and the kernels took {kernels / 2**20:.1f} MiB"
    assert report["batches_after"] == 2_000  # every key distinct: nothing to drop, every batch kept
