"""What :mod:`pipeline.native_hdfs_file_system` adds to the contract (``test_fs.py``): errors in one line,
within seconds, naming HDFS and the path: no NameNode at the address, a path without permission, the
NameNode in safe mode, a full DataNode (``dfs.datanode.du.reserved`` set to the disk's size)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from lumber.dev.hdfs_server import HdfsPorts, HdfsServer
from lumber.dev.process import free_port
from pipeline.fs import join, open_filesystem
from pipeline.load_errors import FileSystemError
from pipeline.native_hdfs_file_system import NativeHdfsFileSystem


def test_no_namenode_at_the_address_is_a_clear_error_within_seconds() -> None:
    url = f"hdfs://127.0.0.1:{free_port()}/warehouse"
    fs = open_filesystem(url, hdfs_client="hdfs-native")
    started = time.monotonic()
    with pytest.raises(FileSystemError) as caught:
        fs.exists(join(url, "_lumber"))
    assert time.monotonic() - started < 10
    assert str(caught.value) == f"stat {url}/_lumber: OSError: Connection refused (os error 111)"


def test_a_path_without_permission_is_a_one_line_error(
    hdfs_server: HdfsServer, hdfs_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = open_filesystem(hdfs_url, hdfs_client="hdfs-native")
    owner.mkdirs(hdfs_url)  # by this process's user, the superuser: drwxr-xr-x
    monkeypatch.setenv("HADOOP_USER_NAME", "nobody")
    other = open_filesystem(hdfs_url, hdfs_client="hdfs-native")
    assert isinstance(other, NativeHdfsFileSystem)
    target = join(hdfs_url, "x.json")
    with pytest.raises(FileSystemError) as caught:
        other.write_text(target, "{}", overwrite=False)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"create {target}: AccessControlException: Permission denied: user=nobody, ")
    assert not owner.exists(target)


def test_describe_keeps_the_java_class_and_the_first_line() -> None:
    rpc = RuntimeError(
        'RPCError("org.apache.hadoop.hdfs.server.namenode.SafeModeException", "Cannot create file /w/x. '
        'Name node is in safe mode.\\nIt was turned on manually.\\n\\tat org.apache.Foo(Foo.java:1)")'
    )
    assert (
        NativeHdfsFileSystem.describe(rpc)
        == "SafeModeException: Cannot create file /w/x. Name node is in safe mode."
    )
    assert NativeHdfsFileSystem.describe(
        FileExistsError("/w/x for client 127.0.0.1 already exists\n\tat x")
    ) == ("FileExistsError: /w/x for client 127.0.0.1 already exists")


def test_a_namenode_in_safe_mode_is_a_clear_error_not_a_hang(hdfs_server: HdfsServer, hdfs_url: str) -> None:
    fs = open_filesystem(hdfs_url, hdfs_client="hdfs-native")
    fs.mkdirs(hdfs_url)
    assert hdfs_server.safe_mode("enter") == "Safe mode is ON"
    try:
        started = time.monotonic()
        with pytest.raises(FileSystemError) as caught:
            fs.write_text(join(hdfs_url, "x.json"), "{}", overwrite=False)
        assert time.monotonic() - started < 10
        message = str(caught.value)
        assert message.startswith(f"create {hdfs_url}/x.json: SafeModeException: Cannot create file"), message
        assert "Name node is in safe mode" in message
        assert fs.list_dir(hdfs_url) == []  # reads go on
    finally:
        assert hdfs_server.safe_mode("leave") == "Safe mode is OFF"


@pytest.mark.slow
def test_a_full_datanode_is_a_clear_error_and_leaves_no_file(tmp_path: Path) -> None:
    disk_bytes = shutil.disk_usage(tmp_path).total
    server = HdfsServer(tmp_path / "hdfs", HdfsPorts.free(), reserved_bytes=disk_bytes)
    server.start()
    try:
        state = server.state()
        assert state is not None
        assert state.capacity_remaining_bytes == 0
        fs = open_filesystem(f"{server.url}/w", hdfs_client="hdfs-native")
        started = time.monotonic()
        with pytest.raises(FileSystemError) as caught:
            fs.create(f"{server.url}/w/x.bin", b"x" * 4096, overwrite=False)
        assert time.monotonic() - started < 20
        message = str(caught.value)
        assert message.startswith(f"create {server.url}/w/x.bin: "), message
        assert "could only be written to 0 of the 1 minReplication nodes" in message, message
        assert "\n" not in message
    finally:
        server.stop()
