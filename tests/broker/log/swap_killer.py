"""A log whose oldest segments a later one supersedes entirely (:func:`superseded_log`), and the child
process of the swap-kill test, which cleans it and stops inside the swap of the group those segments make.

Usage: ``python -m tests.broker.log.swap_killer ROOT STAGE``. It builds the log under ``ROOT``, starts a
cleaning pass, and at ``STAGE`` prints ``paused <STAGE>`` and sleeps (holding the log's lock) until it is
SIGKILLed: ``committed`` just after the cleaned files were renamed to ``.swap`` (step 2 of
:mod:`broker.log.segment_swap`), ``old-deleted`` just before they are renamed to their final names (the
old segments unlinked: step 3 done).

The layout (``KEYS`` keys, each round writes every key once, in batches of ``PER_BATCH``)::

    segment  0: round 0, offsets [0, 20)     \\ one cleaning group (their bytes fit segment_bytes):
    segment 20: round 1, offsets [20, 40)    /  every key superseded by round 2: cleans to nothing
    segment 40: round 2, offsets [40, 60)       a group of its own: every record stays
    segment 60: the active one, offset 60 ("tail")
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from broker.log.log import Log
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.log.helpers import BASE_TS, config

KEYS = 20
PER_BATCH = 10
ROUNDS = 3
#: Two rounds' segments fit (about 2,700 bytes each), three do not.
SEGMENT_BYTES = 6_000
TOPIC_DIR = "superseded-0"


def value(round_number: int, key: int) -> bytes:
    return f"round {round_number} of key {key} ".encode() * 5


def superseded_log(root: Path) -> Log:
    """Open the log of the module docstring under ``root`` (built when the folder is new)."""
    directory = root / TOPIC_DIR
    new = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    log = Log(
        directory,
        config(
            root,
            cleanup_policy="compact",
            segment_bytes=SEGMENT_BYTES,
            min_cleanable_dirty_ratio=0.0,
            cleaner_dedupe_buffer_bytes=1024 * 1024,
        ),
    )
    if new:
        for round_number in range(ROUNDS):
            for first in range(0, KEYS, PER_BATCH):
                builder = RecordBatchBuilder()
                for key in range(first, first + PER_BATCH):
                    builder.append(BASE_TS + round_number, f"k{key:02d}".encode(), value(round_number, key))
                log.append(builder.build(), leader_epoch=1)
            log.roll()
        builder = RecordBatchBuilder()
        builder.append(BASE_TS + ROUNDS, b"tail", b"t")
        log.append(builder.build(), leader_epoch=1)
        log.flush()
    return log


def _pause(stage: str) -> None:
    print(f"paused {stage}", flush=True)
    while True:
        time.sleep(60)


def main() -> None:
    import broker.log.log_cleanup as log_cleanup  # noqa: PLC0415 - the functions the pause wraps
    from broker.clock import system_clock_ms  # noqa: PLC0415
    from broker.log.log_cleaner import LogCleaner  # noqa: PLC0415
    from broker.log.log_cleaner_manager import LogCleanerManager  # noqa: PLC0415

    root, stage = Path(sys.argv[1]), sys.argv[2]
    log = superseded_log(root)
    patched: Any = log_cleanup
    commit_swap, finish_swap = patched.commit_swap, patched.finish_swap

    def paused_commit(directory: Path, base_offset: int) -> None:
        commit_swap(directory, base_offset)
        if stage == "committed":
            _pause(stage)

    def paused_finish(directory: Path, base_offset: int) -> None:
        if stage == "old-deleted":
            _pause(stage)
        finish_swap(directory, base_offset)

    patched.commit_swap, patched.finish_swap = paused_commit, paused_finish
    manager = LogCleanerManager([root], lambda: {root: [log]}, system_clock_ms)
    log_cleaner = LogCleaner(config(root, cleaner_dedupe_buffer_bytes=1024 * 1024), manager)
    log_cleaner.clean_once(log_cleaner.new_cleaner())
    print("not paused", flush=True)


if __name__ == "__main__":
    main()
