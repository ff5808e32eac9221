"""The hourly scheduler's entry point: ``lumber etl schedule`` as a script, for process managers and cron.

Runs the load of ``[load] job`` for every hour once its grace period has passed, catching up on missed hours
in order and retrying failures with backoff (:mod:`pipeline.scheduler` explains it all)::

    .venv/bin/python jobs/schedule.py --config /etc/lumber/lumber.toml --every 1h --delay 10m
    .venv/bin/python jobs/schedule.py --config /etc/lumber/lumber.toml --once   # cron

It is the same as ``lumber [--config FILE] etl schedule [options]``; each run is one ``spark-submit`` of
``jobs/load.py``. SIGTERM stops it after the running load (a second SIGTERM aborts that load). Exit codes:
0 stopped (or, with ``--once``, caught up), 1 gave up after ``--max-attempts``, 2 bad arguments or config.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lumber.cli import main as lumber


def main(argv: Sequence[str] | None = None) -> int:
    """``[--config FILE] [schedule options]`` -> ``lumber [--config FILE] etl schedule [options]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    config: list[str] = []
    if args[:1] == ["--config"] and len(args) > 1:
        config, args = args[:2], args[2:]
    elif args[:1] and args[0].startswith("--config="):
        config, args = args[:1], args[1:]
    return lumber([*config, "etl", "schedule", *args])


if __name__ == "__main__":
    sys.exit(main())
