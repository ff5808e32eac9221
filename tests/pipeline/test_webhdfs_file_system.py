"""WebHDFS's durability on the embedded HDFS (a real NameNode and DataNode): a file written by
:meth:`~pipeline.fs.FileSystem.create` (manifests, run records, completeness markers) is fsync-ed by the
DataNode when it is closed (CREATE with ``SYNC_BLOCK``), as ``hsync`` does through the RPC clients.

The witness is the DataNode's own counter of block fsyncs, ``FsyncCount`` of its ``DataNodeActivity`` JMX
bean. The DataNode serves its JMX values from a cache renewed at most every metrics period (10 s), so the
test reads the counter once that long after anything was written, writes, and polls until it moves. The
rest of the backend's contract is ``tests/pipeline/test_fs.py`` (``[webhdfs]``).
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from lumber.dev.hdfs_server import HdfsServer
from pipeline.fs import join, open_filesystem
from pipeline.webhdfs_file_system import WebHdfsFileSystem

pytestmark = pytest.mark.hdfs

#: The DataNode's JMX cache lives its metrics period (``*.period``, 10 s): wait one period and a second.
JMX_CACHE_S = 11


def fsync_count(server: HdfsServer) -> int:
    """The DataNode's block fsyncs so far (``FsyncCount``), as its JMX servlet answers now."""
    query = "Hadoop:service=DataNode,name=DataNodeActivity-*"
    with urllib.request.urlopen(
        f"http://127.0.0.1:{server.ports.datanode_http}/jmx?qry={query}", timeout=10
    ) as answer:
        (bean,) = json.loads(answer.read())["beans"]
    return int(bean["FsyncCount"])


def test_a_file_created_over_webhdfs_is_fsynced_by_the_datanode_on_close(
    hdfs_server: HdfsServer, hdfs_url: str
) -> None:
    fs = open_filesystem(hdfs_url, webhdfs_url=hdfs_server.webhdfs_url, hdfs_client="webhdfs")
    assert isinstance(fs, WebHdfsFileSystem)
    fs.mkdirs(hdfs_url)
    time.sleep(JMX_CACHE_S)  # the counter as it stands, every earlier write in it
    before = fsync_count(hdfs_server)
    url = join(hdfs_url, "hr=08", "_SUCCESS")
    fs.create(url, b'{"format": 1}', overwrite=False)
    deadline = time.monotonic() + 3 * JMX_CACHE_S
    after = before
    while after == before and time.monotonic() < deadline:
        time.sleep(1)
        after = fsync_count(hdfs_server)
    assert after - before == 1  # one block, synced once (a plain CREATE: 0, the test times out)
    assert fs.read_bytes(url) == b'{"format": 1}'
    fs.delete(hdfs_url, recursive=True)
