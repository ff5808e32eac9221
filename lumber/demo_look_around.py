"""The end of ``lumber demo`` (:mod:`lumber.demo`): the step timings, how to look around the stack it
leaves running, and how to stop it."""

from __future__ import annotations

    def _look_around(self, spec: TrafficSpec, ok: bool) -> None:
        total = time.monotonic() - self.started
        self.say()
        self.say(("Done" if ok else "Finished with problems (above)") + f" in {elapsed_text(total)}:")
        self.say(
            "  " + ", ".join(f"{title.split(':')[0].lower()} {elapsed_text(s)}" for title, s in self.timings)
        )
        state = shlex.quote(self.shown_dir)
        lumber = self.lumber
        python = lumber.removesuffix("lumber") + "python" if lumber.endswith("/lumber") else "python"
        wh = f"{state}/warehouse"
        sql = f"SELECT * FROM '{wh}/click/*/*/*.parquet' LIMIT 5"  # noqa: S608 - printed, not run
        lines = [
            (f"{lumber} dev status", "what runs where"),
            (f"{lumber} topics describe page_view", "partitions: leaders, replicas, ISR"),
            (f"{lumber} topics elect-leaders", "leadership back to the preferred replicas"),
            (f"{lumber} schemas get page_view-value --version latest", "the evolved schema"),
            (f"{lumber} etl status", "committed offsets, lag, the last run"),
            (f"{lumber} audit verify --since={hour_text(spec.start_ms)}", "the audit again, by hour"),
            (f"{lumber} etl schedule --every 1h --delay 10m", "keep loading every hour (Ctrl-C stops)"),
            (f"ls {wh}/_lumber/hourly/manifests/", "the commits: one manifest per run"),
            (f'{python} -c "import duckdb; duckdb.sql(\\"{sql}\\").show()"', "any SQL on the output"),
        ]
        self.say()
        self.say("Look around (the stack keeps running):")
        self.say(f"  export LUMBER_CONFIG={state}/lumber.toml")
        width = max(len(command) for command, _ in lines[:-1])
        for command, what in lines:
            if len(command) > width:
                self.say(f"  # {what}:")
                self.say(f"  {command}")
            else:
                self.say(f"  {command:<{width}}   # {what}")
        self.say(
            f"  the audit report: {state}/audit.html; logs: {state}/*/*.log, Spark's: {state}/etl/logs/, "
            f"this demo's: {state}/{LOG_FILE}"
        )
        self.say()
        self.say(
            f"The web console (part of the stack): http://127.0.0.1:{self.base.dev.console_port}/  "
            "(brokers, topics and records, groups and their lag, schemas, loads, the audit heatmap)"
        )
        self.say()
        self.say("Stop the stack:")
        self.say(f"  {self._down_command()}   # add --purge to delete its data too")

