from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from hdfs_native import Client

from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from lumber.dev.peer_jars import JARS_DIR_ENV
from lumber.dev.process import LOOPBACK
from pipeline.errors import DevStackError


def _listening_addresses(pid: int) -> set[str]:
    """The local addresses (``ip:port``) that ``pid`` listens on (``/proc/<pid>/net/tcp`` and its fds)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and inode in inodes:  # LISTEN
            ip_hex, port_hex = local.split(":")
            ip = socket.inet_ntoa(bytes.fromhex(ip_hex)[::-1])
            found.add(f"{ip}:{int(port_hex, 16)}")
    return found


def test_both_daemons_listen_on_loopback_only(hdfs_server: HdfsServer) -> None:
    assert hdfs_server.namenode_handle is not None
    assert hdfs_server.datanode_handle is not None
    ports = hdfs_server.ports
    namenode = _listening_addresses(hdfs_server.namenode_handle.pid)
    datanode = _listening_addresses(hdfs_server.datanode_handle.pid)
    assert {f"{LOOPBACK}:{ports.namenode}", f"{LOOPBACK}:{ports.namenode_http}"} <= namenode
    assert {f"{LOOPBACK}:{p}" for p in (ports.datanode, ports.datanode_http, ports.datanode_ipc)} <= datanode
    assert all(address.startswith(f"{LOOPBACK}:") for address in namenode | datanode)
    state = hdfs_server.state()
    assert state is not None
    assert state.safe_mode == ""
    assert state.live_datanodes == 1


def test_heaps_stay_under_one_gib_together(hdfs_server: HdfsServer) -> None:
    assert hdfs_server.namenode_handle is not None
    assert hdfs_server.datanode_handle is not None
    heaps = [
        int(arg[4:-1])
        for handle in (hdfs_server.namenode_handle, hdfs_server.datanode_handle)
        for arg in handle.argv
        if arg.startswith("-Xmx")
    ]
    assert heaps == [hdfs_server.namenode_heap_mb, hdfs_server.datanode_heap_mb]
    assert sum(heaps) < 1024


def test_the_daemons_temporary_files_stay_in_the_servers_folder(hdfs_server: HdfsServer) -> None:
    """Jetty unpacks each web UI into ``java.io.tmpdir``: in the server's folder, not /tmp, so a server
    killed with kill -9 leaves nothing behind that pytest's rotation of its folders does not remove."""
    assert hdfs_server.namenode_handle is not None
    assert hdfs_server.datanode_handle is not None
    for handle in (hdfs_server.namenode_handle, hdfs_server.datanode_handle):
        assert f"-Djava.io.tmpdir={hdfs_server.java_tmp_dir}" in handle.argv
    # both daemons serve a web UI (WebHDFS, the DataNode's HTTP port): one Jetty folder each
    assert len(list(hdfs_server.java_tmp_dir.glob("jetty-127_0_0_1-*"))) == 2


def test_a_file_written_over_rpc_reads_back_over_rpc_and_webhdfs(
    hdfs_server: HdfsServer, hdfs_url: str
) -> None:
    client = Client(hdfs_server.url)
    path = hdfs_url.removeprefix(hdfs_server.url) + "/a.bin"
    payload = bytes(range(256)) * 4096  # 1 MiB through the DataNode
    client.mkdirs(path.rsplit("/", 1)[0], create_parent=True)
    with client.create(path) as writer:
        writer.write(payload)
    assert client.get_file_info(path).length == len(payload)
    with client.read(path) as reader:
        assert reader.read() == payload
    url = f"{hdfs_server.webhdfs_url}/webhdfs/v1{path}?op=OPEN&user.name=lumber"
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.read() == payload
    status_url = f"{hdfs_server.webhdfs_url}/webhdfs/v1{path}?op=GETFILESTATUS"
    with urllib.request.urlopen(status_url, timeout=10) as answer:
        assert json.loads(answer.read())["FileStatus"]["length"] == len(payload)


def test_restart_keeps_the_namespace_and_stops_by_pid(tmp_path: Path) -> None:
    server = HdfsServer(tmp_path / "hdfs", HdfsPorts.free())
    server.start()
    try:
        assert server.is_formatted()
        client = Client(server.url)
        with client.create("/kept.txt") as writer:
            writer.write(b"still here")
        namenode, datanode = server.namenode_handle, server.datanode_handle
        assert namenode is not None
        assert datanode is not None
        server.stop()
        assert not namenode.is_running()
        assert not datanode.is_running()
        assert server.namenode_handle is None
        assert server.datanode_handle is None

        server.start()  # formatted already: the fsimage and the block come back, safe mode is left
        state = server.state()
        assert state is not None
        assert state.ready
        with Client(server.url).read("/kept.txt") as reader:
            assert reader.read() == b"still here"
    finally:
        server.stop()


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = HdfsPorts.free()
        server = HdfsServer(tmp_path, HdfsPorts(ports.namenode, ports.namenode_http, port, 0, 0))
        with pytest.raises(
            DevStackError, match=rf"cannot start HDFS: port 127\.0\.0\.1:{port} is already in use"
        ):
            server.start()
    assert server.namenode_handle is None


def test_missing_jars_are_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "no-jars"))
    server = HdfsServer(tmp_path / "hdfs", HdfsPorts.free())
    with pytest.raises(DevStackError, match=r"no hadoop jars in .*no-jars/hadoop: run 'make jars'"):
        server.start()
