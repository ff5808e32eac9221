"""RabbitMQ and ActiveMQ, the paper's comparison systems, as plain processes on 127.0.0.1 (bench/paper.py).

Both come from Debian's packages (``rabbitmq-server`` 3.10, ``activemq`` 5.17); :func:`install_peers` is the
benchmark's setup step and installs them with ``apt-get`` when they are missing. Neither the packages'
services nor systemd are used: each server runs from its own folder below the benchmark's scratch folder and
is stopped by the pid that started it (checked against its start time, see
:class:`lumber.dev.process.ProcessHandle`).

* **RabbitMQ**: the package's ``rabbitmq-server`` script with its own node name, ``RABBITMQ_MNESIA_BASE``,
  ``RABBITMQ_LOG_BASE``, config file and an empty plugin list (no management plugin), the AMQP listener and
  the Erlang distribution port on 127.0.0.1, ``HOME`` in the scratch folder (the Erlang cookie goes there),
  and an ``epmd`` of its own on a free 127.0.0.1 port (so that no daemon outlives the benchmark). The script
  runs the Erlang VM as its child in the session it was started in; stopping sends SIGTERM to that session's
  process group (a clean shutdown), then SIGKILL after a timeout.
* **ActiveMQ**: ``java -jar /usr/share/activemq/bin/activemq.jar start xbean:file:activemq.xml`` with the
  heap of Debian's defaults, a generated ``activemq.xml``: KahaDB in the scratch folder with periodic
  journal syncs (the paper's asynchronous flushing), JMX, advisories and the scheduler off, one STOMP (NIO)
  connector on 127.0.0.1 and nothing else. Stopping sends SIGTERM to the JVM (its shutdown hook stops the
  broker).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lumber.dev.process import ProcessHandle, free_port, spawn, wait_until

DEBIAN_PACKAGES = ("rabbitmq-server", "activemq")
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
ACTIVEMQ_HOME = Path("/usr/share/activemq")
ACTIVEMQ_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class PeerError(RuntimeError):
    """A peer could not be installed, started or stopped; the message names its log."""


def missing_packages() -> list[str]:
    """The Debian packages of the peers that are not installed."""
    missing = []
    if not RABBITMQ_SERVER.exists() or shutil.which("epmd") is None:
        missing.append("rabbitmq-server")
    if not ACTIVEMQ_JAR.exists():
        missing.append("activemq")
    if shutil.which("java") is None:
        missing.append("default-jre-headless")
    return missing


def install_peers() -> None:
    """The setup step: ``apt-get install`` the peers' packages if any is missing (needs root)."""
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0:
        raise PeerError(
            f"the benchmark's peers are not installed ({', '.join(missing)}); run as root, or first: "
            f"sudo apt-get install -y {' '.join(missing)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"setup: apt-get install -y {' '.join(missing)}", flush=True)
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *missing], check=True, env=env, stdout=subprocess.DEVNULL
    )
    still = missing_packages()
    if still:
        raise PeerError(f"apt-get did not install {', '.join(still)}")


def package_version(package: str) -> str:
    """The installed Debian version of ``package`` ('?' if dpkg does not know it)."""
    found = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() or "?"


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk below ``path`` (``du``: sparse and preallocated space not counted)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(root) / name).lstat().st_blocks * 512
    return total


def disk_bytes_by_kind(path: Path) -> dict[str, int]:
    """:func:`disk_bytes` per kind of file (its suffix, e.g. ``.log``, ``.index``, ``.idx``, ``.rdq``)."""
    kinds: dict[str, int] = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                size = (Path(root) / name).lstat().st_blocks * 512
                kind = Path(name).suffix or name
                kinds[kind] = kinds.get(kind, 0) + size
    return kinds


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_group(handle: ProcessHandle, popen: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group that ``handle`` leads (it was started in a session of its own), wait,
    then SIGKILL what is left. A pid is not reused while a process group of that id exists."""
    if handle.is_running() or (popen.poll() is not None and _group_alive(handle.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _group_alive(handle.pid) and time.monotonic() < deadline:
        popen.poll()  # reap the leader so that only live members keep the group
        time.sleep(0.1)
    if _group_alive(handle.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signal.SIGKILL)
    popen.wait(timeout=STOP_TIMEOUT_S)


def _stop_process(handle: ProcessHandle, popen: subprocess.Popen[bytes]) -> None:
    if handle.is_running():
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle.pid, signal.SIGTERM)
    try:
        popen.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        if handle.is_running():
            os.kill(handle.pid, signal.SIGKILL)
        popen.wait(timeout=STOP_TIMEOUT_S)


class _PeerServer:
    """What both peers share: a server process started by :meth:`start`, stopped by :meth:`stop`, and a
    context manager around the two."""

    @property
    def log_path(self) -> Path:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _await_ready(
        self,
        popen: subprocess.Popen[bytes],
        name: str,
        check: Callable[[], bool],
        what: str,
        interval_s: float,
    ) -> None:
        """Wait until ``check()`` (``what`` names it); stop everything if ``popen`` exits or time runs out."""

        def ready() -> bool:
            if popen.poll() is not None:
                raise PeerError(f"{name} exited with code {popen.returncode}; see {self.log_path}")
            return check()

        try:
            wait_until(ready, START_TIMEOUT_S, what, interval_s)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class RabbitMQServer(_PeerServer):
    """One RabbitMQ node on 127.0.0.1 below ``base_dir``; a context manager (see the module docstring)."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.port = 0
        self.node_name = f"lumberbench{os.getpid()}@localhost"
        self._epmd: tuple[ProcessHandle, subprocess.Popen[bytes]] | None = None
        self._server: tuple[ProcessHandle, subprocess.Popen[bytes]] | None = None

    @property
    def data_dir(self) -> Path:
        """Where the node keeps its queues and messages (``RABBITMQ_MNESIA_BASE``)."""
        return self.base_dir / "mnesia"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "rabbitmq-server.out"

    def beam_pid(self) -> int:
        """The Erlang VM's pid (the node writes it to ``RABBITMQ_PID_FILE``), 0 if unknown."""
        try:
            return int((self.base_dir / "rabbitmq.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return 0

    def start(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        epmd_port, dist_port, self.port = free_port(), free_port(), free_port()
        self._epmd = spawn(
            "epmd", ["epmd", "-port", str(epmd_port), "-address", LOOPBACK], self.base_dir / "epmd.out"
        )
        wait_until(lambda: _listening(epmd_port), 15, "epmd to listen")
        (self.base_dir / "enabled_plugins").write_text("[].\n")
        (self.base_dir / "rabbitmq-env.conf").write_text("")
        (self.base_dir / "rabbitmq.conf").write_text("loopback_users = none\n")
        env = {
            "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.base_dir),
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            "RABBITMQ_NODENAME": self.node_name,
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.data_dir),
            "RABBITMQ_LOG_BASE": str(self.base_dir / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base_dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.base_dir / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(self.base_dir / "rabbitmq-env.conf"),
            "RABBITMQ_PID_FILE": str(self.base_dir / "rabbitmq.pid"),
            # the distribution listener binds 0.0.0.0 unless told otherwise
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }
        self._server = spawn("rabbitmq-server", [str(RABBITMQ_SERVER)], self.log_path, env=env)
        self._await_ready(
            self._server[1],
            "rabbitmq-server",
            lambda: _listening(self.port),
            f"RabbitMQ to listen on {LOOPBACK}:{self.port} ({self.log_path})",
            0.05,
        )

    def stop(self) -> None:
        if self._server is not None:
            _stop_group(*self._server)
            self._server = None
        if self._epmd is not None:
            _stop_process(*self._epmd)
            self._epmd = None


_ACTIVEMQ_XML = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="lumber-bench" persistent="true"
          useJmx="false" advisorySupport="false" schedulerSupport="false" dataDirectory="{data}">
    <persistenceAdapter>
      <!-- the paper's asynchronous flushing: the journal is synced once a second, not per message -->
      <kahaDB directory="{data}/kahadb" journalDiskSyncStrategy="periodic" journalDiskSyncInterval="1000"/>
    </persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp+nio://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""

_LOG4J = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=%d %-5p [%t] %c - %m%n
log4j.logger.org.apache.activemq.broker.BrokerService=INFO
"""


class ActiveMQServer(_PeerServer):
    """One ActiveMQ broker (KahaDB, STOMP) on 127.0.0.1 below ``base_dir``; a context manager."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.port = 0
        self._server: tuple[ProcessHandle, subprocess.Popen[bytes]] | None = None

    @property
    def pid(self) -> int:
        """The JVM's pid, 0 when stopped."""
        return self._server[0].pid if self._server is not None else 0

    @property
    def data_dir(self) -> Path:
        """The KahaDB store (journal, index, redo log)."""
        return self.base_dir / "data" / "kahadb"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "activemq.out"

    def start(self) -> None:
        conf = self.base_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        xml = conf / "activemq.xml"
        xml.write_text(
            _ACTIVEMQ_XML.replace("{data}", str(self.base_dir / "data")).replace("{port}", str(self.port))
        )
        (conf / "log4j.properties").write_text(_LOG4J)
        argv = [
            "java",
            # Debian's defaults (/usr/share/activemq/activemq-options)
            "-Xms512M",
            "-Xmx512M",
            "-Dorg.apache.activemq.UseDedicatedTaskRunner=true",
            f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
            f"-Dactivemq.home={ACTIVEMQ_HOME}",
            f"-Dactivemq.base={self.base_dir}",
            f"-Dactivemq.conf={conf}",
            f"-Dactivemq.data={self.base_dir / 'data'}",
            "-jar",
            str(ACTIVEMQ_JAR),
            "start",
            f"xbean:file:{xml}",
        ]
        self._server = spawn("activemq", argv, self.log_path, cwd=self.base_dir)
        self._await_ready(
            self._server[1],
            "ActiveMQ",
            lambda: _listening(self.port) and _stomp_connects(self.port),
            f"ActiveMQ to accept STOMP on {LOOPBACK}:{self.port}",
            0.2,
        )

    def stop(self) -> None:
        if self._server is not None:
            _stop_process(*self._server)
            self._server = None


def _stomp_connects(port: int) -> bool:
    """A STOMP 1.2 CONNECT answered with CONNECTED (the broker, not just its socket, is up)."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=2.0) as sock:
            sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
            answer = sock.recv(64)
            sock.sendall(b"DISCONNECT\n\n\x00")
    except OSError:
        return False
    return answer.startswith(b"CONNECTED")
