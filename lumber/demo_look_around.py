"""The end of ``lumber demo`` (:mod:`lumber.demo`): the step timings, how to look around the stack it
leaves running, and how to stop it."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from lumber.demo_text import elapsed_text, hour_text
from lumber.demo_traffic import TrafficSpec


def look_around(
    say: Callable[[str], None],
    spec: TrafficSpec,
    ok: bool,
    *,
    lumber: str,
    shown_dir: str,
    warehouse: str,
    console_port: int,
    down_command: str,
    log_file: str,
    timings: Sequence[tuple[str, float]],
    total: float,
) -> None:
    """Print the closing lines with ``say``: done (``ok``) or not in ``total`` seconds, the ``timings`` of
    the steps, commands to look around (``lumber`` as the user types it, the state folder ``shown_dir``),
    the warehouse ``warehouse`` (a local path as shown, or an ``hdfs://`` URL), the web console on
    ``console_port``, the demo's log ``log_file`` and ``down_command``."""
    say("")
    say(("Done" if ok else "Finished with problems (above)") + f" in {elapsed_text(total)}:")
    say("  " + ", ".join(f"{title.split(':')[0].lower()} {elapsed_text(s)}" for title, s in timings))
    state = shlex.quote(shown_dir)
    python = lumber.removesuffix("lumber") + "python" if lumber.endswith("/lumber") else "python"
    wh = warehouse if warehouse.startswith("hdfs:") else shlex.quote(warehouse)
    sql = f"SELECT * FROM '{wh}/click/*/*/*.parquet' LIMIT 5"  # noqa: S608 - printed, not run
    if warehouse.startswith("hdfs:"):
        bin_dir = lumber.removesuffix("lumber") if lumber.endswith("/lumber") else ""
        listing = f"{bin_dir}hdfsn ls {wh}/_lumber/hourly/manifests/"
        host_port = warehouse.split("/")[2]
        host, port = host_port.rsplit(":", 1)
        query = (
            f'{python} -c "import duckdb; from pipeline.native_hdfs_fsspec import '
            f"SharedReadHdfsFileSystem as H; c = duckdb.connect(); "
            f"c.register_filesystem(H(host='{host}', port={port})); "
            f'c.sql(\\"{sql}\\").show()"'
        )
    else:
        listing = f"ls {wh}/_lumber/hourly/manifests/"
        query = f'{python} -c "import duckdb; duckdb.sql(\\"{sql}\\").show()"'
    lines = [
        (f"{lumber} dev status", "what runs where"),
        (f"{lumber} topics describe page_view", "partitions: leaders, replicas, ISR"),
        (f"{lumber} topics elect-leaders", "leadership back to the preferred replicas"),
        (f"{lumber} schemas get page_view-value --version latest", "the evolved schema"),
        (f"{lumber} etl status", "committed offsets, lag, the last run"),
        (f"{lumber} audit verify --since={hour_text(spec.start_ms)}", "the audit again, by hour"),
        (f"{lumber} etl schedule --every 1h --delay 10m", "keep loading every hour (Ctrl-C stops)"),
        (listing, "the commits: one manifest per run"),
        (query, "any SQL on the output"),
    ]
    say("")
    say("Look around (the stack keeps running):")
    say(f"  export LUMBER_CONFIG={state}/lumber.toml")
    width = max(len(command) for command, _ in lines[:-1])
    for command, what in lines:
        if len(command) > width:
            say(f"  # {what}:")
            say(f"  {command}")
        else:
            say(f"  {command:<{width}}   # {what}")
    say(
        f"  the audit report: {state}/audit.html; logs: {state}/*/*.log, Spark's: {state}/etl/logs/, "
        f"this demo's: {state}/{log_file}"
    )
    say("")
    say(
        f"The web console (part of the stack): http://127.0.0.1:{console_port}/  "
        "(brokers, topics and records, groups and their lag, schemas, loads, the audit heatmap)"
    )
    say("")
    say("Stop the stack:")
    say(f"  {down_command}   # add --purge to delete its data too")
