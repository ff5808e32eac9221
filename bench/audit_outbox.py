"""The cost of the audit's persistent outbox (issue 24): counting with a journal against counting in memory.

Run from the repository root::

    .venv/bin/python bench/audit_outbox.py              # --batches 4000 --records 100 --rounds 5
    .venv/bin/python bench/audit_outbox.py --quick      # smoke run

In one process, no broker: the journal's cost is the counter's own (one JSON entry and one ``write()`` per
batch, under the counter's lock), and the brokers' round trips would only hide it. Each round measures four
cases one after the other on the same batches:

* **producer tier**: :meth:`AuditCounter.count_batch` of N acknowledged :class:`ProducerBatch` es of R records
  (timestamps over two windows), with a take every 200 batches as the emitter's interval would, and the
  takes confirmed (``published``): in memory (no journal) and with a journal in a temporary directory;
* **mirror tier**: :meth:`AuditCounter.count_offsets` of the same number of records as (offset, timestamp,
  size) runs of R, in memory and with a journal (offset ranges journaled with the counts).

It prints the median records per second of each case over ``--rounds`` and the journal's ratio to memory
(1.0 = free), and a Markdown line for ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.audit_counter import AuditCounter
from audit.audit_journal import AuditJournal, journal_path
from broker.client.producer.producer_batch import ProducerBatch
from broker.record.compression import CompressionType

W = 600_000
T0 = 1_795_334_400_000
TAKE_EVERY = 200


def batches(count: int, records: int) -> list[ProducerBatch]:
    out = []
    for n in range(count):
        batch = ProducerBatch("page_view", n % 3, CompressionType.NONE, time.monotonic(), keep_records=True)
        for i in range(records):
            assert batch.append(T0 + (n * records + i) * 37 % (2 * W), None, b"x" * 200, b"", 1 << 24) >= 0
        batch.build()
        out.append(batch)
    return out


def counter(journal_dir: Path | None, tier: str) -> AuditCounter:
    journal = None if journal_dir is None else AuditJournal.open(journal_path(journal_dir, tier, "bench"))
    return AuditCounter(
        host="bench",
        counter="bench-1",
        window_ms=W,
        audit_topic="_audit",
        tier="producer" if tier == "producer" else "mirror",
        journal=journal,
    )


def run_producer(found: list[ProducerBatch], journal_dir: Path | None) -> float:
    audit = counter(journal_dir, "producer")
    started = time.perf_counter()
    for n, batch in enumerate(found, 1):
        audit.count_batch(batch, None)
        if n % TAKE_EVERY == 0:
            events = audit.take()
            audit.published(events[0].sequence)
    elapsed = time.perf_counter() - started
    if audit.journal is not None:
        audit.journal.close()
    return sum(b.count for b in found) / elapsed


def run_mirror(count: int, records: int, journal_dir: Path | None) -> float:
    audit = counter(journal_dir, "mirror")
    runs = [
        [(n * records + i, T0 + (n * records + i) * 37 % (2 * W), 200) for i in range(records)]
        for n in range(count)
    ]
    started = time.perf_counter()
    for n, run in enumerate(runs, 1):
        audit.count_offsets("page_view", 0, run)
        if n % TAKE_EVERY == 0:
            events = audit.take()
            audit.published(events[0].sequence)
    elapsed = time.perf_counter() - started
    if audit.journal is not None:
        audit.journal.close()
    return count * records / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 400 batches, 1 round")
    parser.add_argument("--batches", type=int, default=4000)
    parser.add_argument("--records", type=int, default=100, help="records per batch")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    count, rounds = (400, 1) if args.quick else (args.batches, args.rounds)
    found = batches(count, args.records)
    results: dict[str, list[float]] = {
        k: [] for k in ("producer", "producer+journal", "mirror", "mirror+journal")
    }
    for round_ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="audit-outbox-bench-") as tmp:
            results["producer"].append(run_producer(found, None))
            results["producer+journal"].append(run_producer(found, Path(tmp) / "p"))
            results["mirror"].append(run_mirror(count, args.records, None))
            results["mirror+journal"].append(run_mirror(count, args.records, Path(tmp) / "m"))
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in results.items()))
    median = {k: statistics.median(v) for k, v in results.items()}
    producer_ratio = median["producer+journal"] / median["producer"]
    mirror_ratio = median["mirror+journal"] / median["mirror"]
    print(
        f"median records/s over {rounds} rounds of {count} batches of {args.records}: "
        + ", ".join(f"{k} {v:,.0f}" for k, v in median.items())
    )
    print(f"journal / memory: producer tier {producer_ratio:.2f}, mirror tier {mirror_ratio:.2f}")
    print(
        f"| {count} x {args.records} records | {median['producer']:,.0f} | "
        f"{median['producer+journal']:,.0f} | {producer_ratio:.2f} | {median['mirror']:,.0f} | "
        f"{median['mirror+journal']:,.0f} | {mirror_ratio:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
