"""The hourly load job, run by spark-submit: exact offset ranges into hourly Parquet, committed atomically.

``lumber etl run`` builds the code zip and runs this for you, showing progress. By hand, from the
repository root (the zip carries Lumber's packages to the executors; ``spark.pyspark.python`` must be a
Python with Lumber's dependencies, at the same path on every node)::

    .venv/bin/lumber etl package --output .lumber/lumber-code.zip
    PYSPARK_PYTHON=$PWD/.venv/bin/python SPARK_LOCAL_IP=127.0.0.1 .venv/bin/spark-submit \\
        --master 'local[2]' --name lumber-load-hourly \\
        --conf spark.pyspark.python=$PWD/.venv/bin/python \\
        --conf spark.pyspark.driver.python=$PWD/.venv/bin/python \\
        --conf spark.sql.session.timeZone=UTC --conf spark.ui.enabled=false \\
        --py-files .lumber/lumber-code.zip \\
        jobs/load.py --config lumber.toml [--topics page_view,click] [--until-hour 2026-11-22T10]

On a cluster: ``--master spark://host:7077`` (or ``yarn``) and an ``hdfs://`` ``[load] warehouse_url``.
Progress goes to stdout as lines starting with ``lumber-load:``; the last one is the run's record as JSON.
Exit codes: 0 the run committed (or had nothing to load), 1 it failed (nothing was committed unless the
message says the commit point was passed; the next run repairs either way), 2 bad arguments or config,
3 another run of the job holds its lock.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import traceback
from collections.abc import Sequence

from pipeline.driver_output import (
    BAD_CONFIG_EXIT_CODE,
    FAILED_EXIT_CODE,
    LOCKED_EXIT_CODE,
    OK_EXIT_CODE,
    PROGRESS_PREFIX,
    RESULT_PREFIX,
)

_SAY_LOCK = threading.Lock()


def _say(line: str) -> None:
    # topics are staged by several threads at once: one write per line, under a lock, or lines interleave
    with _SAY_LOCK:
        sys.stdout.write(f"{PROGRESS_PREFIX}{line}\n")
        sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobs/load.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="lumber.toml (default: $LUMBER_CONFIG, else ./lumber.toml)")
    parser.add_argument("--topics", help="comma-separated topics to load (default: [load] topics_allow/deny)")
    parser.add_argument("--until-hour", help="load only records before this hour, YYYY-MM-DDTHH (UTC)")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession  # noqa: PLC0415 - argument errors need no JVM

    from lumber.config import load_config  # noqa: PLC0415
    from pipeline.errors import ConfigError, PipelineError  # noqa: PLC0415
    from pipeline.load_errors import JobLockedError  # noqa: PLC0415
    from pipeline.load_job import parse_until_hour, run_load  # noqa: PLC0415

    try:
        config = load_config(args.config)
        cutoff_ms = parse_until_hour(args.until_hour) if args.until_hour else None
    except (ConfigError, PipelineError) as exc:
        print(f"jobs/load.py: {exc}", file=sys.stderr)
        return BAD_CONFIG_EXIT_CODE
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else None
    _say("driver started; starting the Spark session")
    spark = (
        SparkSession.builder.appName(f"lumber-load-{config.load.job}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        outcome = run_load(spark, config, topics=topics, cutoff_ms=cutoff_ms, progress=_say)
    except JobLockedError as exc:
        print(f"jobs/load.py: {exc}", file=sys.stderr)
        return LOCKED_EXIT_CODE
    except Exception as exc:  # noqa: BLE001 - any failure ends the job with its message and exit code 1
        traceback.print_exc(file=sys.stderr)
        print(f"jobs/load.py: the run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED_EXIT_CODE
    finally:
        spark.stop()
    print(RESULT_PREFIX + json.dumps(outcome.record.to_json()), flush=True)
    return OK_EXIT_CODE


if __name__ == "__main__":
    from pipeline.parent_watch import watch_parent

    watch_parent()  # die with the JVM and with `lumber etl run`, even a SIGKILLed one (see there)
    sys.exit(main())
