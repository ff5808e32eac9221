"""The child process of the crash test: appends and flushes in a loop until it is SIGKILLed.

Usage: ``python -m tests.broker.log.crash_writer LOG_DIR SEED``. It prints ``ready <log end offset>``
once the log is open, then ``flushed <offset>`` after every flush returns: every offset below a printed
one is on disk, so must survive the kill.
"""

from __future__ import annotations

import random
import sys

from broker.config import LogConfig
from broker.log.log_manager import LogManager
from tests.broker.log.helpers import make_batch


def crash_config(log_dir: str) -> LogConfig:
    return LogConfig(
        log_dirs=[log_dir],
        segment_bytes=64 * 1024,
        index_interval_bytes=1024,
        flush_messages=10**9,
        flush_ms=10**9,
        expose="flushed",
        recovery_checkpoint_interval_ms=100,
    )


def main() -> None:
    log_dir, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    manager = LogManager(crash_config(log_dir))
    manager.start()
    log = manager.get_or_create_log("crash", 0)
    print(f"ready {log.log_end_offset}", flush=True)
    while True:
        for _ in range(rng.randint(1, 5)):
            log.append(make_batch(log.log_end_offset, rng.randint(1, 20)))
        print(f"flushed {log.flush()}", flush=True)


if __name__ == "__main__":
    main()
