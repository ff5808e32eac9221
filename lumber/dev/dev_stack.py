"""The local stack behind ``lumber dev up|status|down``: real services as background processes on 127.0.0.1.

State folder layout (``--state-dir``, default ``.lumber``)::

    <state_dir>/stack.json       what is running: one entry per service (pid, start time, ports, log)
    <state_dir>/lumber.toml      the stack's config: clients read it, and every service starts from it
    <state_dir>/<service>/       each service's config, data and log (broker-N/logs: broker N's log dir)

``lumber.toml`` describes the stack as it runs: ZooKeeper's, the registry's, the console's and the lag
exporter's addresses, ``[dev] state_dir``, and in ``[broker]`` and ``[log]`` broker 0 (its id, port and log
dir); broker N starts from the same file with ``--id N --port <broker_port + N> --metrics-port
<broker_metrics_port + N> --log-dir <state_dir>/broker-N/logs`` (``--metrics-port 0`` when
``[dev] broker_metrics_port`` is 0), as a comment at its top says. ``[broker] default_replication_factor`` is
``min(brokers, 3)`` unless the user's config sets it: the brokers use it for the topics they create, and
``lumber topics create`` for topics created without ``--replication-factor``.

``stack.json``::

    {"state_dir": "...", "config_path": "...", "started_at": "<ISO-8601 UTC>",
     "services": [{"name": "zookeeper", "endpoint": "127.0.0.1:2181", "ports": [2181],
                   "process": {"name": ..., "pid": ..., "start_ticks": ..., "argv": [...], "log_path": ...}}]}

The services, in start order: ZooKeeper, with ``--hdfs`` (``[dev] hdfs``) HDFS's NameNode and DataNode
(:mod:`lumber.dev.hdfs_server`, data and logs in ``<state_dir>/hdfs/``, ports ``[dev] hdfs_*_port``), the
brokers, the schema registry, the lag exporter (``lumber groups
lag --all-groups --watch`` on ``[dev] lag_exporter_port``, every ``[dev] lag_exporter_interval_ms``; only
with brokers), and the web console (``lumber console`` on ``[dev] console_port``), which reads the others
afresh on every request; the stack's ``[console] lag_exporter_url`` names the stack's exporter (unless the
user's config names another), so that ZooKeeper groups' pages show their lag history. With HDFS the stack's
``[load] warehouse_url`` is ``hdfs://127.0.0.1:<hdfs_namenode_port>/warehouse`` and ``[load] webhdfs_url``
the NameNode's HTTP address, so ``lumber etl run``, ``etl status``, ``audit verify`` and the console read
and write the warehouse there. The NameNode is formatted once (a later ``up`` keeps the namespace); its
readiness is the DataNode's: HDFS is ready once the DataNode has registered and the NameNode left safe mode.

``up --secure`` (``[dev] secure``) also gives each broker a SASL_SSL listener with a certificate of a CA made
for the stack and adds a SCRAM user: :mod:`lumber.dev.dev_security` (files in ``<state_dir>/security``, the
clients' config ``<state_dir>/lumber-secure.toml``).

``up`` refuses when the stack is already up or a port it needs is taken, starts the services in order and
waits until each answers, and writes ``stack.json`` after every start, so ``down`` can always stop what was
started even if ``up`` failed half-way. Brokers do not create topics on demand (``[broker]
auto_create_topics`` is off), so ``up`` creates the audit topic (``[audit] topic``) that producers and load
jobs publish their counts to, as Kafka's brokers create their internal topics, with
``default_replication_factor`` replicas. ``down`` stops exactly the
recorded processes, by pid (checked against their start time), in reverse order; ``--purge`` also deletes
the state folder.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.errors import ClusterError, TopicExistsError
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zookeeper_auth import new_zookeeper_client
from lumber.config import LumberConfig, dump_config, write_private
from lumber.dev.dev_security import DevSecurity
from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from lumber.dev.process import ProcessHandle, port_in_use, start_and_wait, stop
from lumber.dev.zookeeper_server import ZooKeeperServer
from pipeline.errors import DevStackError

STATE_FILE = "stack.json"
#: The replication factor of a stack of this many brokers or more, unless the config sets one (Kafka's
#: production advice, and what the issue asks of ``dev up --brokers 3``).
MAX_DEFAULT_REPLICATION_FACTOR = 3
CONFIG_FILE = "lumber.toml"
SECURE_CONFIG_FILE = "lumber-secure.toml"
#: The folder below the stack's HDFS where its warehouse lives.
HDFS_WAREHOUSE_PATH = "/warehouse"


@dataclass(frozen=True)
class ServiceSpec:
    """How to start one service of the stack and tell when it is ready."""

    name: str
    ports: tuple[int, ...]
    endpoint: str
    argv: Callable[[], Sequence[str]]
    log_path: Path
    is_ready: Callable[[], bool]
    prepare: Callable[[], object] = field(default=lambda: None)


@dataclass(frozen=True)
class ServiceState:
    name: str
    endpoint: str
    ports: tuple[int, ...]
    process: ProcessHandle

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "endpoint": self.endpoint,
            "ports": list(self.ports),
            "process": self.process.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServiceState:
        return cls(
            name=str(data["name"]),
            endpoint=str(data["endpoint"]),
            ports=tuple(int(p) for p in data["ports"]),
            process=ProcessHandle.from_json(data["process"]),
        )


class DevStack:
    """The stack recorded in one state folder. Not thread-safe; one CLI command at a time."""

    def __init__(self, config: LumberConfig, state_dir: Path | None = None) -> None:
        self.config = config
        self.state_dir = Path(state_dir if state_dir is not None else config.dev.state_dir).absolute()
        self.security = DevSecurity(self.state_dir / "security", config.dev.secure_user)

    @property
    def state_path(self) -> Path:
        return self.state_dir / STATE_FILE

    @property
    def config_path(self) -> Path:
        return self.state_dir / CONFIG_FILE

    @property
    def secure_config_path(self) -> Path:
        """The stack's config with every client on SASL_SSL (``up --secure``)."""
        return self.state_dir / SECURE_CONFIG_FILE

    @property
    def sasl_ssl_servers(self) -> list[str]:
        """``host:port`` of every broker's SASL_SSL listener (``up --secure``)."""
        dev = self.config.dev
        return [f"127.0.0.1:{dev.broker_sasl_ssl_port + i}" for i in range(dev.brokers)]

    def stack_config(self) -> LumberConfig:
        """The config that clients of this stack use: the user's, pointed at the stack's ports."""
        zookeeper = self.config.zookeeper.replace(connect=f"127.0.0.1:{self.config.dev.zookeeper_port}")
        dev = self.config.dev.replace(state_dir=str(self.state_dir))
        registry = self.config.registry.replace(
            host="127.0.0.1",
            port=self.config.dev.registry_port,
            url=f"http://127.0.0.1:{self.config.dev.registry_port}",
        )
        broker = self.config.broker.replace(
            broker_id=0,
            host="127.0.0.1",
            port=self.config.dev.broker_port,
            metrics_port=self.config.dev.broker_metrics_port,
            default_replication_factor=self.replication_factor,
            **(self.security.broker_settings() if self.config.dev.secure else {}),
        )
        log = self.config.log.replace(log_dirs=[str(self.broker_log_dir(0))])
        console = self.config.console.replace(
            host="127.0.0.1", port=self.config.dev.console_port, lag_exporter_url=self.lag_exporter_url
        )
        load = self.config.load
        if self.config.dev.hdfs:
            hdfs = self.hdfs_server()
            load = load.replace(warehouse_url=hdfs.url + HDFS_WAREHOUSE_PATH, webhdfs_url=hdfs.webhdfs_url)
        return self.config.replace(
            zookeeper=zookeeper,
            dev=dev,
            registry=registry,
            broker=broker,
            log=log,
            console=console,
            load=load,
            source=str(self.config_path),
        )

    def hdfs_server(self) -> HdfsServer:
        """The stack's HDFS (``[dev] hdfs_*``), in ``<state_dir>/hdfs``."""
        dev = self.config.dev
        ports = HdfsPorts(
            dev.hdfs_namenode_port,
            dev.hdfs_namenode_http_port,
            dev.hdfs_datanode_port,
            dev.hdfs_datanode_http_port,
            dev.hdfs_datanode_ipc_port,
        )
        return HdfsServer(
            self.state_dir / "hdfs",
            ports,
            namenode_heap_mb=dev.hdfs_namenode_heap_mb,
            datanode_heap_mb=dev.hdfs_datanode_heap_mb,
        )

    @property
    def lag_exporter_url(self) -> str:
        """``[console] lag_exporter_url`` of the stack: the user's if their config names one, else the
        stack's own exporter (none without brokers: there is no lag to watch)."""
        if self.config.console.lag_exporter_url or not self.config.dev.brokers:
            return self.config.console.lag_exporter_url
        return f"http://127.0.0.1:{self.config.dev.lag_exporter_port}"

    @property
    def replication_factor(self) -> int:
        """``[broker] default_replication_factor`` of the stack: the user's if their config sets it, else
        ``min(brokers, 3)`` (at least 1)."""
        if "default_replication_factor" in self.config.broker.model_fields_set:
            return self.config.broker.default_replication_factor
        return max(1, min(self.config.dev.brokers, MAX_DEFAULT_REPLICATION_FACTOR))

    def broker_log_dir(self, broker_id: int) -> Path:
        return self.state_dir / f"broker-{broker_id}" / "logs"

    def config_text(self) -> str:
        """``lumber.toml`` of the stack (see the module docstring)."""
        dev = self.config.dev
        header = [
            f"# written by `lumber dev up`: the config of the stack in {self.state_dir}",
            (
                f"# [broker] and [log] describe broker 0; broker N (of {dev.brokers}) runs with --id N "
                f"--port {dev.broker_port}+N --metrics-port {dev.broker_metrics_port}+N (0: none) "
                f"--log-dir {self.state_dir}/broker-N/logs"
            ),
            "",
        ]
        return "\n".join(header) + dump_config(self.stack_config())

    def secure_config_text(self) -> str:
        """``lumber-secure.toml``: the stack's config with [producer], [consumer] and [load] on SASL_SSL."""
        stack = self.stack_config()
        keys = self.security.client_keys(self.sasl_ssl_servers)
        secure = stack.replace(
            producer=stack.producer.replace(**keys),
            consumer=stack.consumer.replace(**keys),
            load=stack.load.replace(**keys),
        )
        header = (
            f"# written by `lumber dev up --secure`: the stack in {self.state_dir}, clients on SASL_SSL\n"
        )
        return header + dump_config(secure)

    def services(self) -> list[ServiceSpec]:
        """The services ``up`` starts, in start order: ZooKeeper, HDFS (with ``[dev] hdfs``), the brokers,
        the schema registry, the lag exporter (with brokers), then the console."""
        dev = self.config.dev
        zookeeper = ZooKeeperServer(
            self.state_dir / "zookeeper", dev.zookeeper_port, heap_mb=dev.zookeeper_heap_mb
        )
        registry_url = f"http://127.0.0.1:{dev.registry_port}"
        registry_argv = [
            *self._lumber_argv(),
            "schemas",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(dev.registry_port),
            "--zookeeper-connect",
            zookeeper.connect,
        ]
        brokers = [self._broker_spec(i, zookeeper.connect) for i in range(dev.brokers)]
        console_url = f"http://127.0.0.1:{dev.console_port}/"
        console_argv = [*self._lumber_argv(), "console"]
        lag_exporter = [self._lag_exporter_spec()] if dev.brokers else []
        hdfs = self._hdfs_specs() if dev.hdfs else []
        return [
            ServiceSpec(
                name="zookeeper",
                ports=(dev.zookeeper_port,),
                endpoint=zookeeper.connect,
                argv=zookeeper.argv,
                log_path=zookeeper.log_path,
                is_ready=zookeeper.is_ready,
                prepare=zookeeper.write_config,
            ),
            *hdfs,
            *brokers,
            ServiceSpec(
                name="registry",
                ports=(dev.registry_port,),
                endpoint=registry_url,
                argv=lambda: registry_argv,
                log_path=self.state_dir / "registry" / "registry.log",
                is_ready=lambda: _http_answers(registry_url),
            ),
            *lag_exporter,
            ServiceSpec(
                name="console",
                ports=(dev.console_port,),
                endpoint=console_url,
                argv=lambda: console_argv,
                log_path=self.state_dir / "console" / "console.log",
                is_ready=lambda: _http_answers(console_url),
            ),
        ]

    def _lumber_argv(self) -> list[str]:
        """``lumber --config <the stack's lumber.toml>``, run by this Python: the start of every service's
        command but ZooKeeper's."""
        return [sys.executable, "-m", "lumber", "--config", str(self.config_path)]

    def _broker_spec(self, broker_id: int, zookeeper_connect: str) -> ServiceSpec:
        port = self.config.dev.broker_port + broker_id
        base = self.state_dir / f"broker-{broker_id}"
        log_path = base / "broker.log"
        argv = [
            *self._lumber_argv(),
            "broker",
            "start",
            "--id",
            str(broker_id),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-dir",
            str(self.broker_log_dir(broker_id)),
            "--zookeeper-connect",
            zookeeper_connect,
        ]
        ports: tuple[int, ...] = (port,)
        if self.config.dev.secure:
            secure_port = self.config.dev.broker_sasl_ssl_port + broker_id
            argv += ["--listeners", ",".join(self.security.listeners(port, secure_port))]
            ports = (port, secure_port)
        metrics_base = self.config.dev.broker_metrics_port
        metrics_port = metrics_base + broker_id if metrics_base else 0
        argv += ["--metrics-port", str(metrics_port)]
        if metrics_port:
            ports = (*ports, metrics_port)
        return ServiceSpec(
            name=f"broker-{broker_id}",
            ports=ports,
            endpoint=f"127.0.0.1:{port}",
            argv=lambda: argv,
            log_path=log_path,
            is_ready=lambda: _broker_is_up(log_path, port),
        )

    def _hdfs_specs(self) -> list[ServiceSpec]:
        """The NameNode (formatted first, once) and the DataNode. The NameNode counts as started once it
        runs; the DataNode's readiness is HDFS's (it registered, the NameNode left safe mode), and it fails
        at once when the NameNode has exited."""
        server = self.hdfs_server()
        ports = server.ports
        return [
            ServiceSpec(
                name="hdfs-namenode",
                ports=(ports.namenode, ports.namenode_http),
                endpoint=server.url,
                argv=server.namenode_argv,
                log_path=server.namenode_log,
                is_ready=lambda: True,
                prepare=server.prepare_namenode,
            ),
            ServiceSpec(
                name="hdfs-datanode",
                ports=(ports.datanode, ports.datanode_http, ports.datanode_ipc),
                endpoint=f"127.0.0.1:{ports.datanode}",
                argv=server.datanode_argv,
                log_path=server.datanode_log,
                is_ready=server.datanode_ready,
            ),
        ]

    def _lag_exporter_spec(self) -> ServiceSpec:
        """``lumber groups lag --all-groups --watch`` serving its metrics and every group's window of
        observations (``/lag-history``, where the console's group pages find ZooKeeper groups' lag
        history) on ``[dev] lag_exporter_port``."""
        dev = self.config.dev
        url = f"http://127.0.0.1:{dev.lag_exporter_port}"
        argv = [
            *self._lumber_argv(),
            "groups",
            "lag",
            "--all-groups",
            "--watch",
            "--interval",
            f"{dev.lag_exporter_interval_ms}ms",
            "--metrics-port",
            str(dev.lag_exporter_port),
            "--metrics-host",
            "127.0.0.1",
            "--json",
        ]
        return ServiceSpec(
            name="lag-exporter",
            ports=(dev.lag_exporter_port,),
            endpoint=url,
            argv=lambda: argv,
            log_path=self.state_dir / "lag-exporter" / "lag-exporter.log",
            is_ready=lambda: _http_answers(f"{url}/metrics"),
        )

    # -- state file ------------------------------------------------------------------------------------

    def read_state(self) -> list[ServiceState]:
        """The recorded services, or [] when the stack was never started here (or was brought down)."""
        try:
            raw = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return []
        except (json.JSONDecodeError, OSError) as exc:
            raise DevStackError(f"{self.state_path}: unreadable stack state: {exc}") from exc
        try:
            return [ServiceState.from_json(s) for s in raw["services"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise DevStackError(f"{self.state_path}: malformed stack state: missing or bad {exc}") from exc

    def _write_state(self, started: list[ServiceState], started_at: str) -> None:
        doc = {
            "state_dir": str(self.state_dir),
            "config_path": str(self.config_path),
            "started_at": started_at,
            "services": [s.to_json() for s in started],
        }
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.state_path)

    # -- commands ----------------------------------------------------------------------------------------

    def up(
        self,
        progress: Callable[[str], None] = lambda _msg: None,
        *,
        down_command: str = "lumber dev down",
    ) -> dict[str, Any]:
        """Start every service and wait until each is ready; return the connection summary.

        ``down_command`` is what the refusal of a stack that is already up tells the user to run: the CLI
        passes the command as the user would type it (with its ``--state-dir``)."""
        running = [s for s in self.read_state() if s.process.is_running()]
        if running:
            pids = ", ".join(f"{s.name} pid {s.process.pid}" for s in running)
            raise DevStackError(
                f"the stack in {self.state_dir} is already up ({pids}); stop it first with:  {down_command}"
            )
        specs = self.services()
        for spec in specs:
            for port in spec.ports:
                if port_in_use(port):
                    raise DevStackError(
                        f"cannot start {spec.name}: port 127.0.0.1:{port} is already in use "
                        f"(stop what holds it, or choose another port in [dev] of lumber.toml)"
                    )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.config.dev.secure:
            self.security.prepare()
            write_private(self.secure_config_path, self.secure_config_text())
        self.config_path.write_text(self.config_text())
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        started: list[ServiceState] = []
        self._write_state(started, started_at)
        timeout_s = self.config.dev.start_timeout_ms / 1000
        try:
            for spec in specs:
                progress(f"starting {spec.name} on {spec.endpoint}")
                spec.prepare()

                def record(handle: ProcessHandle, spec: ServiceSpec = spec) -> None:
                    started.append(ServiceState(spec.name, spec.endpoint, spec.ports, handle))
                    self._write_state(started, started_at)

                handle, _ = start_and_wait(
                    spec.name, spec.argv(), spec.log_path, spec.is_ready, timeout_s, on_spawned=record
                )
                progress(f"{spec.name} is ready (pid {handle.pid})")
            if self.config.dev.brokers:
                self._create_audit_topic(progress)
        except BaseException:
            self.down()
            raise
        return self.summary(with_password=True)

    def _create_audit_topic(self, progress: Callable[[str], None]) -> None:
        """Create ``[audit] topic`` (``[audit] topic_partitions`` partitions, as its publishers
        would, ``default_replication_factor`` replicas) unless it exists."""
        config = self.stack_config()
        topic = config.audit.topic
        client = new_zookeeper_client(
            hosts=config.zookeeper.connect, timeout=config.zookeeper.session_timeout_ms / 1000
        )
        try:
            client.start(timeout=config.zookeeper.connect_timeout_ms / 1000)
            if self.config.dev.secure:
                self.security.add_user(client)
                progress(f"added the SCRAM user {self.security.user!r} (SCRAM-SHA-512 and -256)")
            TopicAdmin(client).create_topic(
                topic,
                config.producer.audit_topic_partitions,
                replication_factor=config.broker.default_replication_factor,
            )
        except TopicExistsError:
            return
        except (KazooTimeoutError, KazooException, ClusterError) as exc:
            raise DevStackError(f"cannot create the audit topic {topic!r}: {exc}") from exc
        finally:
            client.stop()
            client.close()
        progress(
            f"created the audit topic {topic!r} with {config.broker.default_replication_factor} "
            f"replica{'s' if config.broker.default_replication_factor > 1 else ''} per partition"
        )

    def summary(self, *, with_password: bool = False) -> dict[str, Any]:
        """What is recorded and whether each process is alive: the JSON that ``--json`` prints, with the
        addresses a client needs at the top (``bootstrap_servers``, ``zookeeper_connect``,
        ``registry_url``, ``console_url``, ``lag_exporter_url``: the stack's exporter, None without
        one; ``warehouse_url`` and ``webhdfs_url``: the stack's HDFS when it runs one, else ``[load]``'s);
        for a secured stack, ``secure``: :meth:`~lumber.dev.dev_security.DevSecurity.client_settings`
        (the password only ``with_password``: what ``up --json`` prints)."""
        services = self.read_state()
        stack = self.stack_config()
        namenode = next((s for s in services if s.name == "hdfs-namenode"), None)
        summary: dict[str, Any] = {
            "state_dir": str(self.state_dir),
            "config_path": str(self.config_path),
            "bootstrap_servers": [s.endpoint for s in services if s.name.startswith("broker-")],
            "zookeeper_connect": stack.zookeeper.connect,
            "registry_url": stack.registry.url,
            "console_url": f"http://127.0.0.1:{stack.console.port}/",
            "lag_exporter_url": next((s.endpoint for s in services if s.name == "lag-exporter"), None),
            "warehouse_url": namenode.endpoint + HDFS_WAREHOUSE_PATH
            if namenode
            else stack.load.warehouse_url,
            "webhdfs_url": f"http://127.0.0.1:{namenode.ports[1]}"
            if namenode
            else stack.load.webhdfs_url or None,
            "services": [
                {
                    "name": s.name,
                    "endpoint": s.endpoint,
                    "pid": s.process.pid,
                    "running": s.process.is_running(),
                    "log": s.process.log_path,
                }
                for s in services
            ],
        }
        if self.config.dev.secure and self.security.prepared:
            summary["secure"] = {
                **self.security.client_settings(self.sasl_ssl_servers, with_password=with_password),
                "config_path": str(self.secure_config_path),
            }
        return summary

    def down(self, purge: bool = False, progress: Callable[[str], None] = lambda _msg: None) -> list[str]:
        """Stop exactly the recorded processes, in reverse start order. Returns the names stopped."""
        stopped = []
        for service in reversed(self.read_state()):
            if stop(service.process):
                progress(f"stopped {service.name} (pid {service.process.pid})")
                stopped.append(service.name)
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()
        if purge and self.state_dir.exists():
            shutil.rmtree(self.state_dir)
        return stopped


def _http_answers(url: str) -> bool:
    """True when an HTTP GET of ``url`` gets any answer."""
    try:
        httpx.get(url, timeout=1.0)
    except httpx.HTTPError:
        return False
    return True


def _broker_is_up(log_path: Path, port: int) -> bool:
    """True once the broker logged that it is up (it registers in ZooKeeper just before) and accepts."""
    try:
        if " is up on " not in log_path.read_text(errors="replace"):
            return False
    except FileNotFoundError:
        return False
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0
