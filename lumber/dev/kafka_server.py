"""Real Apache Kafka brokers on 127.0.0.1, the oracle that tests/conformance/ and bench/ compare Lumber with.

The jars come from ``make jars`` (``peers/kafka/pom.xml`` -> ``.jars/kafka/``, see
:mod:`lumber.dev.peer_jars`); nothing is downloaded here. Each node is one JVM in KRaft *combined* mode
(``process.roles=broker,controller``): the broker and a voter of the metadata quorum in one process, so one
node is a whole cluster and three nodes are a three-broker cluster with a three-voter quorum (about 350 MiB
resident each with ``-Xmx512m``; the three-node cluster uses ``-Xmx384m`` each). With ``controllers`` below
``size``, only the first ``controllers`` nodes are combined and vote; the others are brokers only
(``process.roles=broker``, no controller listener): a two-node cluster whose second broker can be killed
while the quorum (the first node alone) goes on fencing it and electing leaders.

A node gets its own folder::

    <dir>/server.properties    the config below
    <dir>/log4j2.properties    log4j2 writing <dir>/server.log (the broker's own log)
    <dir>/kafka.out            the JVM's stdout and stderr (empty unless it fails early)
    <dir>/data/                log.dirs and the KRaft metadata log

Start-up: ``kafka.tools.StorageTool format -t <cluster id> -c server.properties`` (the main class of
``kafka-storage.sh``) formats ``data/`` once, then ``kafka.Kafka server.properties`` runs the node. A node is
ready when its log says ``Kafka Server started``: KRaft brokers finish starting only once the quorum has
unfenced them, so every ready node is a leader candidate that answers Metadata. A node is stopped by its pid
(:func:`lumber.dev.process.stop`: SIGTERM, a controlled shutdown, then SIGKILL after the timeout).

The settings differ from Kafka's defaults only where a one-machine test cluster needs it: the internal
topics' replication factor (``__consumer_offsets``, the transaction log) is the cluster's size, and
``group.initial.rebalance.delay.ms=0`` so a first group member is answered at once (Lumber's coordinator does
not wait either). The JVM runs the serial collector (small heaps on a shared machine); ``jvm_options``
replaces that for the node (the storage tool keeps it), e.g. with the G1 settings of Kafka's own start
script (:data:`KAFKA_SCRIPT_JVM_OPTIONS`, which ``bench/`` uses to run Kafka as ``kafka-server-start.sh``
would). Not thread-safe: one owner starts and
stops a cluster.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from lumber.dev.peer_jars import peer_classpath
from lumber.dev.process import LOOPBACK, ProcessHandle, free_port, kill, start_and_wait, stop, wait_until
from lumber.dev.zookeeper_server import java_executable
from pipeline.errors import DevStackError

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
READY_LINE = "Kafka Server started"
#: the collector flags of a node unless told otherwise
DEFAULT_JVM_OPTIONS = ("-XX:+UseSerialGC",)
#: ``KAFKA_JVM_PERFORMANCE_OPTS`` of Kafka's ``bin/kafka-run-class.sh`` (4.x), as ``kafka-server-start.sh``
#: runs a broker (its heap, ``-Xmx1G -Xms1G``, is the node's ``heap_mb``)
KAFKA_SCRIPT_JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %-5p [%t] %c{{1}}: %m%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""


@dataclass
class KafkaNode:
    """One Kafka JVM (broker and controller). Not thread-safe: its cluster starts and stops it."""

    node_id: int
    base_dir: Path
    port: int
    #: the controller listener's port (unused by a broker-only node)
    controller_port: int
    voters: str
    cluster_size: int
    #: ``process.roles``: ``broker,controller`` (combined) or ``broker``
    roles: str = "broker,controller"
    heap_mb: int = 512
    settings: Mapping[str, str] = field(default_factory=dict)
    #: more arguments of the storage tool's ``format``, e.g. ``--add-scram``,
    #: ``SCRAM-SHA-512=[name=u,password=p]`` (KRaft's SCRAM users then exist from the first start)
    format_args: tuple[str, ...] = ()
    jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS
    handle: ProcessHandle | None = None
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The broker's own log (log4j2)."""
        return self.base_dir / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    def properties(self) -> dict[str, str]:
        """``server.properties`` as a mapping (``settings`` last, so a caller may override any of it)."""
        replicas = str(self.cluster_size)
        listeners = f"PLAINTEXT://{LOOPBACK}:{self.port}"
        if "controller" in self.roles.split(","):
            listeners += f",CONTROLLER://{LOOPBACK}:{self.controller_port}"
        props = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.address}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }
        props.update(self.settings)
        return props

    def write_config(self) -> Path:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_path))
        path = self.base_dir / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        return path

    @property
    def pid(self) -> int | None:
        """The running JVM's pid (None when stopped)."""
        return self.handle.pid if self.handle is not None else None

    def _java(
        self, main_class: str, *args: str, heap_mb: int, options: tuple[str, ...] = DEFAULT_JVM_OPTIONS
    ) -> list[str]:
        return [
            java_executable(),
            f"-Xmx{heap_mb}m",
            *options,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.base_dir / 'log4j2.properties'}",
            "-cp",
            peer_classpath("kafka"),
            main_class,
            *args,
        ]

    def format(self, cluster_id: str) -> None:
        """Format ``data/`` for ``cluster_id`` (the storage tool; a no-op error if already formatted)."""
        argv = self._java(
            STORAGE_TOOL_CLASS,
            "format",
            "-t",
            cluster_id,
            "-c",
            str(self.write_config()),
            *self.format_args,
            heap_mb=256,
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise DevStackError(
                f"Kafka's storage tool could not format {self.data_dir} (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}"
            )

    def argv(self) -> list[str]:
        return self._java(
            MAIN_CLASS,
            str(self.base_dir / "server.properties"),
            heap_mb=self.heap_mb,
            options=self.jvm_options,
        )

    def is_ready(self) -> bool:
        try:
            return READY_LINE in self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return False

    def start(self, timeout_s: float = 90.0) -> ProcessHandle:
        """Start the JVM (already formatted) and wait until it has started, as the log says."""
        self.write_config()
        if self.log_path.exists():  # a restart: only this run's start line counts
            self.log_path.rename(self.log_path.with_suffix(f".log.{self.log_path.stat().st_mtime_ns}"))
        self.handle, self._popen = start_and_wait(
            f"Kafka node {self.node_id} on {self.address}",
            self.argv(),
            self.base_dir / "kafka.out",
            self.is_ready,
            timeout_s,
        )
        return self.handle

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``timeout_s``."""
        if self.handle is not None:
            stop(self.handle, timeout_s=timeout_s, popen=self._popen)
            self.handle = None
            self._popen = None

    def kill(self) -> None:
        """SIGKILL at once (fault scenarios)."""
        if self.handle is not None:
            kill(self.handle, popen=self._popen)
            self.handle = None
            self._popen = None


@dataclass
class KafkaCluster:
    """``size`` Kafka nodes forming one KRaft quorum, on free ports, under ``base_dir``: the first
    ``controllers`` (default: all) combined, the rest brokers only."""

    base_dir: Path
    size: int = 1
    controllers: int | None = None
    heap_mb: int | None = None
    settings: Mapping[str, str] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS
    cluster_id: str = field(default_factory=lambda: _cluster_id())  # noqa: PLW0108 - defined below
    nodes: list[KafkaNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise DevStackError(f"a Kafka cluster needs at least one node, asked for {self.size}")
        controllers = self.size if self.controllers is None else self.controllers
        if not 1 <= controllers <= self.size:
            raise DevStackError(
                f"a Kafka cluster of {self.size} nodes needs 1 to {self.size} controllers, asked for "
                f"{controllers}"
            )
        if not self.nodes:
            heap = self.heap_mb or (512 if self.size == 1 else 384)
            ports = [(free_port(), free_port()) for _ in range(self.size)]
            voters = ",".join(f"{i + 1}@{LOOPBACK}:{ctl}" for i, (_, ctl) in enumerate(ports[:controllers]))
            self.nodes = [
                KafkaNode(
                    node_id=i + 1,
                    base_dir=self.base_dir / f"node-{i + 1}",
                    port=port,
                    controller_port=ctl,
                    voters=voters,
                    cluster_size=self.size,
                    roles="broker,controller" if i < controllers else "broker",
                    heap_mb=heap,
                    settings=self.settings,
                    jvm_options=self.jvm_options,
                )
                for i, (port, ctl) in enumerate(ports)
            ]

    @property
    def bootstrap(self) -> str:
        """The bootstrap address list of every node."""
        return ",".join(node.address for node in self.nodes)

    def start(self, timeout_s: float = 120.0) -> None:
        """Check the jars, format each node's storage, start every node, wait for all to have started."""
        peer_classpath("kafka")  # the clear 'run make jars' error before anything else
        for node in self.nodes:
            node.format(self.cluster_id)
        try:
            self._start_all(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start_all(self, timeout_s: float) -> None:
        if self.size == 1:
            self.nodes[0].start(timeout_s)
            return
        # start_and_wait waits for one node; a node of a larger quorum cannot start alone, so spawn all
        # with a trivially true readiness and then wait for every log to say the node started
        for node in self.nodes:
            node.write_config()
            node.handle, node._popen = start_and_wait(
                f"Kafka node {node.node_id} on {node.address}",
                node.argv(),
                node.base_dir / "kafka.out",
                lambda: True,
                timeout_s,
            )
        for node in self.nodes:
            popen = node._popen

            def ready(node: KafkaNode = node, popen: subprocess.Popen[bytes] | None = popen) -> bool:
                if popen is not None and popen.poll() is not None:
                    raise DevStackError(
                        f"Kafka node {node.node_id} exited with code {popen.returncode} while starting; "
                        f"see {node.log_path}"
                    )
                return node.is_ready()

            wait_until(ready, timeout_s, f"Kafka node {node.node_id} to start (log: {node.log_path})")

    def stop(self) -> None:
        """Stop every node by its pid, all at the same time: a node stopped after the quorum lost its majority
        would wait its whole timeout for a controlled shutdown the controller can no longer grant."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            for failure in [f.exception() for f in [pool.submit(node.stop) for node in self.nodes]]:
                if failure is not None:
                    raise failure

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as ``random-uuid`` prints).
    Never one that starts with ``-``: the storage tool would read it as an option (Kafka's own
    ``Uuid.randomUuid`` draws again for the same reason)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not found.startswith("-"):
            return found
