"""The chaos run's system under test (:mod:`bench.chaos`): two clusters started as ``lumber dev up`` starts
them, the topics, the producers, consumers, mirror and scheduler as processes, and their health.

The *live* cluster (ZooKeeper, three brokers, the registry) gets ``page_view`` and ``click`` (RF 3,
``min.insync.replicas=2``) and the full-disk probes' topic; the *target* cluster (one broker) receives the
mirror's copies. Broker 2's log dir and the warehouse are small tmpfs mounts when the run is root.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bench.chaos_common import (
    BROKERS,
    DISK_BROKER,
    HOUR_MS,
    PARTITIONS,
    PROBE_RECORDS,
    PROBE_TOPIC,
    PRODUCERS,
    PY,
    READERS,
    REPO,
    ROLES,
    SESSION_TIMEOUT_MS,
    TMPFS_BYTES,
    TOPICS,
    hour_text,
    say,
    wait_for,
)
from bench.chaos_process import Proc, cmdline, descendants, from_spec
from broker.client.errors import ClientError
from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from broker.cluster import zk_paths
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition
from lumber.config import LumberConfig, dump_config
from lumber.dev.dev_stack import DevStack
from lumber.dev.process import free_ports
from lumber.dev.zookeeper_server import four_letter_word


class ChaosStack:
    """The system under test of one chaos run (the module docstring of :mod:`bench.chaos` lists it): its
    setup, its processes by name (:attr:`procs`), the virtual clock, and the health checks that the faults'
    recoveries and the run's end wait for.

    Concurrency: the fault threads (:class:`bench.chaos_faults.FaultInjector`) signal, kill and start the
    processes of :attr:`procs` and bump :attr:`producer_instances`, each only for the resources it claimed,
    so no two threads touch one process; the health checks only read (ZooKeeper, the brokers, files).
    Everything else is set by :meth:`setup` before the fault threads start and only read afterwards.
    """

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.hour_s = args.hour_s
        self.t0_ms = time.time_ns() // 1_000_000
        span_hours = int(args.minutes * 60 / self.hour_s) + 8
        now_hour = self.t0_ms - self.t0_ms % HOUR_MS
        self.v0_ms = now_hour - (span_hours + 24) * HOUR_MS
        self.started = time.monotonic()
        self.procs: dict[str, Proc] = {}
        self.notes: list[str] = []
        self.producer_instances: dict[str, int] = {}
        self.mounts: list[Path] = []
        self.tmpfs_ok = False
        self.zk: KazooClient | None = None

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
                lag_exporter_port=free_ports(1),  # and a lag exporter: never the default 8000
                broker_metrics_port=free_ports(brokers),  # and broker metrics: never 9308 + id
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
        # clusters, as docs/mirror.md says): the target's own registry is not used
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
            self.procs[prefix + spec.name] = from_spec(spec, handles.get(spec.name))

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

    def load_committed_after(self, count: int) -> Callable[[], bool]:
        return lambda: self.committed_loads() > count

    def target_total(self) -> int:
        return sum(self.log_ends(self.target_bootstrap()).values())

    def target_bootstrap(self) -> str:
        return f"127.0.0.1:{self.target.config.dev.broker_port}"

    def live_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.config.dev.broker_port + b}" for b in range(BROKERS))

    def log_ends(self, servers: str, topics: Sequence[str] = TOPICS) -> dict[tuple[str, int], int]:
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

    def stable_log_ends(self) -> dict[tuple[str, int], int]:
        """The source log ends once two reads 2 s apart agree (the high watermarks have settled)."""
        ends = self.log_ends(self.live_bootstrap())
        for _ in range(30):
            time.sleep(2)
            again = self.log_ends(self.live_bootstrap())
            if again == ends:
                break
            ends = again
        return ends

    def reader_out(self, name: str) -> Path:
        """The log of every offset the consumer process ``name`` read ("topic partition offset" lines)."""
        return self.work / f"{name}.log"

    def reader_owns_all(self, name: str) -> bool:
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
