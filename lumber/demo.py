"""``lumber demo`` (``make demo``): the whole system on one machine, end to end, in a few minutes.

Steps, each announced with the time since the start (the commands it runs are printed as ``$ lumber ...``
and are the real ones; their own progress streams through, and everything they print goes to
``<state_dir>/demo.log``):

1. **Stack**: ``lumber dev up --hdfs --brokers 3 --state-dir .lumber-demo``: ZooKeeper, HDFS (a NameNode
   and a DataNode, :mod:`lumber.dev.hdfs_server`), three brokers and the schema registry as background
   processes, with a config (``.lumber-demo/demo-base.toml``) whose warehouse is on that HDFS
   (``hdfs://127.0.0.1:<hdfs_namenode_port>/warehouse``; ``--warehouse file:<path>`` keeps it on local
   disk and starts no HDFS: the light run), takes page views' event time from ``timestamp_ms``, turns on the
   producers' audit and, unless the user's config sets one, takes a ZooKeeper session timeout of
   :data:`SESSION_TIMEOUT_MS` (a killed broker's partitions move once its session expires). The demo
   refuses if its stack is already up (stop it first); a state folder left by an earlier demo that is
   down is deleted (it is marked as the demo's own); any other non-empty folder is refused.
2. **Topics and schemas**: page_view (6 partitions), click and search (3 each) spread over the brokers,
   with ``min(brokers, 3)`` replicas and ``min.insync.replicas`` one less (at least 1), as ``dev up``
   made the audit topic; page_view v1, click and search registered.
3. **Traffic** (:mod:`lumber.demo_traffic`): the last ``hours`` whole hours before now, from four
   frontend hosts, one idempotent producer each with ``acks=all``, with the schema evolution page_view v1
   -> v2 half-way and a few malformed messages; closing the producers publishes their audit counts. With
   two brokers or more, a failover (:class:`BrokerFailover`) mid-traffic: once :data:`KILL_AFTER_PCT` %
   of the messages are handed to the producers, the leader of page_view-0 is killed (``kill -9``, by the
   pid the stack recorded); while traffic goes on, the demo prints who took over each partition it led
   and when, restarts it as ``dev up`` started it (recording the new pid in ``stack.json``, so ``dev
   down`` stops it) and waits until it is back in every ISR. The audit (step 5) must still find every
   window COMPLETE.
4. **Hourly loads**: ``lumber etl run --until-hour H`` (one spark-submit each) for every completed hour,
   oldest first: what ``lumber etl schedule`` does after downtime.
5. **Audit**: ``lumber audit verify`` over those hours, as a table and as ``.lumber-demo/audit.html``.
6. **Warehouse**: the Parquet layout as a tree, listed through :mod:`pipeline.fs` (from HDFS, over
   hdfs-native).
7. **Query**: DuckDB on the Parquet files as they are (on HDFS: read through fsspec with hdfs-native, no
   copy to local disk): page views per hour and host, v1 vs v2, load times; and the quarantined messages
   by reason. The loaded totals are checked against what was produced.
8. **Groups**: a ZooKeeper group and a Kafka-protocol group left consuming page_view, as stack services
   that ``dev down`` stops (:mod:`lumber.demo_groups`), so the groups pages, the lag exporter and ``groups
   lag`` have something to show.
9. How to look around, and how to stop the stack (it keeps running).

Exit code 0 when every step worked and the counts match, 1 otherwise (the stack stays up for a look; the
last lines say how to stop it).

Layout: the steps and their output here (:class:`Demo`); step 2's topics and schemas in
:mod:`lumber.demo_topics`; step 3's traffic in :mod:`lumber.demo_traffic` and its failover in
:mod:`lumber.demo_failover`; step 7's queries in :mod:`lumber.demo_query`; step 8's closing lines in
:mod:`lumber.demo_look_around`; the formatting of counts, times, tables and the warehouse tree in
:mod:`lumber.demo_text`; the error in :mod:`lumber.demo_errors`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import urlparse

from audit.audited_producer import audited_producer
from broker.client.producer.producer import Producer
from lumber.config import LumberConfig, dump_config, load_config
from lumber.demo_errors import DemoError
from lumber.demo_failover import BrokerFailover
from lumber.demo_groups import DemoGroups
from lumber.demo_look_around import look_around
from lumber.demo_query import query_warehouse
from lumber.demo_text import (
    clock_text,
    count_text,
    elapsed_text,
    hour_text,
    warehouse_tree,
)
from lumber.demo_topics import create_topics_and_schemas
from lumber.demo_traffic import HOUR_MS, TOPICS, TrafficProducer, TrafficSpec
from lumber.dev.dev_stack import DevStack
from pipeline.errors import PipelineError
from pipeline.fs import normalize_url, open_filesystem
from pipeline.load_config import LoadConfig
from schemas.client import SchemaRegistryClient
from schemas.serde import AvroSerde
from schemas.shipped import shipped_schema_text

#: ``--warehouse`` for the stack's own HDFS (the default).
EMBEDDED_HDFS = "hdfs"
MARKER_FILE = "LUMBER_DEMO"
BASE_CONFIG_FILE = "demo-base.toml"
LOG_FILE = "demo.log"
STEPS = 8
#: Replicas per partition of the demo's topics, at most (with fewer brokers: one per broker).
MAX_REPLICATION_FACTOR = 3
#: The demo stack's ZooKeeper session timeout unless the user's config sets one: a killed broker's
#: partitions move once its session expires (Kafka's zookeeper.session.timeout.ms before 2.5).
SESSION_TIMEOUT_MS = 6_000
#: The failover's kill -9 comes once this share of the traffic was handed to the producers.
KILL_AFTER_PCT = 40
#: A child's log line at DEBUG/INFO level (``lumber``'s logging format): kept out of the terminal.
_CHATTER = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} (?:DEBUG|INFO) ")


@dataclass(frozen=True)
class DemoOptions:
    """What ``lumber demo`` was asked for."""

    state_dir: Path = Path(".lumber-demo")
    brokers: int = 3
    hours: int = 3
    spark_master: str = "local[2]"
    #: :data:`EMBEDDED_HDFS` (the stack's own HDFS, ``dev up --hdfs``), or the warehouse's URL (``file:...``
    #: or a path: the light run without HDFS; any ``hdfs://`` cluster)
    warehouse: str = "hdfs"
    #: ``lumber`` as the user types it (shown in the printed commands)
    lumber: str = "lumber"
    #: added to the environment of the ``lumber`` commands the demo runs (how to print ``lumber``)
    child_env: Mapping[str, str] = dataclasses.field(default_factory=dict)


class Demo:
    """One run of the demo (see the module docstring). Not thread-safe."""

    def __init__(
        self,
        options: DemoOptions,
        base: LumberConfig,
        *,
        out: TextIO | None = None,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.options = options
        self.base = base
        self.out = out if out is not None else sys.stdout
        self.now_ms = now_ms
        self.state_dir = options.state_dir.absolute()
        self.shown_dir = self._shown(options.state_dir)
        self.started = time.monotonic()
        self.timings: list[tuple[str, float]] = []
        self._log: TextIO | None = None
        self._step = 0
        self._title = ""
        self._step_started = self.started
        self._say_lock = threading.Lock()  # the failover's thread says things too
        self.warehouse_url = ""  # the stack's [load] warehouse_url, once it is up

    # -- output --------------------------------------------------------------------------------------------

    @staticmethod
    def _shown(path: Path) -> str:
        """``path`` as the user should type it: relative to the working directory when below it."""
        try:
            return str(path.absolute().relative_to(Path.cwd()))
        except ValueError:
            return str(path)

    def say(self, line: str = "") -> None:
        with self._say_lock:
            print(line, file=self.out, flush=True)
            if self._log is not None:
                self._log.write(line + "\n")
                self._log.flush()

    def step(self, name: str, title: str) -> None:
        """Start the next step: ``name`` for the timings at the end, ``title`` for the header."""
        now = time.monotonic()
        if self._step:
            self.timings.append((self._title, now - self._step_started))
        self._step += 1
        self._title = name
        self._step_started = now
        self.say()
        self.say(f"[{self._step}/{STEPS}] {title}   (+{elapsed_text(now - self.started)})")

    def _finish_step(self) -> None:
        if self._step:
            self.timings.append((self._title, time.monotonic() - self._step_started))
            self._step = 0

    @property
    def lumber(self) -> str:
        return self.options.lumber

    @property
    def replication_factor(self) -> int:
        """Replicas per partition of the demo's topics: ``min(brokers, 3)``."""
        return max(1, min(self.options.brokers, MAX_REPLICATION_FACTOR))

    @property
    def base_config_path(self) -> Path:
        """The stack's base config (``demo-base.toml`` in the state folder)."""
        return self.state_dir / BASE_CONFIG_FILE

    def child_env(self, config_path: Path) -> dict[str, str]:
        """The environment of the processes the demo starts (``lumber`` commands, a restarted broker)."""
        env = {
            **os.environ,
            **self.options.child_env,
            "LUMBER_CONFIG": str(config_path),
            "PYTHONUNBUFFERED": "1",
        }
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return env

    def shown_command(self, argv: Sequence[str]) -> str:
        """A ``python -m lumber ...`` argv as the user would type it (``lumber ...``, paths below the
        working directory relative)."""
        args = list(argv[3:]) if list(argv[1:3]) == ["-m", "lumber"] else list(argv)
        shown = shlex.join([self.lumber, *args])
        return shown.replace(str(self.state_dir), self.shown_dir)

    def _lumber(self, args: Sequence[str], config_path: Path) -> int:
        """Run ``lumber ARGS`` with ``LUMBER_CONFIG=config_path``, printing its output as it comes (its
        INFO chatter only to the log). Returns its exit code."""
        self.say(f"  $ {self.lumber} {shlex.join(args)}")
        env = self.child_env(config_path)
        process = subprocess.Popen(
            [sys.executable, "-m", "lumber", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            bufsize=1,
        )
        if process.stdout is None:
            process.kill()
            raise DemoError(f"could not read the output of `{self.lumber} {args[0]}`")
        try:
            for raw in process.stdout:
                line = raw.rstrip("\n")
                if self._log is not None:
                    self._log.write(line + "\n")
                if not _CHATTER.match(line):
                    print(f"    {line}", file=self.out, flush=True)
            return process.wait()
        except BaseException:
            process.terminate()
            process.wait(timeout=60)
            raise

    # -- the steps -----------------------------------------------------------------------------------------

    def run(self) -> int:
        """Run every step; returns the exit code (see the module docstring)."""
        stack_up = False
        ok = True
        try:
            self._prepare_state_dir()
            self._log = (self.state_dir / LOG_FILE).open("w", encoding="utf-8")
            self.say(
                f"Lumber demo: a {self.options.brokers}-broker stack, {self.options.hours} hour(s) of "
                f"tracking traffic, hourly Spark loads, the audit and a query. State: {self.shown_dir}/"
            )
            config_path = self._start_stack()
            stack_up = True
            stack = load_config(config_path, env={})
            self.warehouse_url = stack.load.warehouse_url
            spec = self._traffic_spec()
            ids = self._topics_and_schemas(stack)
            expected = self._produce(stack, spec, ids)
            ok &= self._load(spec, config_path)
            ok &= self._audit(spec, config_path)
            self._tree(stack.load)
            ok &= self._query(stack.load.warehouse_url, spec, ids, expected)
            self._groups(stack, config_path)
            self._finish_step()
            self._look_around(spec, ok)
        except (DemoError, PipelineError) as exc:
            self._finish_step()
            self.say()
            self.say(f"demo: {exc}")
            ok = False
        except KeyboardInterrupt:
            self._finish_step()
            self.say()
            self.say("demo: interrupted")
            ok = False
        except Exception as exc:  # noqa: BLE001 - the driver's top: say what failed, then how to stop
            self._finish_step()
            if self._log is not None:
                traceback.print_exc(file=self._log)
            self.say()
            self.say(f"demo: failed: {type(exc).__name__}: {exc} (traceback in {self.shown_dir}/{LOG_FILE})")
            ok = False
        finally:
            if not ok and stack_up:
                self.say(f"The stack is still running; stop it with:  {self._down_command()}")
            if self._log is not None:
                self._log.close()
                self._log = None
        return 0 if ok else 1

    def _down_command(self) -> str:
        return f"{self.lumber} dev down --state-dir {shlex.quote(self.shown_dir)}"

    def _prepare_state_dir(self) -> None:
        """Refuse a running demo stack or a foreign folder; clear an old demo's (see the module doc)."""
        stack = DevStack(self.base, self.state_dir)
        running = [s for s in stack.read_state() if s.process.is_running()]
        if running:
            raise DemoError(
                f"the demo stack in {self.shown_dir} is already up "
                f"({', '.join(s.name for s in running)}). Look around with "
                f"`export LUMBER_CONFIG={self.shown_dir}/lumber.toml`, or stop it with "
                f"`{self._down_command()}` and run the demo again (it starts from scratch)"
            )
        if self.state_dir.exists() and any(self.state_dir.iterdir()):
            if not (self.state_dir / MARKER_FILE).is_file():
                raise DemoError(
                    f"{self.shown_dir} exists and is not a demo's state folder (no {MARKER_FILE} file in "
                    "it); choose another --state-dir or remove it"
                )
            shutil.rmtree(self.state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / MARKER_FILE).write_text(
            "This folder belongs to `lumber demo`, which deletes it when it starts again.\n"
        )

    def _start_stack(self) -> Path:
        hdfs = self.options.warehouse == EMBEDDED_HDFS
        self.step(
            "stack",
            "Starting the stack: ZooKeeper, "
            + ("HDFS (a NameNode and a DataNode), " if hdfs else "")
            + "brokers, schema registry, lag exporter, web console",
        )
        base = self.base
        registry_url = f"http://127.0.0.1:{base.dev.registry_port}"
        # the file below sets every key, so `dev up` would take its defaults as the user's choices: what it
        # would choose itself (a replication factor of min(brokers, 3)) is written out here
        zookeeper, broker = base.zookeeper, base.broker
        if "session_timeout_ms" not in zookeeper.model_fields_set:
            zookeeper = zookeeper.replace(session_timeout_ms=SESSION_TIMEOUT_MS)
        if "default_replication_factor" not in broker.model_fields_set:
            broker = broker.replace(default_replication_factor=self.replication_factor)
        demo = base.replace(
            zookeeper=zookeeper,
            broker=broker,
            dev=base.dev.replace(state_dir=str(self.state_dir), brokers=self.options.brokers, hdfs=hdfs),
            registry=base.registry.replace(url=registry_url),
            producer=base.producer.replace(audit_interval_ms=2000),
            load=base.load.replace(
                # with HDFS, `dev up` points warehouse_url at it
                warehouse_url=base.load.warehouse_url if hdfs else _warehouse_url(self.options.warehouse),
                event_time_fields=[f"{topic}=timestamp_ms" for topic in TOPICS],
            ),
            spark=base.spark.replace(master=self.options.spark_master),
        )
        base_path = self.state_dir / BASE_CONFIG_FILE
        base_path.write_text(
            "# `lumber demo`'s settings for `lumber dev up`, which writes the stack's lumber.toml from them\n"
            + dump_config(demo)
        )
        code = self._lumber(
            [
                "dev",
                "up",
                *(["--hdfs"] if hdfs else []),
                "--brokers",
                str(self.options.brokers),
                "--state-dir",
                self.shown_dir,
            ],
            base_path,
        )
        config_path = self.state_dir / "lumber.toml"
        if code != 0:  # `dev up` stopped what it had started
            raise DemoError(
                f"`{self.lumber} dev up` failed (exit {code}; its output is above). If a port is taken, free "
                "it or move the demo: LUMBER_DEV__ZOOKEEPER_PORT, LUMBER_DEV__BROKER_PORT, "
                "LUMBER_DEV__BROKER_METRICS_PORT, LUMBER_DEV__REGISTRY_PORT, LUMBER_DEV__CONSOLE_PORT, "
                "LUMBER_DEV__LAG_EXPORTER_PORT, LUMBER_DEV__HDFS_NAMENODE_PORT (and the other "
                "LUMBER_DEV__HDFS_*_PORT)"
            )
        self.say(f"  every command below runs with  export LUMBER_CONFIG={self.shown_dir}/lumber.toml")
        return config_path

    def _traffic_spec(self) -> TrafficSpec:
        now = self.now_ms()
        this_hour = now - now % HOUR_MS
        return TrafficSpec(start_ms=this_hour - self.options.hours * HOUR_MS, hours=self.options.hours)

    def _topics_and_schemas(self, stack: LumberConfig) -> dict[str, int]:
        self.step("topics and schemas", "Creating topics and registering the schemas")
        return create_topics_and_schemas(self.say, stack, self.replication_factor, self.lumber)

    def _produce(self, stack: LumberConfig, spec: TrafficSpec, ids: dict[str, int]) -> dict[str, int]:
        hosts = [h.name for h in spec.hosts]
        self.step(
            "traffic",
            f"Producing {spec.hours} hour(s) of tracking traffic "
            f"({clock_text(spec.start_ms)}-{clock_text(spec.end_ms)} UTC) from {len(hosts)} hosts, "
            "one producer each" + (", and a broker killed mid-way" if self.replication_factor > 1 else ""),
        )
        registry = SchemaRegistryClient.from_config(stack.registry)
        producers: dict[str, Producer] = {}
        expected: dict[str, int] = dict.fromkeys(TOPICS, 0)
        messages = spec.total()
        failover = (
            BrokerFailover(self, stack, [*TOPICS, stack.audit.topic], messages * KILL_AFTER_PCT // 100)
            if self.replication_factor > 1
            else None
        )
        try:
            for host in hosts:
                settings = stack.producer.replace(
                    host_name=host,
                    client_id=f"frontend-{host}",
                    linger_ms=20,
                    acks="all",
                    enable_idempotence=True,  # a batch retried on the new leader is stored once
                )
                producers[host] = audited_producer(
                    settings, zookeeper_connect=stack.zookeeper.connect, registry=stack.registry
                )

            def register_v2() -> int:
                return registry.register("page_view-value", shipped_schema_text("page_view_v2"))

            def switched(schema_id: int) -> None:
                self.say(
                    f"  {clock_text(spec.evolution_ms)}  schema evolution: page_view-value version 2 "
                    "registered "
                    f"(id {schema_id}, adds load_time_ms; the registry checked it is BACKWARD compatible); "
                    "every host now writes v2"
                )

            def on_sent(before: int, handed: int) -> None:
                if failover is not None:
                    failover.maybe_kill(before + handed, messages)

            sender = TrafficProducer(spec, producers, AvroSerde(registry), ids, register_v2)
            handed = 0
            for index in range(spec.hours):
                sent = sender.send_hour(index, on_switch=switched, on_sent=functools.partial(on_sent, handed))
                handed += sent.total
                for topic in TOPICS:
                    expected[topic] += sent.by_topic[topic]
                schemas = (
                    f"v1 {count_text(sent.by_schema['page_view'])} / "
                    f"v2 {count_text(sent.by_schema['page_view_v2'])}"
                )
                self.say(
                    f"  {clock_text(sent.start_ms)}-{clock_text(sent.start_ms + HOUR_MS)}  "
                    f"page_view {count_text(sent.by_topic['page_view']):>6} ({schemas})  "
                    f"click {count_text(sent.by_topic['click']):>5}  "
                    f"search {count_text(sent.by_topic['search']):>5}"
                    + (
                        f"  + {sent.malformed} malformed page views from {spec.malformed_host} "
                        "(a bad deploy: wrong magic byte, unknown schema id, truncated Avro, JSON)"
                        if sent.malformed
                        else ""
                    )
                )
            if failover is not None:
                failover.wait()
        finally:
            for producer in producers.values():
                producer.close()
            registry.close()
            if failover is not None:
                failover.close()
        total = sum(expected.values())
        confirmed = (
            f"by every in-sync replica (acks=all, at least {max(1, self.replication_factor - 1)} copies)"
            if self.replication_factor > 1
            else "by the broker"
        )
        self.say(
            f"  {count_text(total)} messages confirmed {confirmed}; closing the producers published their "
            f"audit counts (per topic, host and 10-minute window) to the {stack.audit.topic} topic"
        )
        return expected

    def _load(self, spec: TrafficSpec, config_path: Path) -> bool:
        self.step(
            "loads", f"Loading each completed hour into Parquet: {spec.hours} spark-submit runs, oldest first"
        )
        self.say(f"  (what `{self.lumber} etl schedule --every 1h --delay 10m` does after downtime)")
        for index in range(spec.hours):
            until = spec.hour_start_ms(index) + HOUR_MS
            self.say()
            code = self._lumber(["etl", "run", "--until-hour", hour_text(until)], config_path)
            if code != 0:
                raise DemoError(
                    f"the load up to {hour_text(until)} failed (exit {code}); see its output above"
                )
        return True

    def _audit(self, spec: TrafficSpec, config_path: Path) -> bool:
        self.step("audit", "Auditing: what the producers counted against what the loads committed")
        html = self.state_dir / "audit.html"
        args = [
            "audit",
            "verify",
            f"--since={hour_text(spec.start_ms)}",
            f"--until={hour_text(spec.end_ms)}",
            "--window",
            "1h",
            "--html",
            self._shown(html),
        ]
        code = self._lumber(args, config_path)
        if code == 0:
            self.say(f"  every hour is COMPLETE; the report with charts: {self._shown(html)}")
            return True
        if code == 1:  # INCOMPLETE windows, or the audit topic could not be read: its output says which
            self.say("  the audit did not find every hour COMPLETE (above)")
        else:
            self.say(f"  `{self.lumber} audit verify` did not run (exit {code})")
        return False

    def _tree(self, load: LoadConfig) -> None:
        where = "HDFS" if load.warehouse_url.startswith("hdfs:") else "local disk"
        self.step("tree", f"The warehouse on {where}: Parquet files by topic, event-time day and hour")
        fs = open_filesystem(load.warehouse_url, webhdfs_url=load.webhdfs_url, hdfs_client=load.hdfs_client)
        self.say(f"  {self._shown_url(fs.root)}/")
        for line in warehouse_tree(fs):
            self.say(f"  {line}")

    def _query(
        self, warehouse_url: str, spec: TrafficSpec, ids: Mapping[str, int], expected: Mapping[str, int]
    ) -> bool:
        on_hdfs = warehouse_url.startswith("hdfs:")
        self.step(
            "query",
            "Querying the Parquet files as they are, with DuckDB"
            + (" (read from HDFS through fsspec and hdfs-native)" if on_hdfs else ""),
        )
        return query_warehouse(self.say, warehouse_url, self._shown_url(warehouse_url), spec, ids, expected)

    def _shown_url(self, url: str) -> str:
        """A warehouse URL as the user reads it: a local one as a path (:meth:`_shown`)."""
        parsed = urlparse(url)
        if parsed.scheme == "hdfs":
            return url
        return self._shown(Path(parsed.path if parsed.scheme == "file" else url))

    def _groups(self, stack: LumberConfig, config_path: Path) -> None:
        self.step(
            "groups", "Consumer groups left consuming page_view (one of each kind; dev down stops them)"
        )
        argv = [sys.executable, "-m", "lumber"]
        DemoGroups(stack, self.state_dir, argv, self.child_env(config_path)).start(self.say)
        self._lumber(["groups", "list"], config_path)

    def _look_around(self, spec: TrafficSpec, ok: bool) -> None:
        look_around(
            self.say,
            spec,
            ok,
            lumber=self.lumber,
            shown_dir=self.shown_dir,
            warehouse=self._shown_url(self.warehouse_url),
            console_port=self.base.dev.console_port,
            down_command=self._down_command(),
            log_file=LOG_FILE,
            timings=self.timings,
            total=time.monotonic() - self.started,
        )


def _warehouse_url(given: str) -> str:
    """``--warehouse`` as an absolute URL (``file:rel/path`` and ``rel/path`` made absolute)."""
    if given.startswith("file:") and not given.startswith("file:/"):
        given = given.removeprefix("file:")
    return normalize_url(given)


def run_demo(options: DemoOptions, base: LumberConfig, out: TextIO | None = None) -> int:
    """Run the demo (see the module docstring); returns its exit code."""
    return Demo(options, base, out=out).run()
