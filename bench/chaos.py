"""The chaos run (issue 24): the whole pipeline under random faults, with the audit as the oracle.

Run from the repository root (root is needed for the full-disk faults' tmpfs; without it they are skipped
and the report says so)::

    .venv/bin/python bench/chaos.py --minutes 3 --seed 7     # 3 minutes of faults, then the oracle
    .venv/bin/python bench/chaos.py --minutes 30 --seed 2026 --hour 2m

It prints a report (every fault with its recovery time, the loads, the audit's totals, the oracle's
checks) and exits 0 only if nothing acknowledged was lost or duplicated; 1 otherwise.

**The system under test**, every process started here on 127.0.0.1 and stopped here by pid:

* the *live* cluster: ZooKeeper, three brokers and the schema registry (``lumber dev up``'s stack,
  :class:`lumber.dev.dev_stack.DevStack`), topics ``page_view`` and ``click`` (3 partitions, replication
  factor 3, ``min.insync.replicas=2``) and ``_audit``;
* four producers (``bench/chaos_roles.py producer``: audited, idempotent, ``acks=all``, each with its own
  log of what it was acknowledged);
* two consumer groups of Lumber's ``GroupConsumer`` (``bench/chaos_roles.py consumer``), each in a process
  of its own reading both topics and logging every offset it read: a ZooKeeper group (the paper's) and a
  Kafka-protocol group (``[group] protocol = "kafka"``: JoinGroup / SyncGroup / OffsetCommit through the
  brokers' group coordinator and ``__consumer_offsets``, RF 3);
* the hourly load: ``lumber etl schedule``'s :class:`~pipeline.scheduler.Scheduler` with its production
  runner (one ``spark-submit`` per hour, ``local[2,4]``: task attempts are retried) on a *virtual clock*
  whose hour lasts ``--hour`` of wall time (``bench/chaos_roles.py`` explains it: the producers stamp
  their records with the same clock, so every load cuts at a whole hour of record time, as in production);
* the mirror (``lumber mirror``) to a second cluster (ZooKeeper, one broker, a registry of its own which
  nothing uses: the audit events use the live one), copying ``page_view``, ``click`` and ``_audit``.

**Faults**, drawn from a seeded schedule (``--seed``), at most ``--concurrent`` (2) at a time, each healed
after a random interval (a kind needing a running load waits for one, bounded): ``kill -9`` of a broker,
the registry, a producer, the consumer, the mirror, the load's driver (the Python driver of the running
``spark-submit``) or a Spark task (a PySpark worker); ``SIGSTOP`` of a broker or of the consumer past its
ZooKeeper session, then ``SIGCONT``; ZooKeeper ``kill -9``-ed and restarted; a full disk (broker 2's log
dir and the warehouse are each a small tmpfs; the fault fills it, then frees it; the broker, whose log
goes offline after a failed write as Kafka's log dir does, is restarted; while its log dir is full, the run
first makes it the leader of ``chaos-probe``-0 (a topic only these probes use; broker 2 is that
partition's preferred replica), produces 64 KiB once to each ``chaos-probe`` partition it leads, which
must be refused (KAFKA_STORAGE_ERROR) unless its leadership has moved, then reads back from it the last
records acknowledged before the fault of every partition it leads, which must all come back); and the
registry killed for 8-20 s while a load's tasks run (once the driver has printed ``planned:`` and Spark
runs a task: the driver resolves the schemas while planning, the tasks fetch each writer schema once per
Python worker; the fault's line counts the load's failed task attempts, which Spark retried, the
scheduler's failed runs, and the quarantined rows, which the oracle requires to be 0). The recovery time
of a fault is measured from its healing step (restart, SIGCONT, space freed) until the part is healthy
again: a broker back in every ISR, ZooKeeper with all brokers registered and every partition led with
an ISR of 2 or more, the registry answering, a producer's or the consumer's log growing again, the
mirror's target log ends growing, a load committed.

**The oracle**, once the faults are over and healed: the producers stop (a clean close publishes their
last audit counts); the consumer and the mirror must reach the source log ends; the scheduler stops and
one last ``lumber etl run`` loads everything; then

1. ``lumber audit verify --json`` over every virtual hour of the run: for every topic and window,
   ``missing`` = 0, and the producer tier is exact: the producers journal their counts (``[audit]
   state_dir``, the persistent outbox: a restarted producer publishes what its killed predecessor had not),
   so the producer tier counts at least every record the producers logged as acknowledged, and at most
   those plus the rows of records *in flight at a kill* (in the warehouse, acknowledged by the broker, but
   the producer died before its log line: counted if the kill came after the journal's line). ``duplicate``
   (loaded - expected) may only be such rows: any other surplus or shortfall fails the run;
2. against the mirror's target: the mirror tier (each source offset counted once, journaled too, so exact
   across mirror kills) equals the warehouse rows, i.e. the source records, for every window; the target
   holds the records copied again after a mirror kill twice, which the tier does not count (the mirror
   logs how many it knew of);
3. DuckDB over the warehouse: no ``event_id`` twice; every record a producer logged as acknowledged is
   there; every row that no producer logged was sent by an instance that was killed (in flight at the
   kill); as many rows as the source topics hold; nothing quarantined;
4. each consumer group (ZooKeeper and Kafka-protocol) read every offset of every partition up to the log
   end, and the mirror's group committed the source log ends of every partition (``_audit`` included).

The report's ``t=`` is seconds since the run started (setup included); ``report.json`` in the work dir
holds all of it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402

from broker.client.errors import ClientError  # noqa: E402
from broker.client.group_offsets import GroupOffsets  # noqa: E402
from broker.client.kafka_group_admin import KafkaGroupAdmin  # noqa: E402
from broker.cluster import zk_paths  # noqa: E402
from broker.cluster.topic_admin import TopicAdmin  # noqa: E402
from broker.record.topic_partition import TopicPartition  # noqa: E402
from lumber.config import LumberConfig, dump_config  # noqa: E402
from lumber.dev.dev_stack import DevStack, ServiceSpec  # noqa: E402
from lumber.dev.process import ProcessHandle, port_in_use, start_and_wait  # noqa: E402
from lumber.dev.zookeeper_server import four_letter_word  # noqa: E402

HOUR_MS = 3_600_000
TOPICS = ("page_view", "click")
PARTITIONS = 3
PRODUCERS = 4
BROKERS = 3
#: the broker whose log dir is a small tmpfs (the full-disk fault)
DISK_BROKER = 2
TMPFS_BYTES = 256 * 1024 * 1024
SESSION_TIMEOUT_MS = 6000
GROUP_SESSION_TIMEOUT_MS = 4000
CONSUMER_GROUP = "chaos-readers"
#: the Kafka-protocol group; its session is the brokers' group_min_session_timeout_ms (6 s, Kafka's)
KAFKA_GROUP = "chaos-kafka-readers"
KAFKA_GROUP_SESSION_TIMEOUT_MS = 6000
#: the consumer processes (the consumer faults pick one): name -> (group, protocol, session timeout ms)
READERS = {
    "consumer": (CONSUMER_GROUP, "zookeeper", GROUP_SESSION_TIMEOUT_MS),
    "kconsumer": (KAFKA_GROUP, "kafka", KAFKA_GROUP_SESSION_TIMEOUT_MS),
}
#: a topic only the full-disk fault's probes write to (never loaded, mirrored or audited): produced to
#: before the faults, read back from broker 2 while its log dir is full, and produced to while full
PROBE_TOPIC = "chaos-probe"
PROBE_RECORDS = 20
#: larger than a page: a "full" filesystem still takes a small write into the free tail of the last page
#: its segment file holds (seen: a 16-byte record accepted on the full tmpfs)
PROBE_FULL_VALUE = b"x" * 65536
PY = sys.executable
ROLES = str(REPO / "bench" / "chaos_roles.py")

FAULT_KINDS = (
    "broker_kill",
    "broker_pause",
    "zookeeper_kill",
    "registry_kill",
    "registry_down_during_load",
    "producer_kill",
    "consumer_kill",
    "consumer_pause",
    "mirror_kill",
    "load_driver_kill",
    "spark_task_kill",
    "broker_disk_full",
    "warehouse_disk_full",
)


@dataclasses.dataclass
class Windows:
    """Per (topic, hour): warehouse rows, rows the producers logged as acknowledged, and rows no producer
    logged (in flight at a producer's kill -9)."""

    rows: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)
    logged: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)
    in_flight: Counter[tuple[str, int]] = dataclasses.field(default_factory=Counter)


def say(line: str = "") -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}" if line else "", flush=True)


def hour_text(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H", time.gmtime(ms / 1000))


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = int(sock.getsockname()[1])
        if first + count < 65000 and not any(port_in_use(first + i) for i in range(count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports")


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if predicate():
                return True
        time.sleep(interval_s)
    return False


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------- processes


@dataclasses.dataclass
class Proc:
    """One process of the run: how to start it again, and the running one (signalled by pid only)."""

    name: str
    argv: Callable[[], Sequence[str]]
    log_path: Path
    is_ready: Callable[[], bool]
    prepare: Callable[[], object] = lambda: None
    handle: ProcessHandle | None = None
    popen: subprocess.Popen[bytes] | None = None
    stopped: bool = False  # SIGSTOPped

    def start(self, timeout_s: float = 90.0) -> None:
        self.prepare()
        self.handle, self.popen = start_and_wait(
            self.name, self.argv(), self.log_path, self.is_ready, timeout_s
        )
        self.stopped = False

    def running(self) -> bool:
        return self.handle is not None and self.handle.is_running()

    def signal(self, signum: int) -> None:
        if self.handle is not None and self.handle.is_running():
            os.kill(self.handle.pid, signum)

    def kill9(self) -> None:
        if self.handle is None:
            return
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=30)
        else:
            wait_for(lambda: not self.handle.is_running(), 30)  # type: ignore[union-attr]
        self.handle = self.popen = None

    def terminate(self, timeout_s: float = 60.0) -> None:
        if self.handle is None:
            return
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not wait_for(lambda: not self.handle.is_running(), timeout_s, 0.1):  # type: ignore[union-attr]
            self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=30)
        self.handle = self.popen = None


def _from_spec(spec: ServiceSpec, handle: ProcessHandle | None) -> Proc:
    return Proc(spec.name, spec.argv, spec.log_path, spec.is_ready, spec.prepare, handle)


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------------- the run


@dataclasses.dataclass
class Fault:
    kind: str
    target: str
    started_s: float
    detail: str = ""
    held_s: float = 0.0
    recovery_s: float | None = None
    ok: bool = True


class ChaosRun:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.rng = random.Random(args.seed)
        self.hour_s = args.hour_s
        self.t0_ms = time.time_ns() // 1_000_000
        span_hours = int(args.minutes * 60 / self.hour_s) + 8
        now_hour = self.t0_ms - self.t0_ms % HOUR_MS
        self.v0_ms = now_hour - (span_hours + 24) * HOUR_MS
        self.started = time.monotonic()
        self.procs: dict[str, Proc] = {}
        self.faults: list[Fault] = []
        self.notes: list[str] = []
        self.failures: list[str] = []
        self.producer_instances: dict[str, int] = {}
        self.killed_instances: set[str] = set()
        self.mirror_kills = 0
        self.busy: set[str] = set()
        self.busy_lock = threading.Lock()
        self.stop_faults = threading.Event()
        self.mounts: list[Path] = []
        self.tmpfs_ok = False
        self.zk: KazooClient | None = None
        self.registry_task_failures = 0
        self.registry_failed_runs = 0
        self.disk_full_produce_errors: Counter[str] = Counter()
        self.disk_full_reads = [0, 0]  # records read back from the full broker, records wanted

    # -- time ------------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def virtual_now_ms(self) -> int:
        speed = 3600.0 / self.hour_s
        return self.v0_ms + int((time.time_ns() // 1_000_000 - self.t0_ms) * speed)

    def clock_args(self) -> list[str]:
        return ["--t0-ms", str(self.t0_ms), "--v0-ms", str(self.v0_ms), "--hour-s", str(self.hour_s)]

    # -- setup -----------------------------------------------------------------------------------------

    def _mount_tmpfs(self, path: Path) -> bool:
        path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            return False
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            self.notes.append(f"mount -t tmpfs {path} failed: {result.stderr.strip()}")
            return False
        self.mounts.append(path)
        return True

    def _config(
        self,
        state_dir: Path,
        brokers: int,
        zk_port: int,
        broker_port: int,
        registry_port: int,
        console_port: int,
    ) -> LumberConfig:
        base = LumberConfig()
        warehouse = self.work / "warehouse"
        return base.replace(
            zookeeper=base.zookeeper.replace(session_timeout_ms=SESSION_TIMEOUT_MS),
            dev=base.dev.replace(
                state_dir=str(state_dir),
                brokers=brokers,
                zookeeper_port=zk_port,
                broker_port=broker_port,
                registry_port=registry_port,
                console_port=console_port,  # each stack starts a console: never the default 8090
                zookeeper_heap_mb=128,
            ),
            broker=base.broker.replace(default_replication_factor=min(brokers, 3)),
            registry=base.registry.replace(url=f"http://127.0.0.1:{registry_port}"),
            producer=base.producer.replace(audit_interval_ms=2000),
            # the audit's persistent outbox: the producers' and the mirror's journals (issue 24)
            audit=base.audit.replace(state_dir=str(self.work / f"audit-outbox-{state_dir.name}")),
            load=base.load.replace(
                warehouse_url=str(warehouse),
                topics_allow=["page_view", "click"],
                event_time_fields=[f"{t}=timestamp_ms" for t in TOPICS],
            ),
            spark=base.spark.replace(master="local[2,4]"),
            schedule=base.schedule.replace(
                every_ms=HOUR_MS,
                delay_ms=600_000,
                start_hour=hour_text(self.v0_ms),
                state_file=str(self.work / "schedule.json"),
                retry_backoff_ms=300_000,
                retry_backoff_max_ms=1_800_000,
            ),
        )

    def setup(self) -> None:
        os.environ["PYTHONPATH"] = str(REPO)
        for key in [k for k in os.environ if k.startswith("LUMBER_")]:
            del os.environ[key]
        self.tmpfs_ok = self._mount_tmpfs(self.work / "live" / f"broker-{DISK_BROKER}" / "logs")
        self.tmpfs_ok = self._mount_tmpfs(self.work / "warehouse") and self.tmpfs_ok
        if not self.tmpfs_ok:
            self.notes.append(
                "full-disk faults skipped: no tmpfs (not root, or mount -t tmpfs refused)"
                if os.geteuid() != 0
                else "full-disk faults skipped: mount -t tmpfs failed"
            )
        live_ports = (free_ports(1), free_ports(BROKERS), free_ports(1), free_ports(1))
        self.live = DevStack(self._config(self.work / "live", BROKERS, *live_ports))
        say(
            f"live cluster: ZooKeeper 127.0.0.1:{live_ports[0]}, brokers from {live_ports[1]}, "
            f"registry {live_ports[2]}"
        )
        self.live.up(progress=lambda m: say(f"  live: {m}"))
        self._adopt(self.live, "")
        target_ports = (free_ports(1), free_ports(1), free_ports(1), free_ports(1))
        self.target = DevStack(self._config(self.work / "offline", 1, *target_ports))
        self.target.up(progress=lambda m: say(f"  target: {m}"))
        self._adopt(self.target, "target-")
        self.config = self.live.stack_config()
        self.mirror_group = self.target.stack_config().mirror.group
        self.config_path = self.live.config_path
        # the audit events on the target were encoded with the live registry's ids (one registry for both
        # clusters, as the README's mirror section says): the target's own registry is not used
        target_config = self.target.stack_config()
        self.target_config_path = self.work / "offline-audit.toml"
        self.target_config_path.write_text(
            dump_config(
                target_config.replace(registry=target_config.registry.replace(url=self.config.registry.url))
            )
        )
        self.zk = KazooClient(hosts=self.config.zookeeper.connect, timeout=10)
        self.zk.start(timeout=30)
        admin = TopicAdmin(self.zk)
        for topic in TOPICS:
            admin.create_topic(
                topic, PARTITIONS, replication_factor=BROKERS, configs={"min.insync.replicas": "2"}
            )
        # partition 0 prefers broker DISK_BROKER: the fault elects it leader there before filling the disk
        admin.create_topic(
            PROBE_TOPIC,
            PARTITIONS,
            assignment={
                p: [
                    (DISK_BROKER + p) % BROKERS,
                    (DISK_BROKER + p + 1) % BROKERS,
                    (DISK_BROKER + p + 2) % BROKERS,
                ]
                for p in range(PARTITIONS)
            },
            configs={"min.insync.replicas": "2"},
        )
        wait_for(self.cluster_healthy, 60)
        self._fill_probe_topic()
        self._start_clients()

    def _fill_probe_topic(self) -> None:
        """``PROBE_RECORDS`` acknowledged records (acks=all) in every partition of the probe topic."""
        from kafka import KafkaProducer  # noqa: PLC0415

        producer = KafkaProducer(bootstrap_servers=self.live_bootstrap().split(","), acks="all", retries=5)
        try:
            futures = [
                producer.send(PROBE_TOPIC, value=f"probe-{p}-{i}".encode(), partition=p)
                for p in range(PARTITIONS)
                for i in range(PROBE_RECORDS)
            ]
            for future in futures:
                future.get(timeout=30)
        finally:
            producer.close()

    def _adopt(self, stack: DevStack, prefix: str) -> None:
        handles = {s.name: s.process for s in stack.read_state()}
        for spec in stack.services():
            self.procs[prefix + spec.name] = _from_spec(spec, handles.get(spec.name))

    def _add(self, name: str, argv: Callable[[], Sequence[str]], ready: Callable[[], bool]) -> Proc:
        proc = Proc(name, argv, self.work / "logs" / f"{name}.log", ready)
        self.procs[name] = proc
        proc.start()
        return proc

    def ack_log(self, host: str) -> Path:
        return self.work / "acks" / f"{host}.log"

    def _producer_argv(self, host: str) -> list[str]:
        instance = self.producer_instances[host]
        return [
            PY,
            ROLES,
            "producer",
            "--config",
            str(self.config_path),
            *self.clock_args(),
            "--host",
            host,
            "--instance",
            str(instance),
            "--rate",
            str(self.args.rate),
            "--seed",
            str(self.args.seed),
            "--ack-log",
            str(self.ack_log(host)),
        ]

    def _start_clients(self) -> None:
        (self.work / "acks").mkdir(parents=True, exist_ok=True)
        for n in range(1, PRODUCERS + 1):
            host = f"app-{n}"
            self.producer_instances[host] = 0
            self._add(f"producer-{host}", lambda host=host: self._producer_argv(host), lambda: True)  # type: ignore[misc]
        for name, (group, protocol, session_ms) in READERS.items():
            self._add(
                name,
                lambda group=group, protocol=protocol, session_ms=session_ms, name=name: [  # type: ignore[misc]
                    PY,
                    ROLES,
                    "consumer",
                    "--config",
                    str(self.config_path),
                    "--group",
                    group,
                    "--protocol",
                    protocol,
                    "--session-timeout-ms",
                    str(session_ms),
                    "--out",
                    str(self.reader_out(name)),
                ],
                lambda: True,
            )
        target_zk = self.target.stack_config().zookeeper.connect
        self._add(
            "mirror",
            lambda: [
                PY,
                "-m",
                "lumber",
                "--config",
                str(self.target_config_path),
                "mirror",
                "--source-zookeeper",
                self.config.zookeeper.connect,
                "--target-zookeeper",
                target_zk,
                "--topics-regex",
                "page_view|click|_audit",
                "--registry-url",
                self.config.registry.url,
                "--audit-interval",
                "2s",
                "--topic-refresh",
                "2s",
            ],
            lambda: True,
        )
        self._add(
            "scheduler",
            lambda: [PY, ROLES, "schedule", "--config", str(self.config_path), *self.clock_args()],
            lambda: True,
        )

    # -- health ----------------------------------------------------------------------------------------

    def _states(self) -> dict[tuple[str, int], Any]:
        assert self.zk is not None
        admin = TopicAdmin(self.zk)
        out = {}
        for topic in (*TOPICS, self.config.audit.topic):
            for partition, state in admin.describe_states(topic).items():
                out[(topic, partition)] = state
        return out

    def broker_registered(self, broker_id: int) -> bool:
        assert self.zk is not None
        try:
            self.zk.get(zk_paths.broker_path(broker_id))
        except NoNodeError:
            return False
        return True

    def broker_healthy(self, broker_id: int) -> bool:
        """Registered and in the ISR of every partition it holds a replica of (RF 3: all of them)."""
        if not self.broker_registered(broker_id):
            return False
        return all(broker_id in state.isr for state in self._states().values())

    def cluster_healthy(self) -> bool:
        if four_letter_word(self.config.dev.zookeeper_port, "ruok") != "imok":
            return False
        if not all(self.broker_registered(b) for b in range(BROKERS)):
            return False
        return all(state.leader >= 0 and len(state.isr) >= 2 for state in self._states().values())

    def load_driver_pids(self) -> list[int]:
        sched = self.procs["scheduler"]
        if not sched.running() or sched.handle is None:
            return []
        return [
            p
            for p in descendants(sched.handle.pid)
            if "jobs/load.py" in cmdline(p) and "python" in Path(cmdline(p).split(" ")[0]).name
        ]

    def spark_worker_pids(self) -> list[int]:
        """The running load's PySpark workers (forked by ``pyspark.daemon``), else the daemon itself."""
        sched = self.procs["scheduler"]
        if not sched.running() or sched.handle is None:
            return []
        daemons = [p for p in descendants(sched.handle.pid) if "pyspark.daemon" in cmdline(p)]
        workers = [w for d in daemons for w in descendants(d)]
        return workers or daemons

    def schedule_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.work / "schedule.json").read_text()))
        except (OSError, ValueError):
            return {}

    def committed_loads(self) -> int:
        return sum(1 for h in self.schedule_state().get("history", []) if h.get("status") == "done")

    def failed_loads(self) -> int:
        return sum(1 for h in self.schedule_state().get("history", []) if h.get("status") == "failed")

    def _load_committed_after(self, count: int) -> Callable[[], bool]:
        return lambda: self.committed_loads() > count

    def _target_total(self) -> int:
        return sum(self._log_ends(self.target_bootstrap()).values())

    def target_bootstrap(self) -> str:
        return f"127.0.0.1:{self.target.config.dev.broker_port}"

    def live_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.config.dev.broker_port + b}" for b in range(BROKERS))

    def _log_ends(self, servers: str, topics: Sequence[str] = TOPICS) -> dict[tuple[str, int], int]:
        import warnings  # noqa: PLC0415

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415
        consumer = Consumer({"bootstrap.servers": servers, "group.id": "chaos-probe", "log_level": 0})
        try:
            return {
                (t, p): int(consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1])
                for t in topics
                for p in range(self.config.audit.topic_partitions if t.startswith("_") else PARTITIONS)
            }
        finally:
            consumer.close()

    # -- faults ----------------------------------------------------------------------------------------

    def _claim(self, resources: set[str]) -> bool:
        with self.busy_lock:
            if "*" in self.busy or (resources & self.busy) or ("*" in resources and self.busy):
                return False
            self.busy |= resources
            return True

    def _release(self, resources: set[str]) -> None:
        with self.busy_lock:
            self.busy -= resources

    def _hold(self, low: float, high: float) -> float:
        held = self.rng.uniform(low, high)
        time.sleep(held)
        return held

    def _recover(
        self, fault: Fault, healthy: Callable[[], bool], bound_s: float = 180.0, since: float | None = None
    ) -> None:
        """Wait for ``healthy``; the recovery time counts from ``since`` (the healing step's start)."""
        t = time.monotonic() if since is None else since
        if wait_for(healthy, bound_s):
            fault.recovery_s = time.monotonic() - t
        else:
            fault.ok = False
            fault.detail += f"; NOT recovered within {bound_s:.0f} s"

    def _wait_for_load(self, bound_s: float) -> bool:
        return wait_for(lambda: bool(self.load_driver_pids()), bound_s, 0.2)

    def fault(self, kind: str, rng: random.Random) -> Fault | None:
        """Inject one fault of ``kind``, heal it, wait for recovery; None if it could not start now."""
        broker = rng.randrange(BROKERS)
        host = f"app-{rng.randrange(1, PRODUCERS + 1)}"
        resources: dict[str, set[str]] = {
            "broker_kill": {f"broker-{broker}", "brokers"},
            "broker_pause": {f"broker-{broker}", "brokers"},
            "zookeeper_kill": {"*"},
            "registry_kill": {"registry"},
            "registry_down_during_load": {"registry", "load"},
            "producer_kill": {f"producer-{host}"},
            "consumer_kill": {"consumers"},
            "consumer_pause": {"consumers"},
            "mirror_kill": {"mirror"},
            "load_driver_kill": {"load"},
            "spark_task_kill": {"load"},
            "broker_disk_full": {f"broker-{DISK_BROKER}", "brokers"},
            "warehouse_disk_full": {"load", "warehouse"},
        }
        wanted = resources[kind]
        if not self._claim(wanted):
            return None
        try:
            return self._inject(kind, broker, host, rng)
        finally:
            self._release(wanted)

    def _inject(self, kind: str, broker: int, host: str, rng: random.Random) -> Fault | None:
        hour = self.hour_s
        if kind in ("broker_kill", "broker_pause"):
            proc = self.procs[f"broker-{broker}"]
            fault = Fault(kind, proc.name, self.elapsed())
            if kind == "broker_kill":
                proc.kill9()
                fault.held_s = self._hold(3, 15)
                heal = time.monotonic()
                proc.start()
            else:
                proc.signal(signal.SIGSTOP)
                proc.stopped = True
                fault.held_s = self._hold(SESSION_TIMEOUT_MS / 1000 + 2, SESSION_TIMEOUT_MS / 1000 + 8)
                heal = time.monotonic()
                proc.signal(signal.SIGCONT)
                proc.stopped = False
                fault.detail = f"paused past its {SESSION_TIMEOUT_MS} ms ZooKeeper session"
            self._recover(fault, lambda: self.broker_healthy(broker), since=heal)
            return fault
        if kind == "zookeeper_kill":
            proc = self.procs["zookeeper"]
            fault = Fault(kind, "zookeeper", self.elapsed())
            proc.kill9()
            fault.held_s = self._hold(2, 10)
            heal = time.monotonic()
            proc.start()
            self._recover(fault, self.cluster_healthy, 240, since=heal)
            return fault
        if kind in ("registry_kill", "registry_down_during_load"):
            proc = self.procs["registry"]
            sched_from = _file_size(self.procs["scheduler"].log_path)
            if kind == "registry_down_during_load" and not self._wait_for_planned(sched_from, 2 * hour + 30):
                return None
            fault = Fault(kind, "registry", self.elapsed())
            before = self.committed_loads()
            proc.kill9()
            # during a load: down long enough for the tasks to reach their first decode (a PySpark worker
            # starts in seconds on a loaded machine) and for Spark's retries of a failed one
            fault.held_s = self._hold(3, 15) if kind == "registry_kill" else self._hold(8, 20)
            heal = time.monotonic()
            proc.start()
            url = self.config.registry.url + "/subjects"
            if kind == "registry_kill":
                self._recover(fault, lambda: _http_ok(url), since=heal)
            else:
                self._recover(fault, self._load_committed_after(before), 6 * hour + 120, since=heal)
                fault.detail = "killed once the load's tasks ran; " + self._load_effects(sched_from)
            return fault
        if kind == "producer_kill":
            proc = self.procs[f"producer-{host}"]
            fault = Fault(kind, proc.name, self.elapsed())
            self.killed_instances.add(f"{host}-{self.producer_instances[host]}")
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            self.producer_instances[host] += 1
            size = _file_size(self.ack_log(host))
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: _file_size(self.ack_log(host)) > size, since=heal)
            return fault
        if kind in ("consumer_kill", "consumer_pause"):
            name = self.rng.choice(sorted(READERS))
            _group, protocol, session_ms = READERS[name]
            proc = self.procs[name]
            reader_log = self.reader_out(name)
            fault = Fault(kind, f"{name} ({protocol} group)", self.elapsed())
            if kind == "consumer_kill":
                proc.kill9()
                fault.held_s = self._hold(1, 8)
                size = _file_size(reader_log)
                heal = time.monotonic()
                proc.start()
            else:
                proc.signal(signal.SIGSTOP)
                proc.stopped = True
                fault.held_s = self._hold(session_ms / 1000 + 2, session_ms / 1000 + 8)
                size = _file_size(reader_log)
                heal = time.monotonic()
                proc.signal(signal.SIGCONT)
                proc.stopped = False
                fault.detail = f"paused past its {session_ms} ms group session"
            healthy = lambda: self._reader_owns_all(name) and _file_size(reader_log) > size  # noqa: E731
            self._recover(fault, healthy, since=heal)
            return fault
        if kind == "mirror_kill":
            proc = self.procs["mirror"]
            fault = Fault(kind, "mirror", self.elapsed())
            self.mirror_kills += 1
            proc.kill9()
            fault.held_s = self._hold(1, 8)
            total = self._target_total()
            heal = time.monotonic()
            proc.start()
            self._recover(fault, lambda: self._target_total() > total, since=heal)
            return fault
        if kind in ("load_driver_kill", "spark_task_kill"):
            if not self._wait_for_load(2 * hour + 30):
                return None
            before = self.committed_loads()
            fault = Fault(kind, "load", self.elapsed())
            if kind == "load_driver_kill":
                time.sleep(rng.uniform(0, 5))
                pids = self.load_driver_pids()
            else:
                pids = []
                wait_for(lambda: bool(self.spark_worker_pids()), 60, 0.1)
                time.sleep(rng.uniform(0, 1))
                pids = self.spark_worker_pids()
            if not pids:
                return None
            victim = rng.choice(pids)
            fault.detail = f"kill -9 pid {victim} ({cmdline(victim)[:60]}...)"
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
            self._recover(fault, self._load_committed_after(before), 6 * hour + 120)
            return fault
        if kind in ("broker_disk_full", "warehouse_disk_full"):
            if not self.tmpfs_ok:
                return None
            if kind == "broker_disk_full":
                where = self.work / "live" / f"broker-{DISK_BROKER}" / "logs"
                fault = Fault(kind, f"broker-{DISK_BROKER}", self.elapsed())
            else:
                if not self._wait_for_load(2 * hour + 30):
                    return None
                where = self.work / "warehouse"
                fault = Fault(kind, "warehouse", self.elapsed())
            before = self.committed_loads()
            if kind == "broker_disk_full":
                self._elect_disk_broker()
            log_from = _file_size(self.procs[f"broker-{DISK_BROKER}"].log_path)
            filler = where / ".chaos-filler"
            with filler.open("wb") as out, contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * (1 << 20))
                    out.flush()
            filled = time.monotonic()
            failed = self.failed_loads()
            probes = self._probe_full_broker() if kind == "broker_disk_full" else ""
            if kind == "warehouse_disk_full":
                # full until the running load has ended (it must fail, having committed nothing)
                wait_for(lambda: not self.load_driver_pids(), 4 * hour + 120, 0.5)
            self._hold(5, 15)
            fault.held_s = time.monotonic() - filled
            heal = time.monotonic()
            filler.unlink()
            if kind == "broker_disk_full":
                proc = self.procs[f"broker-{DISK_BROKER}"]
                with proc.log_path.open("rb") as log:
                    log.seek(log_from)
                    offline = b"log is offline" in log.read()
                proc.terminate()
                proc.start()
                fault.detail = (
                    "log dir filled; restarted"
                    + (" (its log had gone offline)" if offline else "")
                    + f"; while full: {probes}"
                )
                self._recover(fault, lambda: self.broker_healthy(DISK_BROKER), since=heal)
            else:
                outcome = "failed" if self.failed_loads() > failed else "did not fail"
                fault.detail = f"warehouse filled during a load, which {outcome}"
                self._recover(fault, self._load_committed_after(before), 6 * hour + 120, since=heal)
            return fault
        raise ValueError(kind)

    def _wait_for_planned(self, sched_from: int, bound_s: float) -> bool:
        """Wait until a load has planned (the driver's ``planned:`` line, passed on by the scheduler, after
        byte ``sched_from`` of its log) and Spark runs its first task: the registry is then needed by the
        tasks only (each Python worker fetches a writer schema once, when it decodes its first records)."""
        log_path = self.procs["scheduler"].log_path

        def tasks_run() -> bool:
            with log_path.open("rb") as log:
                log.seek(sched_from)
                text = log.read().decode(errors="replace")
            after = text.split("] planned: ", 1)
            if len(after) < 2 or not self.load_driver_pids():
                return False
            return any(int(m.group(1)) > 0 for m in re.finditer(r"tasks done \((\d+) running\)", after[1]))

        return wait_for(tasks_run, bound_s, 0.1)

    def _load_effects(self, sched_from: int) -> str:
        """What the load that planned after byte ``sched_from`` of the scheduler's log, and those after it,
        went through: Spark's failed task attempts (``Lost task`` in each run's Spark log: each was retried),
        failed runs (retried by the scheduler), quarantined rows."""
        text = self.procs["scheduler"].log_path.read_bytes().decode(errors="replace")
        planned_at = text.find("] planned: ", sched_from)
        submit_at = text.rfind("spark-submit ...", 0, planned_at if planned_at >= 0 else len(text))
        lines = text[max(submit_at, 0) :].splitlines()
        lost = 0
        causes: Counter[str] = Counter()
        for line in lines:
            if "Spark's log: " in line and "spark-submit ..." in line:
                spark_log = Path(line.rsplit("Spark's log: ", 1)[1].strip())
                with contextlib.suppress(OSError):
                    spark_lines = spark_log.read_text(errors="replace").splitlines()
                    for i, spark_line in enumerate(spark_lines):
                        if "Lost task" in spark_line:
                            lost += 1
                            # the cause: the Python traceback that follows, up to Spark's next log line
                            trace = [spark_line]
                            for more in spark_lines[i + 1 : i + 120]:
                                if re.match(r"\d\d/\d\d/\d\d ", more):
                                    break
                                trace.append(more)
                            causes["registry" if "egistry" in "\n".join(trace) else "other"] += 1
        failed = sum(1 for line in lines if "): failed: " in line)
        committed = [line for line in lines if "): committed in " in line]
        quarantined = [
            int(line.split(" quarantined")[0].rsplit(", ", 1)[1])
            for line in committed
            if " quarantined" in line
        ]
        self.registry_task_failures += lost
        self.registry_failed_runs += failed
        return (
            f"{lost} failed task attempt(s), retried by Spark ({dict(causes)} by cause), {failed} failed "
            f"run(s) retried by the scheduler, {len(committed)} committed run(s) with {sum(quarantined)} "
            "quarantined"
        )

    def _elect_disk_broker(self) -> None:
        """Make broker ``DISK_BROKER`` the leader of the probe topic's partition 0 (its preferred replica),
        so that the full-disk probes have a partition it leads (leadership moves away at its restarts)."""
        assert self.zk is not None
        admin = TopicAdmin(self.zk)
        probe0 = TopicPartition(PROBE_TOPIC, 0)
        if admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER:
            return
        with contextlib.suppress(Exception):  # a pending election: the wait below still tells
            admin.request_preferred_election([probe0])
        if not wait_for(lambda: admin.describe_states(PROBE_TOPIC)[0].leader == DISK_BROKER, 20, 0.2):
            self.notes.append(f"t={self.elapsed():.0f} s: the preferred election of {probe0} did not happen")

    def _probe_full_broker(self) -> str:
        """While broker ``DISK_BROKER``'s log dir is full: produce once to each probe partition it leads
        (expecting KAFKA_STORAGE_ERROR), then read back from it the last records acknowledged before the
        fault of every partition it leads. Returns a summary; a failed check is a failure of the run."""
        import warnings  # noqa: PLC0415

        from kafka import KafkaProducer  # noqa: PLC0415
        from kafka.errors import KafkaError  # noqa: PLC0415

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from confluent_kafka import Consumer  # noqa: PLC0415
            from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: PLC0415
        assert self.zk is not None
        admin = TopicAdmin(self.zk)
        led = sorted(
            (topic, p)
            for topic in (*TOPICS, PROBE_TOPIC)
            for p, state in admin.describe_states(topic).items()
            if state.leader == DISK_BROKER
        )
        probe_led = [p for topic, p in led if topic == PROBE_TOPIC]
        # produce first: the failed append takes the partition's log offline, which reads must survive
        produced: list[str] = []
        producer = KafkaProducer(
            bootstrap_servers=self.live_bootstrap().split(","),
            acks="all",
            retries=0,
            request_timeout_ms=10000,
        )
        try:
            for p in probe_led:
                try:
                    meta = producer.send(PROBE_TOPIC, value=PROBE_FULL_VALUE, partition=p).get(timeout=20)
                    leader = admin.describe_states(PROBE_TOPIC)[p].leader
                    produced.append(f"p{p} accepted at offset {meta.offset} by leader {leader}")
                    if leader == DISK_BROKER:
                        self.failures.append(
                            f"broker {DISK_BROKER} with a full log dir accepted a produce of "
                            f"{len(PROBE_FULL_VALUE)} bytes to {PROBE_TOPIC}-{p} (offset {meta.offset})"
                        )
                    else:
                        self.disk_full_produce_errors[f"moved to broker {leader}"] += 1
                except KafkaError as exc:
                    produced.append(f"p{p} refused: {type(exc).__name__}")
                    self.disk_full_produce_errors[type(exc).__name__] += 1
        finally:
            producer.close(timeout=10)
        # then read back the last (up to) PROBE_RECORDS acknowledged records of every partition it leads
        reads: list[str] = []
        consumer = Consumer(
            {
                "bootstrap.servers": self.live_bootstrap(),
                "group.id": "chaos-disk-probe",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        try:
            for topic, p in led:
                low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)
                start = max(int(low), int(high) - PROBE_RECORDS)
                want = set(range(start, int(high)))
                consumer.assign([CkTopicPartition(topic, p, start)])
                got: set[int] = set()
                deadline = time.monotonic() + 20
                while want - got and time.monotonic() < deadline:
                    message = consumer.poll(1.0)
                    if message is not None and message.error() is None and message.partition() == p:
                        got.add(int(message.offset() or 0))
                reads.append(f"{topic}-{p} {len(want & got)}/{len(want)}")
                self.disk_full_reads[0] += len(want & got)
                self.disk_full_reads[1] += len(want)
                if want - got:
                    self.failures.append(
                        f"broker {DISK_BROKER} with a full log dir did not serve {topic}-{p} offsets "
                        f"{min(want - got)}..{max(want - got)} (read {len(want & got)} of {len(want)})"
                    )
                consumer.unassign()
        finally:
            consumer.close()
        return (
            f"leads {len(led)} partition(s); produce to the probe partitions it leads: "
            f"{', '.join(produced) or 'it leads none'}; read back from it: {', '.join(reads) or '-'}"
        )

    def fault_loop(self, slot: int, until_s: float, kinds: Sequence[str]) -> None:
        rng = random.Random(f"{self.args.seed}/{slot}")
        time.sleep(rng.uniform(5, 15) + slot * 10)
        while self.elapsed() < until_s and not self.stop_faults.is_set():
            kind = rng.choice(kinds)
            try:
                fault = self.fault(kind, rng)
            except Exception as exc:
                fault = Fault(kind, "?", self.elapsed(), detail=f"{type(exc).__name__}: {exc}", ok=False)
            if fault is None:
                time.sleep(1)
                continue
            self.faults.append(fault)
            rec = "not recovered" if fault.recovery_s is None else f"recovered in {fault.recovery_s:.1f} s"
            say(f"fault {kind} on {fault.target}: held {fault.held_s:.1f} s, {rec}. {fault.detail}")
            time.sleep(rng.uniform(3, 12))

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> int:
        self.setup()
        kinds = [k for k in self.args.faults.split(",") if k]
        if not self.tmpfs_ok:
            kinds = [k for k in kinds if not k.endswith("disk_full")]
        fault_until = self.args.minutes * 60
        say(f"faults for {self.args.minutes} min: {', '.join(kinds)}")
        threads = [
            threading.Thread(target=self.fault_loop, args=(slot, fault_until, kinds), daemon=True)
            for slot in range(self.args.concurrent)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=fault_until + 900)
            if thread.is_alive():
                self.failures.append("a fault did not finish within 15 minutes after the fault period")
        return self.finish()

    def finish(self) -> int:
        say("faults over; checking every process is up")
        for name, proc in self.procs.items():
            if not proc.running():
                self.failures.append(f"{name} was not running at the end of the fault period")
                with contextlib.suppress(Exception):
                    proc.start()
        if not wait_for(self.cluster_healthy, 120):
            self.failures.append("the live cluster did not become healthy after the faults")
        say("stopping the producers (a clean close publishes their last audit counts)")
        for n in range(1, PRODUCERS + 1):
            self.procs[f"producer-app-{n}"].terminate(120)
        self.end_virtual_ms = self.virtual_now_ms()
        ends = self._stable_log_ends()
        say(f"source log ends: {sum(ends.values())} records")
        for name, (group, protocol, _session_ms) in READERS.items():
            if not wait_for(lambda name=name: self._reader_caught_up(name, ends), 180, 1):  # type: ignore[misc]
                self.failures.append(
                    f"the {protocol} consumer group {group} did not read every offset: {self.consumer_gaps}"
                )
        audit_topic = self.config.audit.topic
        with_audit = {**ends, **self._log_ends(self.live_bootstrap(), (audit_topic,))}
        if not wait_for(lambda: self._group_caught_up(self.mirror_group, with_audit), 180, 1):
            self.failures.append(f"the mirror's group did not commit the source log ends: {self.group_lag}")
        time.sleep(5)  # the mirror's last audit interval
        say("stopping the scheduler; the last load")
        self.procs["scheduler"].terminate(300)
        code = subprocess.run(
            [PY, "-m", "lumber", "--config", str(self.config_path), "etl", "run"],
            stdout=(self.work / "logs" / "final-load.log").open("w"),
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
        if code != 0:
            self.failures.append(
                f"the final load failed (exit {code}; {self.work / 'logs' / 'final-load.log'})"
            )
        for name in READERS:
            self.procs[name].terminate()
        self.procs["mirror"].terminate()
        final = self._stable_log_ends()
        if final != ends:
            self.failures.append(f"the source log ends moved after the producers stopped: {ends} -> {final}")
        return self.oracle(final)

    def _stable_log_ends(self) -> dict[tuple[str, int], int]:
        """The source log ends once two reads 2 s apart agree (the high watermarks have settled)."""
        ends = self._log_ends(self.live_bootstrap())
        for _ in range(30):
            time.sleep(2)
            again = self._log_ends(self.live_bootstrap())
            if again == ends:
                break
            ends = again
        return ends

    def _group_caught_up(self, group: str, ends: dict[tuple[str, int], int]) -> bool:
        assert self.zk is not None
        read = GroupOffsets(self.zk, group).read([TopicPartition(t, p) for t, p in ends])
        committed = {(tp.topic, tp.partition): (None if c is None else c.offset) for tp, c in read.items()}
        self.group_lag = {tp: (committed[tp], end) for tp, end in ends.items() if (committed[tp] or 0) < end}
        return not self.group_lag

    def reader_out(self, name: str) -> Path:
        """The log of every offset the consumer process ``name`` read ("topic partition offset" lines)."""
        return self.work / f"{name}.log"

    def _reader_owns_all(self, name: str) -> bool:
        """Every partition of the topics is owned in the consumer group of ``name``: the paper's owner
        nodes in ZooKeeper, or a member's assignment in a Stable Kafka-protocol group (DescribeGroups)."""
        group, protocol, _session_ms = READERS[name]
        wanted = {TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)}
        if protocol == "kafka":
            try:
                with KafkaGroupAdmin(self.live_bootstrap().split(",")) as admin:
                    if admin.state(group) != "Stable":
                        return False
                    owned = {tp for m in admin.members(group) for tp in m.assignment}
            except ClientError:  # the coordinator moving or a broker down: not yet
                return False
            return wanted <= owned
        assert self.zk is not None
        return all(self.zk.exists(zk_paths.group_owner_path(group, tp.topic, tp.partition)) for tp in wanted)

    def _reader_caught_up(self, name: str, ends: dict[tuple[str, int], int]) -> bool:
        seen: dict[tuple[str, int], set[int]] = defaultdict(set)
        for line in self.reader_out(name).read_text().splitlines():
            topic, partition, offset = line.split()
            seen[(topic, int(partition))].add(int(offset))
        self.consumer_gaps = {tp: end - len(seen[tp]) for tp, end in ends.items() if len(seen[tp]) != end}
        return not self.consumer_gaps

    # -- the oracle --------------------------------------------------------------------------------------

    def _verify(self, config: Path) -> dict[str, Any]:
        since = self.v0_ms
        until = self.end_virtual_ms - self.end_virtual_ms % HOUR_MS + HOUR_MS
        name = "live" if config == self.config_path else "target"
        out = subprocess.run(
            [
                PY,
                "-m",
                "lumber",
                "--config",
                str(config),
                "audit",
                "verify",
                "--json",
                "--window",
                "1h",
                "--since",
                hour_text(since),
                "--until",
                hour_text(until),
                "--grace",
                "0s",
                "--topics",
                ",".join(TOPICS),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        (self.work / f"audit-{name}.json").write_text(out.stdout)
        try:
            return dict(json.loads(out.stdout))
        except ValueError:
            self.failures.append(
                f"audit verify ({config}) exit {out.returncode}: {out.stderr.strip()[-500:]}"
            )
            return {}

    def oracle(self, ends: dict[tuple[str, int], int]) -> int:
        import duckdb  # noqa: PLC0415

        acked: dict[str, tuple[str, int]] = {}
        failed = 0
        for n in range(1, PRODUCERS + 1):
            for line in self.ack_log(f"app-{n}").read_text().splitlines():
                parts = line.split()
                if parts[0] == "A":
                    acked[parts[1]] = (parts[2], int(parts[3]))
                elif parts[0] == "F":
                    failed += 1
        self.acked = acked
        warehouse = self.work / "warehouse"
        con = duckdb.connect()
        rows: dict[str, list[tuple[str, int]]] = {}
        for topic in TOPICS:
            files = list((warehouse / topic).rglob("*.parquet"))
            rows[topic] = (
                con.execute(
                    "SELECT event_id, timestamp_ms FROM read_parquet(?, hive_partitioning=true)",
                    [str(warehouse / topic / "*" / "*" / "*.parquet")],
                ).fetchall()
                if files
                else []
            )
        errors = list((warehouse / "_errors").rglob("*.parquet")) if (warehouse / "_errors").exists() else []
        quarantined = (
            con.execute("SELECT count(*) FROM read_parquet(?)", [[str(f) for f in errors]]).fetchone()[0]  # type: ignore[index]
            if errors
            else 0
        )
        ids = Counter(eid for topic in TOPICS for eid, _ in rows[topic])
        twice = {eid: n for eid, n in ids.items() if n > 1}
        missing = sorted(set(acked) - set(ids))
        extra = sorted(set(ids) - set(acked))
        unexplained = [e for e in extra if e.rsplit("-", 1)[0] not in self.killed_instances]
        self.warehouse_summary = {
            "rows": sum(ids.values()),
            "acknowledged": len(acked),
            "failed_sends": failed,
            "duplicate_event_ids": len(twice),
            "acknowledged_not_loaded": len(missing),
            "loaded_not_logged_by_killed_producers": len(extra) - len(unexplained),
            "loaded_not_logged_unexplained": len(unexplained),
            "quarantined": int(quarantined),
            "source_records": sum(ends.values()),
        }
        if twice:
            self.failures.append(f"DuckDB: {len(twice)} event ids loaded twice, e.g. {list(twice)[:3]}")
        if missing:
            self.failures.append(
                f"DuckDB: {len(missing)} acknowledged records not in the warehouse, e.g. {missing[:3]}"
            )
        if unexplained:
            self.failures.append(
                f"DuckDB: {len(unexplained)} rows no producer logged, e.g. {unexplained[:3]}"
            )
        if quarantined:
            self.failures.append(f"{quarantined} records quarantined")
        if sum(ids.values()) != sum(ends.values()):
            self.failures.append(
                f"warehouse rows {sum(ids.values())} != records in the source topics {sum(ends.values())}"
            )
        # per topic and hour: rows, rows the producers logged as acknowledged, rows in flight at a kill
        windows = Windows()
        extra_ids = set(extra)
        for topic in TOPICS:
            for eid, ts in rows[topic]:
                key = (topic, ts - ts % HOUR_MS)
                windows.rows[key] += 1
                if eid in extra_ids:
                    windows.in_flight[key] += 1
        for topic, ts in acked.values():
            windows.logged[(topic, ts - ts % HOUR_MS)] += 1
        self.audit_live = self._audit_check(self._verify(self.config_path), windows, "load")
        self.audit_target = self._audit_check(self._verify(self.target_config_path), windows, "mirror")
        return self.report()

    def _audit_check(self, report: dict[str, Any], windows: Windows, tier: str) -> dict[str, Any]:
        """Check one tier against the producer tier and the warehouse, per (topic, hour) (the docstring's
        oracle, 1 and 2)."""
        totals = {
            "windows": 0,
            "expected": 0,
            "received": 0,
            "missing": 0,
            "duplicate": 0,
            "in_flight_counted": 0,
            "in_flight_not_counted": 0,
        }
        for window in report.get("windows", []):
            topic, start = window["topic"], int(window["window_start_ms"])
            key = (topic, start)
            expected = int(window["expected"])
            tiers = window.get("tiers", {})
            received = int(tiers.get(tier, {}).get("count", 0)) + int(tiers.get(tier, {}).get("malformed", 0))
            missing, duplicate = max(0, expected - received), max(0, received - expected)
            totals["windows"] += 1
            totals["expected"] += expected
            totals["received"] += received
            totals["missing"] += missing
            totals["duplicate"] += duplicate
            where = f"{tier} tier, {topic} {hour_text(start)}"
            logged, in_flight, rows = windows.logged[key], windows.in_flight[key], windows.rows[key]
            if not logged <= expected <= logged + in_flight:
                self.failures.append(
                    f"audit {where}: the producer tier counted {expected}, the producers logged {logged} "
                    f"acknowledgements (+ {in_flight} rows in flight at a kill)"
                )
            if tier == "load":
                totals["in_flight_counted"] += max(0, expected - logged)
                totals["in_flight_not_counted"] += max(0, logged + in_flight - expected)
            if received != rows:
                self.failures.append(
                    f"audit {where}: received {received}, the warehouse holds {rows} rows "
                    f"(expected {expected})"
                )
        if not totals["windows"]:
            self.failures.append(f"audit ({tier} tier): no windows reported")
        return totals

    # -- report -------------------------------------------------------------------------------------------

    def report(self) -> int:
        say()
        say(
            f"=== chaos report: seed {self.args.seed}, {self.args.minutes} min of faults, "
            f"virtual hour = {self.hour_s:.0f} s ==="
        )
        by_kind: dict[str, list[Fault]] = defaultdict(list)
        for fault in self.faults:
            by_kind[fault.kind].append(fault)
            rec = "-" if fault.recovery_s is None else f"{fault.recovery_s:6.1f} s"
            say(
                f"  t={fault.started_s:6.1f} s  {fault.kind:<26} {fault.target:<18} "
                f"held {fault.held_s:5.1f} s  recovery {rec}  {fault.detail}"
            )
            if not fault.ok:
                self.failures.append(
                    f"fault {fault.kind} on {fault.target} at t={fault.started_s:.0f} s: {fault.detail}"
                )
        say("  by kind (count, recovery median / max):")
        summary = {}
        for kind in FAULT_KINDS:
            faults = by_kind.get(kind, [])
            times = [f.recovery_s for f in faults if f.recovery_s is not None]
            summary[kind] = {
                "count": len(faults),
                "recovery_median_s": round(statistics.median(times), 1) if times else None,
                "recovery_max_s": round(max(times), 1) if times else None,
            }
            if faults:
                say(
                    f"    {kind:<26} {len(faults):3d}   {summary[kind]['recovery_median_s']} s / "
                    f"{summary[kind]['recovery_max_s']} s"
                )
        history = self.schedule_state().get("history", [])
        loads = Counter(h.get("status") for h in history)
        say(
            f"  scheduled loads: {dict(loads)} (last {len(history)} runs), "
            f"last loaded until {self.schedule_state().get('loaded_until')}"
        )
        say(
            f"  registry down during loads: {self.registry_task_failures} failed task attempt(s), "
            f"{self.registry_failed_runs} failed run(s) in those loads; broker {DISK_BROKER} full: produces "
            f"refused {dict(self.disk_full_produce_errors)}, "
            f"records read back {self.disk_full_reads[0]}/{self.disk_full_reads[1]}"
        )
        say(f"  warehouse (DuckDB) vs the producers' logs: {self.warehouse_summary}")
        say(f"  audit, producer -> load (live):    {self.audit_live}")
        say(f"  audit, producer -> mirror (target): {self.audit_target}")
        for note in self.notes:
            say(f"  note: {note}")
        result = {
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "hour_s": self.hour_s,
            "faults": [dataclasses.asdict(f) for f in self.faults],
            "by_kind": summary,
            "loads": dict(loads),
            "registry_down_task_failures": self.registry_task_failures,
            "registry_down_failed_runs": self.registry_failed_runs,
            "disk_full_produce_errors": dict(self.disk_full_produce_errors),
            "disk_full_reads": self.disk_full_reads,
            "warehouse": self.warehouse_summary,
            "audit_live": self.audit_live,
            "audit_target": self.audit_target,
            "notes": self.notes,
            "failures": self.failures,
        }
        (self.work / "report.json").write_text(json.dumps(result, indent=2) + "\n")
        if self.failures:
            say(f"FAILED: {len(self.failures)} problem(s):")
            for failure in self.failures:
                say(f"  - {failure}")
            return 1
        not_counted = self.audit_live["in_flight_not_counted"]
        say(
            "OK: nothing acknowledged was lost or duplicated (warehouse, consumer groups, mirror offsets); "
            "the audit's producer tier counted every logged acknowledgement exactly, and the mirror tier "
            f"equals the warehouse in every window after {self.mirror_kills} mirror kill -9(s)"
            + (
                f"; {not_counted} rows in flight at a producer kill -9 (acknowledged by the broker, not to "
                "the producer) are loaded and not counted by the producer tier"
                if not_counted
                else ""
            )
        )
        return 0

    def teardown(self) -> None:
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        for proc in reversed(list(self.procs.values())):
            with contextlib.suppress(Exception):
                proc.terminate(30)
        for mount in self.mounts:
            subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def parse_duration_s(text: str) -> float:
    from pipeline.durations import parse_duration_ms  # noqa: PLC0415

    return parse_duration_ms(text, "--hour") / 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the chaos run (issue 24)")
    parser.add_argument("--minutes", type=float, default=3.0, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--hour", default="2m", help="wall time of one virtual hour (default 2m)")
    parser.add_argument("--rate", type=float, default=15.0, help="records per second per producer")
    parser.add_argument("--concurrent", type=int, default=2, help="faults at a time (1 or 2)")
    parser.add_argument("--faults", default=",".join(FAULT_KINDS), help="kinds to draw from")
    parser.add_argument("--work-dir", type=Path, help="keep everything here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    args.hour_s = parse_duration_s(args.hour)
    unknown = set(args.faults.split(",")) - set(FAULT_KINDS) - {""}
    if unknown:
        parser.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(
        logging.CRITICAL
    )  # its reconnects while ZooKeeper is down are the fault
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="lumber-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"chaos run in {work}")
    run = ChaosRun(args, work)
    try:
        return run.run()
    finally:
        run.teardown()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
