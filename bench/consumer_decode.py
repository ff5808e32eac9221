"""Consumer value decoding: us per record for ``Consumer.poll_values``' decoding, old against new, one run.

Run from the repository root::

    .venv/bin/python bench/consumer_decode.py [--baseline-rev da4d3d6] [--repeats 7]

What it measures, all in this one process:

1. **Fetches.** Realistic 200 KiB fetch responses for one partition, CRC-checked and split into batches as
   the fetcher does (:func:`~broker.client.consumer.partition_records.parse_partition_records`): 200-byte
   values with one ``host`` header, no key, in record batches of 50 (the paper benchmark's consume phase), of
   1 and of 500; 200-byte values in zstd batches of 50; and values of 100-300 bytes in batches of 50. For
   each, the decoding that ``poll_values`` does with one fetch's batches in hand: the baseline
   (``--baseline-rev``'s ``broker/client/consumer/fetched_batch.py``, loaded from git:
   ``FetchedBatch.values()`` batch by batch, as ``poll_values`` did there) and now
   (:func:`~broker.client.consumer.fetched_batch.decode_values`). The outputs are checked to be equal. The
   fetch parsing itself (CRC included) is timed too, for scale. With ``--baseline-together`` the baseline
   is the revision's own ``decode_values`` instead: the old and the new ``poll_values`` decoding side by
   side in one process, over the same record modules, alternated (the figures are the best of three
   alternations of ``--repeats`` timings each).
2. **Break-even.** The Python walk against the vectorised decoder for N records per call, in one batch
   and in batches of 50: where :data:`~broker.record.record_walker.VECTORISED_MIN_RECORDS` belongs.

Every figure is the best of ``--repeats`` timings (the machine is shared), in us per record.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.client.consumer.consumer_record import ConsumerRecord
from broker.client.consumer.fetched_batch import FetchedBatch, PartitionValues, decode_values
from broker.client.consumer.partition_records import parse_partition_records
from broker.record.batch_header import HEADER_SIZE
from broker.record.compression import CompressionType, decompress
from broker.record.errors import CorruptRecordError
from broker.record.record_batch import RecordBatch
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.record_header import Header
from broker.record.record_walker import walk_values
from broker.record.topic_partition import TopicPartition
from broker.record.value_columns import decode_values_vectorised
from broker.record.varint import decode_varint

ROOT = Path(__file__).resolve().parent.parent
TP = TopicPartition("paper", 0)
FETCH_BYTES = 200 * 1024
#: The commit whose ``fetched_batch.py`` is the baseline: the one before the multi-batch decoder.
BASELINE_REV = "da4d3d6043ab7e71c4b3828c3d2806661cc7d2af"


def build_fetch(
    records_per_batch: int, codec: CompressionType, value_bytes: Callable[[int], int], fetch_bytes: int
) -> bytes:
    """Concatenated batches of about ``fetch_bytes`` (at least one batch), offsets from 0."""
    rng = random.Random(records_per_batch)
    parts: list[bytes] = []
    size = 0
    offset = 0
    while size < fetch_bytes or not parts:
        builder = RecordBatchBuilder(codec, base_offset=offset)
        for i in range(records_per_batch):
            value = bytes(rng.getrandbits(8) for _ in range(value_bytes(offset + i)))
            builder.append(1_700_000_000_000 + (offset + i) // 300, None, value, (("host", b"vm"),))
        batch = builder.build()
        if size + len(batch) > fetch_bytes and parts:
            break  # a fetch holds whole batches up to its byte limit
        parts.append(batch)
        size += len(batch)
        offset += records_per_batch
    return b"".join(parts)


def fetched_batches(records: bytes, batch_class: Any = FetchedBatch) -> list[Any]:
    parsed = parse_partition_records(records, TP, 0, check_crcs=True)
    assert parsed.error is None
    return [batch_class(TP, batch, 0) for batch in parsed.batches]


def best_seconds(run: Callable[[], object], repeats: int, min_seconds: float = 0.05) -> float:
    """Best time of one call, over ``repeats`` timings of enough calls to take ``min_seconds``."""
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            run()
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            break
        calls *= 2
    best = elapsed / calls
    for _ in range(repeats - 1):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - started) / calls)
    return best


def load_baseline(rev: str) -> ModuleType:
    """``broker/client/consumer/fetched_batch.py`` as of ``rev`` (``broker/client/fetched_batch.py`` before
    the client's split into folders), imported as its own module.

    That file imports the record format from its old home in ``broker.log`` and the consumer's record from
    ``broker.client.consumer_record``; while it loads, those module names point at stand-in modules holding
    the same objects from their homes now."""
    for home in ("broker/client/consumer/fetched_batch.py", "broker/client/fetched_batch.py"):
        shown = subprocess.run(
            ["git", "show", f"{rev}:{home}"], check=False, cwd=ROOT, capture_output=True, text=True
        )
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    old_homes = {
        "broker.log.compression": {"decompress": decompress, "CompressionType": CompressionType},
        "broker.log.errors": {"CorruptRecordError": CorruptRecordError},
        "broker.log.record_batch": {
            "HEADER_SIZE": HEADER_SIZE,
            "CompressionType": CompressionType,
            "RecordBatch": RecordBatch,
            "decode_varint": decode_varint,
        },
        "broker.log.topic_partition": {"TopicPartition": TopicPartition},
        "broker.client.consumer_record": {"ConsumerRecord": ConsumerRecord, "Header": Header},
    }
    saved = {name: sys.modules.get(name) for name in old_homes}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fetched_batch_baseline.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("fetched_batch_baseline", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load the baseline decoder from {path}")
        module = importlib.util.module_from_spec(spec)
        try:
            for name, names in old_homes.items():
                stand_in = ModuleType(name)
                stand_in.__dict__.update(names)
                sys.modules[name] = stand_in
            spec.loader.exec_module(module)
        finally:
            for name, previous in saved.items():
                if previous is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = previous
    return module


def as_pairs(chunks: Sequence[PartitionValues]) -> list[tuple[list[int], list[bytes | None]]]:
    return [(list(chunk.offsets), list(chunk.values)) for chunk in chunks]


def constant_200(_: int) -> int:
    return 200


CASES: list[tuple[str, int, CompressionType, Callable[[int], int]]] = [
    ("200 B values, batches of 50 (the paper's)", 50, CompressionType.NONE, constant_200),
    ("200 B values, batches of 1", 1, CompressionType.NONE, constant_200),
    ("200 B values, batches of 500", 500, CompressionType.NONE, constant_200),
    ("200 B values, zstd batches of 50", 50, CompressionType.ZSTD, constant_200),
    ("100-300 B values, batches of 50", 50, CompressionType.NONE, lambda i: 100 + (i * 7919) % 201),
]


def fetch_table(baseline: ModuleType, repeats: int, *, baseline_together: bool = False) -> None:
    kib = FETCH_BYTES // 1024
    print(f"1. One {kib} KiB fetch decoded as poll_values does, us per record (best of {repeats})")
    print(
        f"{'case':<44} {'records':>7} {'batches':>7} {'parse+CRC':>9} {'baseline':>9} {'now':>7} "
        f"{'speed-up':>8}"
    )
    for name, per_batch, codec, value_bytes in CASES:
        records = build_fetch(per_batch, codec, value_bytes, FETCH_BYTES)
        new_batches = fetched_batches(records)
        old_batches = fetched_batches(records, baseline.FetchedBatch)
        count = sum(b.record_count for b in new_batches)

        if baseline_together:
            old = partial(baseline.decode_values, old_batches)
        else:
            old = partial(decode_one_by_one, old_batches)
        new = partial(decode_values, new_batches)
        if as_pairs(old()) != as_pairs(new()):
            raise SystemExit(f"{name}: the new decoder's output differs from the baseline's")
        parse = best_seconds(partial(parse_partition_records, records, TP, 0, check_crcs=True), repeats)
        old_s = new_s = float("inf")
        for _ in range(3 if baseline_together else 1):  # alternated: a busy spell falls on both
            old_s = min(old_s, best_seconds(old, repeats))
            new_s = min(new_s, best_seconds(new, repeats))
        us = 1e6 / count
        print(
            f"{name:<44} {count:>7} {len(new_batches):>7} {parse * us:>9.3f} {old_s * us:>9.3f} "
            f"{new_s * us:>7.3f} {old_s / new_s:>7.1f}x"
        )


def paired_table(baseline: ModuleType, rounds: int) -> None:
    """The baseline's ``decode_values`` against this tree's, in rounds of about 20 ms a side, the order
    swapped every round: the median of the rounds' ratios (now / baseline) and their quartiles. The
    process's CPU time, not the wall clock: a round preempted by the shared machine's other work is not
    charged for the wait, and a busy spell falls on both sides of a round."""
    print(f"1b. now / baseline decode_values, paired rounds ({rounds}), median [quartiles]")
    for name, per_batch, codec, value_bytes in CASES:
        records = build_fetch(per_batch, codec, value_bytes, FETCH_BYTES)
        new = partial(decode_values, fetched_batches(records))
        old = partial(baseline.decode_values, fetched_batches(records, baseline.FetchedBatch))
        calls = 1
        while True:
            started = time.process_time()
            for _ in range(calls):
                new()
            if time.process_time() - started >= 0.02:
                break
            calls *= 2
        ratios: list[float] = []
        for round_number in range(rounds):
            seconds = {}
            for side, run in (
                (("old", old), ("new", new)) if round_number % 2 else (("new", new), ("old", old))
            ):
                started = time.process_time()
                for _ in range(calls):
                    run()
                seconds[side] = time.process_time() - started
            ratios.append(seconds["new"] / seconds["old"])
        ratios.sort()
        median, low, high = ratios[rounds // 2], ratios[rounds // 4], ratios[3 * rounds // 4]
        print(f"{name:<44} {median:6.3f} [{low:.3f}, {high:.3f}]")


def decode_one_by_one(batches: list[Any]) -> list[Any]:
    """What ``poll_values`` did before: each batch's ``values()`` in turn."""
    return [batch.values() for batch in batches]


def break_even_table(repeats: int) -> None:
    print()
    print("2. Python walk vs vectorised decoder, N records of 200 B per call, us per record")
    print(f"{'N':>6} {'python':>8} {'vector, 1 batch':>16} {'vector, batches of 50':>22}")
    for n in (16, 32, 48, 64, 100, 150, 200, 400, 1000):
        body = build_fetch(n, CompressionType.NONE, constant_200, 0)[HEADER_SIZE:]
        python = best_seconds(partial(walk_values, body, n, 0, 0), repeats)
        vector = best_seconds(partial(decode_values_vectorised, [body], [n], [0], [0]), repeats)
        many_text = ""
        if n % 50 == 0:
            batches = fetched_batches(build_fetch(50, CompressionType.NONE, constant_200, n * 250))[: n // 50]
            bodies = [b.batch.buffer[HEADER_SIZE:] for b in batches]
            bases = [b.base_offset for b in batches]
            many = best_seconds(
                partial(decode_values_vectorised, bodies, [50] * len(bodies), bases, bases), repeats
            )
            many_text = f"{many * 1e6 / n:.3f}"
        print(f"{n:>6} {python * 1e6 / n:>8.3f} {vector * 1e6 / n:>16.3f} {many_text:>22}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline-rev", default=BASELINE_REV, help="git revision of the baseline decoder")
    parser.add_argument("--repeats", type=int, default=7, help="timings per figure; the best counts")
    parser.add_argument(
        "--baseline-together",
        action="store_true",
        help="the baseline column is the baseline's decode_values (all the batches at once), not its "
        "FetchedBatch.values batch by batch: the old and the new poll_values decoding in one process",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only the baseline's decode_values against this tree's in ROUNDS paired rounds (median ratio)",
    )
    args = parser.parse_args(argv)
    if args.paired:
        paired_table(load_baseline(args.baseline_rev), args.paired)
        return 0
    fetch_table(load_baseline(args.baseline_rev), args.repeats, baseline_together=args.baseline_together)
    break_even_table(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
