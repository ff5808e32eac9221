"""What a topic's ``compression.type`` costs the leader's append: a produced batch stored as sent, against the
same batch recompressed with the topic's codec (Kafka's LogValidator rebuild, ``broker/log/log_validator.py``
step 6).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/topic_compression.py [--records 50] [--appends 2000]

Each case appends ``--appends`` copies of one producer batch (``--records`` log-line records of about 200
bytes, compressed by Lumber's producer with the case's producer codec) to a fresh :class:`~broker.log.log.Log`
in a temporary folder (``expose = "appended"``, no flush during the run) whose ``compression_type`` is the
case's topic codec, and times :meth:`Log.append` with the calling thread's CPU time (``time.thread_time``:
validation, recompression and the write all run on it); 5 rounds per case, the fastest counts. It prints
microseconds per append, the records' megabytes per CPU second, the stored batch's size, and the ratio to
the first case (lz4 stored as sent). The cases with a level set the topic's ``compression.gzip.level``,
``compression.lz4.level`` or ``compression.zstd.level`` (KIP-390); the others take the codec's default.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.config import LogConfig
from broker.log.log import Log
from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder

ROUNDS = 5
#: (producer codec, topic compression.type, the codec's level or None for its default): the first is the
#: baseline
CASES: tuple[tuple[CompressionType, str, int | None], ...] = (
    (CompressionType.LZ4, "producer", None),
    (CompressionType.LZ4, "lz4", None),
    (CompressionType.NONE, "producer", None),
    (CompressionType.NONE, "uncompressed", None),
    (CompressionType.LZ4, "zstd", None),
    (CompressionType.LZ4, "gzip", None),
    (CompressionType.LZ4, "snappy", None),
    (CompressionType.LZ4, "uncompressed", None),
    (CompressionType.NONE, "zstd", None),
    (CompressionType.LZ4, "zstd", 1),
    (CompressionType.LZ4, "zstd", 19),
    (CompressionType.LZ4, "gzip", 1),
    (CompressionType.LZ4, "gzip", 9),
    (CompressionType.NONE, "lz4", 17),
    (CompressionType.LZ4, "lz4", 17),
)


def log_line(rng: random.Random, size: int = 200) -> bytes:
    words = [b"GET", b"POST", b"/api/v1/items", b"/home", b"200", b"404", b"user=", b"session=", b"ms"]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) + b" " + str(rng.randrange(10**6)).encode() + b" "
    return bytes(out[:size])


def producer_batch(codec: CompressionType, records: int) -> tuple[bytes, int]:
    rng = random.Random(7)
    builder = RecordBatchBuilder(codec)
    payload = 0
    for i in range(records):
        value = log_line(rng)
        payload += len(value)
        builder.append(1_700_000_000_000 + i, f"key-{i}".encode(), value)
    return builder.build(), payload


def measure(
    folder: Path, case: int, batch: bytes, topic_codec: str, level: int | None, appends: int
) -> tuple[float, int]:
    """The fastest round's CPU seconds for ``appends`` appends, and the stored size of one batch."""
    best = float("inf")
    stored = 0
    for round_ in range(ROUNDS):
        directory = folder / f"case{case}-{round_}-0"
        directory.mkdir()
        config = LogConfig(
            log_dirs=[str(folder)],
            expose="appended",
            flush_messages=10**9,
            flush_ms=10**9,
            compression_type=topic_codec,  # type: ignore[arg-type]
            **({f"compression_{topic_codec}_level": level} if level is not None else {}),  # type: ignore[arg-type]
        )
        log = Log(directory, config)
        try:
            start = time.thread_time()
            for _ in range(appends):
                log.append(batch, leader_epoch=0)
            best = min(best, time.thread_time() - start)
            stored = log.size_bytes // appends
        finally:
            log.close()
    return best, stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50, help="records per producer batch (default 50)")
    parser.add_argument("--appends", type=int, default=2000, help="appends per round (default 2000)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}; {args.records} records of 200 bytes per batch, best of {ROUNDS}")
    columns = ("producer codec", "topic compression.type", "level", "us per append", "MB/s of records")
    print(f"| {' | '.join(columns)} | stored bytes | ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    baseline = None
    with tempfile.TemporaryDirectory(prefix="topic-compression-") as tmp:
        for case, (codec, topic_codec, level) in enumerate(CASES):
            batch, payload = producer_batch(codec, args.records)
            seconds, stored = measure(Path(tmp), case, batch, topic_codec, level, args.appends)
            per_append_us = seconds / args.appends * 1e6
            baseline = baseline or per_append_us
            mb_per_s = payload * args.appends / seconds / 1e6
            print(
                f"| {codec.name.lower()} ({len(batch)} B) | {topic_codec} | "
                f"{'default' if level is None else level} | {per_append_us:.1f} | "
                f"{mb_per_s:.0f} | {stored} | {per_append_us / baseline:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
