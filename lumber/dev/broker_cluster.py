"""Real Lumber broker processes on 127.0.0.1 for the tests and ``bench/``: ``lumber broker start``, one
process per broker, on one ZooKeeper chroot.

A :class:`BrokerProcess` writes its own ``lumber.toml`` (``[zookeeper]``, ``[broker]``, ``[log]``: a setting
goes to ``[log]`` when it is one of the log's keys, else to ``[broker]``) into its folder, runs ``python -m
lumber --config <folder>/lumber.toml broker start`` with its output in ``<folder>/broker.log`` and its log dir
at ``<folder>/logs``, and is ready once its ZooKeeper registration names its address, the chroot has a
controller (``/controller``) and its port accepts connections. It can be stopped (SIGTERM), killed (SIGKILL)
and restarted with the same id, port and log dir. The brokers flush every 20 ms (``[log] flush_ms``, unless
told otherwise) so that callers need not wait the paper's second for messages to be exposed, use 4 s ZooKeeper
sessions so that a killed broker's registration goes soon (a cluster may ask for shorter ones:
``session_timeout_ms`` among the settings goes to ``[zookeeper]``, for the kill -9 loops, whose every round
waits out a killed broker's session), and have no metrics endpoint unless asked.

:class:`BrokerCluster` is brokers sharing one chroot, with topic helpers that wait until the brokers serve
the topic; :func:`bench_cluster` is a ZooKeeper of its own with such a cluster, for ``bench/``. The pytest
fixtures over these are in ``tests/support/broker_cluster.py``. Not thread-safe: one owner starts and stops
a cluster.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.cluster import zk_paths
from broker.cluster.partition_state import PartitionState
from broker.cluster.topic_admin import TopicAdmin
from lumber.dev.process import ProcessHandle, free_port, kill, start_and_wait, stop, wait_until
from lumber.dev.zookeeper_server import ZooKeeperServer, make_chroot, new_client

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as ConfluentPartition

BROKER_SESSION_TIMEOUT_MS = 4000
#: settings that go to ``[zookeeper]`` rather than ``[broker]`` or ``[log]``
_ZOOKEEPER_SETTINGS = {"session_timeout_ms"}
_LOG_SETTINGS = {
    "recovery_checkpoint_interval_ms",
    "flush_ms",
    "flush_messages",
    "segment_bytes",
    "retention_ms",
    "retention_bytes",
    "retention_check_interval_ms",
    "max_message_bytes",
    "expose",
    "index_interval_bytes",
    "flush_on_ack",
    "validate_records",
    "cleanup_policy",
    "min_cleanable_dirty_ratio",
    "delete_retention_ms",
    "min_compaction_lag_ms",
    "cleaner_threads",
    "cleaner_dedupe_buffer_bytes",
    "cleaner_io_buffer_bytes",
    "cleaner_backoff_ms",
    "file_delete_delay_ms",
    "cleaner_io_max_bytes_per_second",
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


@dataclass
class BrokerProcess:
    """One ``lumber broker start`` process and everything needed to start it again the same way."""

    broker_id: int
    port: int
    base_dir: Path
    zk_connect: str
    zk: KazooClient
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: more ``[zookeeper]`` keys (``auth_user``, ``auth_password_file``)
    zookeeper_settings: Mapping[str, Any] = field(default_factory=dict)
    handle: ProcessHandle | None = None
    popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "logs"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "broker.log"

    @property
    def config_path(self) -> Path:
        return self.base_dir / "lumber.toml"

    def write_config(self) -> None:
        broker = {
            "broker_id": self.broker_id,
            "host": "127.0.0.1",
            "port": self.port,
            "num_io_threads": 3,
            "metrics_port": 0,  # off unless a test asks (9308 + id would collide between parallel runs)
        }
        log: dict[str, Any] = {"log_dirs": [str(self.log_dir)], "flush_ms": 20}
        zookeeper: dict[str, Any] = {
            "connect": self.zk_connect,
            "session_timeout_ms": BROKER_SESSION_TIMEOUT_MS,
        }
        zookeeper.update(self.zookeeper_settings)
        for key, value in self.settings.items():
            if key in _ZOOKEEPER_SETTINGS:
                zookeeper[key] = value
            else:
                (log if key in _LOG_SETTINGS else broker)[key] = value
        lines = [
            "[zookeeper]",
            *(f"{k} = {_toml_value(v)}" for k, v in zookeeper.items()),
            "",
            "[broker]",
            *(f"{k} = {_toml_value(v)}" for k, v in broker.items()),
            "",
            "[log]",
            *(f"{k} = {_toml_value(v)}" for k, v in log.items()),
        ]
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("\n".join(lines) + "\n")

    def registered(self) -> bool:
        try:
            data, _ = self.zk.get(zk_paths.broker_path(self.broker_id))
        except NoNodeError:
            return False
        if zk_paths.decode_broker(zk_paths.broker_path(self.broker_id), data) != ("127.0.0.1", self.port):
            return False
        if self.zk.exists(zk_paths.CONTROLLER_PATH) is None:
            return False  # registered before it stood for controller: admin clients would hear of none
        with socket.socket() as sock:
            sock.settimeout(1.0)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def start(self, timeout_s: float = 60.0) -> None:
        if self.running:
            raise RuntimeError(f"broker {self.broker_id} is already running (pid {self.popen.pid})")  # type: ignore[union-attr]
        self.write_config()
        argv = [sys.executable, "-m", "lumber", "--config", str(self.config_path), "broker", "start"]
        self.handle, self.popen = start_and_wait(
            f"broker-{self.broker_id}", argv, self.log_path, self.registered, timeout_s
        )

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        """SIGTERM: a clean shutdown."""
        if self.handle is not None:
            stop(self.handle, popen=self.popen)
        self.handle = self.popen = None

    def kill(self) -> None:
        """SIGKILL: a crash (its ZooKeeper registration stays until the session expires)."""
        if self.handle is not None:
            kill(self.handle, popen=self.popen)
        self.handle = self.popen = None

    def restart(self, timeout_s: float = 60.0) -> None:
        if self.running:
            self.stop()
        self.start(timeout_s)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class BrokerCluster:
    """Brokers sharing one ZooKeeper chroot; the topic helpers wait until the brokers serve the topic."""

    def __init__(self, zk_connect: str, base_dir: Path) -> None:
        self.zk_connect = zk_connect
        self.base_dir = base_dir
        self.zk = new_client(zk_connect)
        self.admin = TopicAdmin(self.zk)
        self.brokers: list[BrokerProcess] = []

    def add_broker(
        self, settings: Mapping[str, Any] | None = None, *, port: int | None = None
    ) -> BrokerProcess:
        """Start one more broker; ``port`` is its first listener's when ``settings`` give ``listeners``
        (registered at 127.0.0.1:port as its default address)."""
        broker_id = len(self.brokers)
        broker = BrokerProcess(
            broker_id,
            free_port() if port is None else port,
            self.base_dir / f"broker-{broker_id}",
            self.zk_connect,
            self.zk,
            dict(settings or {}),
        )
        self.brokers.append(broker)
        broker.start()
        return broker

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def create_topic(
        self,
        topic: str,
        partitions: int,
        assignment: Mapping[int, Sequence[int]] | None = None,
        timeout_s: float = 30.0,
        *,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """Create ``topic`` in ZooKeeper and wait until each partition's leader and in-sync replicas have
        its log."""
        created = self.admin.create_topic(
            topic,
            partitions,
            replication_factor=replication_factor,
            assignment=assignment,
            configs=configs,
        )
        self.wait_for_topic(topic, created, timeout_s)
        return created

    def wait_for_topic(
        self, topic: str, assignment: Mapping[int, Sequence[int]], timeout_s: float = 30.0
    ) -> None:
        def served() -> bool:
            states = self.admin.describe_states(topic)
            return len(states) == len(assignment) and all(
                (self.brokers[r].log_dir / f"{topic}-{p}").is_dir()
                for p, state in states.items()
                for r in state.isr
                if self.brokers[r].running
            )

        wait_until(served, timeout_s, f"the brokers to create the partitions of {topic}")

    def state_of(self, topic: str, partition: int) -> PartitionState:
        """The partition's state znode as it is now."""
        return self.admin.describe_states(topic)[partition]

    def leader_of(self, topic: str, partition: int) -> BrokerProcess:
        """The broker the partition's state names as leader (KeyError-free: -1 raises)."""
        leader = self.state_of(topic, partition).leader
        if leader < 0:
            raise AssertionError(f"{topic}-{partition} has no leader: {self.state_of(topic, partition)}")
        return self.brokers[leader]

    def wait_for_isr(
        self, topic: str, partition: int, isr: Sequence[int], timeout_s: float = 30.0
    ) -> PartitionState:
        """Wait until the partition's ISR is exactly ``isr`` (any order); returns that state."""
        wanted = sorted(isr)
        wait_until(
            lambda: sorted(self.state_of(topic, partition).isr) == wanted,
            timeout_s,
            f"{topic}-{partition}'s ISR to be {wanted} (now {list(self.state_of(topic, partition).isr)})",
        )
        return self.state_of(topic, partition)

    def wait_for_leader(
        self, topic: str, partition: int, predicate: Callable[[PartitionState], bool], timeout_s: float = 30.0
    ) -> PartitionState:
        """Wait until the partition's state satisfies ``predicate``; returns that state."""
        wait_until(
            lambda: predicate(self.state_of(topic, partition)),
            timeout_s,
            f"{topic}-{partition}'s state to change (now {self.state_of(topic, partition)})",
        )
        return self.state_of(topic, partition)

    def controller_id(self) -> int:
        """The broker holding ``/controller`` (-1: none)."""
        try:
            data, _ = self.zk.get(zk_paths.CONTROLLER_PATH)
        except NoNodeError:
            return -1
        return zk_paths.decode_controller(zk_paths.CONTROLLER_PATH, data)

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark as its leader answers ListOffsets (latest)."""
        consumer = ConfluentConsumer(
            {"bootstrap.servers": self.bootstrap_servers, "group.id": "broker-cluster-probe"}
        )
        try:
            return int(consumer.get_watermark_offsets(ConfluentPartition(topic, partition), timeout=10)[1])
        finally:
            consumer.close()

    def stop(self) -> None:
        for broker in self.brokers:
            try:
                broker.stop()
            except Exception:  # noqa: BLE001 - a broker that would not stop is killed, the others still stop
                broker.kill()
        self.zk.stop()
        self.zk.close()


@contextlib.contextmanager
def bench_cluster(base_dir: Path, brokers: int = 1, **settings: Any) -> Iterator[BrokerCluster]:
    """A ZooKeeper of its own and ``brokers`` broker processes, outside pytest (for ``bench/``)."""
    zookeeper = ZooKeeperServer(base_dir / "zookeeper", free_port())
    zookeeper.start()
    try:
        cluster = BrokerCluster(make_chroot(zookeeper.connect, "bench"), base_dir / "brokers")
        try:
            for _ in range(brokers):
                cluster.add_broker(settings)
            yield cluster
        finally:
            cluster.stop()
    finally:
        zookeeper.stop()
