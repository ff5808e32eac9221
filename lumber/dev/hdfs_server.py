"""A real HDFS, one NameNode and one DataNode run as plain Java processes on 127.0.0.1, for the dev stack,
the demo and the tests.

The daemons come from Hadoop's own jars (``peers/hadoop/pom.xml``, fetched into ``.jars/hadoop/`` by ``make
jars``; :func:`lumber.dev.peer_jars.peer_classpath`), started with ``java -cp <conf>:<jars>
org.apache.hadoop.hdfs.server.namenode.NameNode`` (and ``...datanode.DataNode``) as Hadoop's own ``hdfs
namenode`` script does, without the script. The server gets its own folder::

    <base_dir>/conf/core-site.xml      fs.defaultFS = hdfs://127.0.0.1:<namenode_port>
    <base_dir>/conf/hdfs-site.xml      the settings below
    <base_dir>/conf/log4j.properties   INFO to the daemon's stdout (its log file)
    <base_dir>/name/                   the NameNode's fsimage and edit log (formatted once, by start())
    <base_dir>/data/                   the DataNode's blocks
    <base_dir>/namenode.log, datanode.log

``hdfs-site.xml`` as written here: replication 1 (one DataNode); every address on 127.0.0.1 (RPC, HTTP with
WebHDFS, the DataNode's transfer, HTTP and IPC ports: :class:`HdfsPorts`);
``dfs.namenode.safemode.extension = 0``, so the NameNode leaves safe mode as soon as the DataNode has
reported its blocks; heartbeats every second, so the DataNode registers at once and a dead one is noticed
in ``dead_datanode_s`` (``dfs.namenode.heartbeat.recheck-interval``); ``dfs.datanode.du.reserved`` as
given (the fault tests set it to the disk's size: a full DataNode); permissions on, with the user who
starts the daemons as the superuser (Hadoop's rule).

Ready means what a client needs to read and write: the NameNode is out of safe mode and at least one
DataNode is live (the NameNode's JMX servlet, ``/jmx``, :meth:`HdfsServer.state`), and the DataNode that
runs now has sent its block report (its own JMX): after a kill -9 and a restart of the DataNode the
NameNode still counts the dead one as live for a while, and a read before the new one's report finds no
location for a block. Memory: the
heaps are ``-Xmx`` ``namenode_heap_mb`` + ``datanode_heap_mb`` (256 + 192 MiB by default), so both daemons
stay under 1 GiB together.

Not thread-safe: one owner starts and stops the daemons. The daemons are stopped by pid (checked against
their start time, :mod:`lumber.dev.process`), never by name.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from lumber.dev.peer_jars import peer_classpath
from lumber.dev.process import (
    LOOPBACK,
    ProcessHandle,
    free_port,
    kill,
    port_in_use,
    start_and_wait,
    stop,
    wait_until,
)
from lumber.dev.zookeeper_server import java_executable
from pipeline.errors import DevStackError

NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"
#: The NameNode's JMX beans that say whether it takes writes.
_NAMENODE_INFO = "Hadoop:service=NameNode,name=NameNodeInfo"
_FS_STATE = "Hadoop:service=NameNode,name=FSNamesystemState"
#: The DataNode's bean that says whether it has reported its blocks.
_DATANODE_INFO = "Hadoop:service=DataNode,name=DataNodeInfo"

_LOG4J = """\
log4j.rootLogger=INFO, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.BlockStateChange=WARN
log4j.logger.org.apache.hadoop.hdfs.StateChange=WARN
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=WARN
log4j.logger.org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace=WARN
"""


@dataclass(frozen=True)
class HdfsPorts:
    """The five ports of a NameNode and a DataNode, all on 127.0.0.1."""

    namenode: int
    namenode_http: int
    datanode: int
    datanode_http: int
    datanode_ipc: int

    @classmethod
    def free(cls) -> HdfsPorts:
        """Five ports nothing listens on now."""
        return cls(free_port(), free_port(), free_port(), free_port(), free_port())

    def all(self) -> tuple[int, ...]:
        return (self.namenode, self.namenode_http, self.datanode, self.datanode_http, self.datanode_ipc)


@dataclass(frozen=True)
class HdfsState:
    """What the NameNode says of itself (its JMX beans)."""

    safe_mode: str
    live_datanodes: int
    capacity_remaining_bytes: int

    @property
    def ready(self) -> bool:
        return not self.safe_mode and self.live_datanodes > 0


def _xml_config(properties: dict[str, str]) -> str:
    rows = "".join(
        f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>\n"
        for name, value in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


@dataclass
class HdfsServer:
    """One NameNode and one DataNode sharing ``base_dir``. Not thread-safe: one owner starts and stops it."""

    base_dir: Path
    ports: HdfsPorts
    namenode_heap_mb: int = 256
    datanode_heap_mb: int = 192
    #: ``dfs.datanode.du.reserved``: bytes of the disk the DataNode leaves free (a full DataNode when it
    #: is the disk's size).
    reserved_bytes: int = 0
    #: ``dfs.namenode.heartbeat.recheck-interval`` / 1000 * 2 + 10 heartbeats: how soon a dead DataNode is
    #: declared dead.
    dead_datanode_s: int = 12
    classpath: str | None = None
    namenode_handle: ProcessHandle | None = None
    datanode_handle: ProcessHandle | None = None
    _namenode_popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _datanode_popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _namenode_log_start: int = field(default=0, repr=False)

    # -- addresses --------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``hdfs://127.0.0.1:<namenode port>``: the filesystem's URL (``fs.defaultFS``)."""
        return f"hdfs://{LOOPBACK}:{self.ports.namenode}"

    @property
    def webhdfs_url(self) -> str:
        """The NameNode's HTTP address, where WebHDFS answers (``/webhdfs/v1``)."""
        return f"http://{LOOPBACK}:{self.ports.namenode_http}"

    @property
    def conf_dir(self) -> Path:
        return self.base_dir / "conf"

    @property
    def namenode_log(self) -> Path:
        return self.base_dir / "namenode.log"

    @property
    def datanode_log(self) -> Path:
        return self.base_dir / "datanode.log"

    # -- config -----------------------------------------------------------------------------------------

    def properties(self) -> dict[str, str]:
        """``hdfs-site.xml``'s settings (see the module docstring)."""
        p = self.ports
        heartbeat_s = 1
        recheck_ms = max(1, (self.dead_datanode_s - 10 * heartbeat_s) // 2) * 1000
        return {
            "dfs.replication": "1",
            "dfs.namenode.name.dir": f"file://{self.base_dir / 'name'}",
            "dfs.datanode.data.dir": f"file://{self.base_dir / 'data'}",
            "dfs.namenode.rpc-address": f"{LOOPBACK}:{p.namenode}",
            "dfs.namenode.rpc-bind-host": LOOPBACK,
            "dfs.namenode.http-address": f"{LOOPBACK}:{p.namenode_http}",
            "dfs.namenode.http-bind-host": LOOPBACK,
            "dfs.namenode.secondary.http-address": f"{LOOPBACK}:0",
            "dfs.datanode.address": f"{LOOPBACK}:{p.datanode}",
            "dfs.datanode.http.address": f"{LOOPBACK}:{p.datanode_http}",
            "dfs.datanode.ipc.address": f"{LOOPBACK}:{p.datanode_ipc}",
            "dfs.datanode.hostname": LOOPBACK,
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
            "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.safemode.min.datanodes": "0",
            "dfs.heartbeat.interval": str(heartbeat_s),
            "dfs.namenode.heartbeat.recheck-interval": str(recheck_ms),
            "dfs.blockreport.initialDelay": "0",
            "dfs.datanode.du.reserved": str(self.reserved_bytes),
            "dfs.namenode.handler.count": "10",
            "dfs.namenode.service.handler.count": "4",
            "dfs.datanode.handler.count": "4",
            "dfs.permissions.enabled": "true",
            "dfs.webhdfs.enabled": "true",
            "dfs.namenode.fs-limits.min-block-size": "0",
        }

    def write_config(self) -> None:
        """Write ``conf/`` (core-site.xml, hdfs-site.xml, log4j.properties) and create the data folders."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "data").mkdir(parents=True, exist_ok=True)
        self.java_tmp_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "core-site.xml").write_text(
            _xml_config(
                {
                    "fs.defaultFS": self.url,
                    "hadoop.tmp.dir": str(self.base_dir / "tmp"),
                    "hadoop.security.authentication": "simple",
                }
            )
        )
        (self.conf_dir / "hdfs-site.xml").write_text(_xml_config(self.properties()))
        (self.conf_dir / "log4j.properties").write_text(_LOG4J)

    @property
    def java_tmp_dir(self) -> Path:
        """The JVMs' ``java.io.tmpdir`` (Jetty's web-app folders of both web UIs, extracted native
        libraries): inside the server's folder, so a killed server leaves nothing in the machine's /tmp."""
        return self.base_dir / "java-tmp"

    def _java(self, heap_mb: int, log_name: str) -> list[str]:
        classpath = self.classpath if self.classpath is not None else peer_classpath("hadoop")
        return [
            java_executable(),
            f"-Xmx{heap_mb}m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            f"-Djava.io.tmpdir={self.java_tmp_dir}",
            f"-Dhadoop.log.dir={self.base_dir}",
            f"-Dhadoop.log.file={log_name}",
            f"-Dhadoop.home.dir={self.base_dir}",
            "-Dhadoop.security.logger=WARN,console",
            "-cp",
            f"{self.conf_dir}:{classpath}",
        ]

    def format_argv(self) -> list[str]:
        return [
            *self._java(self.namenode_heap_mb, "format.log"),
            NAMENODE_CLASS,
            "-format",
            "-nonInteractive",
            "-clusterId",
            "lumber",
        ]

    def namenode_argv(self) -> list[str]:
        return [*self._java(self.namenode_heap_mb, "namenode.log"), NAMENODE_CLASS]

    def datanode_argv(self) -> list[str]:
        return [*self._java(self.datanode_heap_mb, "datanode.log"), DATANODE_CLASS]

    def is_formatted(self) -> bool:
        return (self.base_dir / "name" / "current" / "VERSION").is_file()

    def prepare_namenode(self) -> None:
        """:meth:`prepare`, and remember where the NameNode's log ends (:meth:`namenode_exited` reads what
        comes after): what a caller that starts the NameNode itself runs first."""
        self.prepare()
        self._namenode_log_start = self.namenode_log.stat().st_size if self.namenode_log.exists() else 0

    def prepare(self, timeout_s: float = 60.0) -> None:
        """Write the config and format the NameNode unless it was formatted before (a restart keeps the
        namespace)."""
        self.write_config()
        if self.is_formatted():
            return
        log_path = self.base_dir / "format.log"
        with log_path.open("ab") as log:
            try:
                code = subprocess.run(
                    self.format_argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired as exc:
                raise DevStackError(f"formatting the HDFS NameNode timed out; see {log_path}") from exc
        if code != 0 or not self.is_formatted():
            raise DevStackError(f"formatting the HDFS NameNode failed (exit code {code}); see {log_path}")

    # -- state ------------------------------------------------------------------------------------------

    def _jmx(self, bean: str, http_port: int | None = None) -> dict[str, Any] | None:
        url = f"http://{LOOPBACK}:{http_port or self.ports.namenode_http}/jmx?qry={bean}"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as answer:
                beans = json.loads(answer.read()).get("beans", [])
        except (OSError, urllib.error.URLError, ValueError):
            return None
        return beans[0] if beans else None

    def state(self) -> HdfsState | None:
        """The NameNode's safe mode and live DataNodes, or None while its HTTP server does not answer."""
        info = self._jmx(_NAMENODE_INFO)
        fs_state = self._jmx(_FS_STATE)
        if info is None or fs_state is None:
            return None
        return HdfsState(
            safe_mode=str(info.get("Safemode", "")),
            live_datanodes=int(fs_state.get("NumLiveDataNodes", 0)),
            capacity_remaining_bytes=int(fs_state.get("CapacityRemaining", 0)),
        )

    def namenode_answers(self) -> bool:
        return self.state() is not None

    def is_ready(self) -> bool:
        """True once the NameNode is out of safe mode and a DataNode is live (see the module docstring)."""
        found = self.state()
        return found is not None and found.ready

    def safe_mode(self, action: str, timeout_s: float = 60.0) -> str:
        """``hdfs dfsadmin -safemode <action>`` (``enter``, ``leave``, ``get``) against this NameNode, run
        with Hadoop's own client class; its output line ("Safe mode is ON")."""
        if action not in ("enter", "leave", "get"):
            raise DevStackError(f"safe mode action {action!r}: expected enter, leave or get")
        argv = [
            *self._java(128, "dfsadmin.log"),
            "org.apache.hadoop.hdfs.tools.DFSAdmin",
            "-fs",
            self.url,
            "-safemode",
            action,
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise DevStackError(f"dfsadmin -safemode {action} failed: {done.stderr.strip()[-500:]}")
        return done.stdout.strip().splitlines()[-1]

    # -- processes --------------------------------------------------------------------------------------

    def start(self, timeout_s: float = 90.0) -> None:
        """Format (once), start the NameNode and the DataNode together (the DataNode retries until the
        NameNode answers), and wait until HDFS takes writes."""
        for port in self.ports.all():
            if port_in_use(port):
                raise DevStackError(f"cannot start HDFS: port {LOOPBACK}:{port} is already in use")
        self.prepare(timeout_s)
        self.start_namenode(timeout_s, wait=False)
        try:
            self.start_datanode(timeout_s)
        except BaseException:
            self.stop()
            raise

    def start_namenode(self, timeout_s: float = 90.0, *, wait: bool = True) -> None:
        """Start the NameNode; with ``wait``, wait until HDFS is ready (a restart while the DataNode runs)."""
        self._namenode_log_start = self.namenode_log.stat().st_size if self.namenode_log.exists() else 0
        self.namenode_handle, self._namenode_popen = start_and_wait(
            f"HDFS NameNode on {self.url}",
            self.namenode_argv(),
            self.namenode_log,
            self.is_ready if wait else lambda: True,
            timeout_s,
        )

    def start_datanode(self, timeout_s: float = 90.0) -> None:
        """Start the DataNode and wait until HDFS is ready (it registered, the NameNode left safe mode)."""
        self.datanode_handle, self._datanode_popen = start_and_wait(
            f"HDFS DataNode on {LOOPBACK}:{self.ports.datanode}",
            self.datanode_argv(),
            self.datanode_log,
            self.datanode_ready,
            timeout_s,
        )

    def namenode_exited(self) -> bool:
        """True when the NameNode's log says, since it was last started, that it exited (Hadoop's
        ``ExitUtil`` line)."""
        try:
            with self.namenode_log.open("rb") as log:
                log.seek(self._namenode_log_start)
                return b"ExitUtil: Exiting with status" in log.read()
        except FileNotFoundError:
            return False

    def datanode_reported(self) -> bool:
        """True once the running DataNode (its own JMX) has sent the NameNode a block report: a restarted
        DataNode's blocks are known again (the NameNode may still count the killed one as live)."""
        info = self._jmx(_DATANODE_INFO, self.ports.datanode_http)
        if info is None:
            return False
        try:
            actors = json.loads(str(info.get("BPServiceActorInfo", "[]")))
        except ValueError:
            return False
        return any(
            a.get("ActorState") == "RUNNING" and str(a.get("LastBlockReport", "")).isdigit() for a in actors
        )

    def datanode_ready(self) -> bool:
        """:meth:`is_ready` and :meth:`datanode_reported`, failing at once when the NameNode has exited (its
        log names why)."""
        if self.is_ready() and self.datanode_reported():
            return True
        if self.namenode_exited():
            raise DevStackError(f"the HDFS NameNode on {self.url} exited; see {self.namenode_log}")
        return False

    def kill_namenode(self) -> None:
        """kill -9 the NameNode (fault tests)."""
        if self.namenode_handle is not None:
            kill(self.namenode_handle, self._namenode_popen)
            self.namenode_handle, self._namenode_popen = None, None

    def kill_datanode(self) -> None:
        """kill -9 the DataNode (fault tests)."""
        if self.datanode_handle is not None:
            kill(self.datanode_handle, self._datanode_popen)
            self.datanode_handle, self._datanode_popen = None, None

    def wait_datanode_dead(self) -> None:
        """Wait until the NameNode counts no live DataNode (after :meth:`kill_datanode`)."""
        wait_until(
            lambda: (found := self.state()) is not None and found.live_datanodes == 0,
            self.dead_datanode_s * 3,
            "the NameNode to declare the DataNode dead",
            interval_s=0.5,
        )

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the DataNode, then the NameNode (SIGTERM, then SIGKILL after ``timeout_s``)."""
        if self.datanode_handle is not None:
            stop(self.datanode_handle, timeout_s=timeout_s, popen=self._datanode_popen)
            self.datanode_handle, self._datanode_popen = None, None
        if self.namenode_handle is not None:
            stop(self.namenode_handle, timeout_s=timeout_s, popen=self._namenode_popen)
            self.namenode_handle, self._namenode_popen = None, None
