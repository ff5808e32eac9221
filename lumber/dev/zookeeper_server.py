"""A real ZooKeeper server run as a plain Java process on 127.0.0.1, for the dev stack and the tests.

The server classes come from the jars that pyspark ships (``<pyspark>/jars/zookeeper-3.9.x.jar``), so no
download and no apt step is needed; Debian's ``zookeeper`` package works too (``classpath=...``). The server
gets its own folder holding ``zoo.cfg``, ``log4j2.properties``, ``data/`` and ``zookeeper.log``.

``zoo.cfg`` as written here::

    tickTime=500                  # min session timeout is 2 ticks = 1 s, so expiry tests are quick
    dataDir=<dir>/data
    clientPort=<port>
    clientPortAddress=127.0.0.1   # loopback only
    admin.enableServer=false      # no Jetty admin server on 8080
    4lw.commands.whitelist=ruok,srvr,stat,mntr
    minSessionTimeout=1000
    maxSessionTimeout=60000
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lumber.dev.process import LOOPBACK, ProcessHandle, port_in_use, start_and_wait, stop
from pipeline.errors import DevStackError

if TYPE_CHECKING:
    from kazoo.client import KazooClient

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


def new_client(connect: str, timeout_s: float = 10.0) -> KazooClient:
    """A started kazoo client on ``connect``."""
    from kazoo.client import KazooClient  # noqa: PLC0415 - the CLI's start-up does not pay for kazoo

    client = KazooClient(hosts=connect, timeout=timeout_s)
    client.start(timeout=30)
    return client


def make_chroot(root_connect: str, name: str) -> str:
    """Create a fresh unique chroot for one test or one benchmark run; return the connect string that
    uses it."""
    path = f"/t-{name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "_").replace("]", "_")
    root = new_client(root_connect)
    try:
        root.ensure_path(path)
    finally:
        root.stop()
        root.close()
    return f"{root_connect}{path}"


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH; a clear error if neither exists."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise DevStackError(
            "Java 17 or newer is required to run ZooKeeper and Spark, and 'java' is not on PATH "
            "(nor under $JAVA_HOME)"
        )
    return found


def pyspark_classpath() -> str:
    """The classpath ``<pyspark>/jars/*``, checked to hold the ZooKeeper server jar."""
    import pyspark  # noqa: PLC0415 - only needed when a server is started

    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("zookeeper-3*.jar")):
        raise DevStackError(f"{jars}: no zookeeper-3.*.jar; pyspark's jars are expected to ship ZooKeeper")
    return f"{jars}/*"


def four_letter_word(port: int, word: str, host: str = LOOPBACK, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the reply ('' if nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class ZooKeeperServer:
    """One standalone ZooKeeper server. Not thread-safe: one owner starts and stops it."""

    base_dir: Path
    port: int
    heap_mb: int = 256
    classpath: str | None = None
    handle: ProcessHandle | None = None
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def connect(self) -> str:
        """The connect string of this server."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "zookeeper.log"

    def write_config(self) -> Path:
        data_dir = self.base_dir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "log4j2.properties").write_text(_LOG4J2)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    f"dataDir={data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={LOOPBACK}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr",
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "",
                ]
            )
        )
        return cfg

    def argv(self) -> list[str]:
        cfg = self.base_dir / "zoo.cfg"
        return [
            java_executable(),
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            f"-Dlog4j2.configurationFile={self.base_dir / 'log4j2.properties'}",
            "-cp",
            self.classpath or pyspark_classpath(),
            MAIN_CLASS,
            str(cfg),
        ]

    def is_ready(self) -> bool:
        return four_letter_word(self.port, "ruok") == "imok"

    def start(self, timeout_s: float = 60.0) -> ProcessHandle:
        """Write the config, start the server and wait until it answers ``ruok``."""
        if port_in_use(self.port):
            raise DevStackError(f"cannot start ZooKeeper: port {LOOPBACK}:{self.port} is already in use")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.handle, self._popen = start_and_wait(
            f"ZooKeeper on {self.connect}", self.argv(), self.log_path, self.is_ready, timeout_s
        )
        return self.handle

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.handle is not None:
            stop(self.handle, timeout_s=timeout_s, popen=self._popen)
            self.handle = None
            self._popen = None
