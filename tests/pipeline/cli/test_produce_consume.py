"""``lumber produce`` and ``lumber consume`` as subprocesses against a real broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

from broker.log.topic_partition import TopicPartition
from tests.broker.client.helpers import consumer, read_batches, read_records
from tests.support.broker_cluster import servers


def lumber(*args: str, stdin: bytes = b"", timeout_s: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "LUMBER_CONSUMER__REQUEST_TIMEOUT_MS": "3000",
        "LUMBER_PRODUCER__MAX_BLOCK_MS": "3000",
    }
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout_s,
        check=False,
        env=env,
    )


def test_produce_then_consume_round_trip(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console", 1)
    server = servers(broker_cluster)[0]
    lines = b"k1\tfirst value\nno key here\nk2\t\n\tempty key\nlast line without newline"
    produced = lumber(
        "produce",
        "console",
        "--key-separator",
        "TAB",
        "--acks",
        "all",
        "--compression",
        "zstd",
        "--bootstrap-server",
        server,
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stderr.decode().strip().endswith("lumber: sent 5 records to console, 0 failed")

    with consumer(broker_cluster, TopicPartition("console", 0)) as c:
        records = read_records(c, 5)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"k1", b"first value"),
        (1, None, b"no key here"),
        (2, b"k2", b""),
        (3, b"", b"empty key"),
        (4, None, b"last line without newline"),
    ]
    assert {r.header("host") for r in records} == {socket.gethostname().encode()}

    consumed = lumber(
        "consume", "console", "--from-beginning", "--max", "5", "--print-key", "--bootstrap-server", server
    )
    assert consumed.returncode == 0, consumed.stderr
    assert (
        consumed.stdout == b"k1\tfirst value\n\tno key here\nk2\t\n\tempty key\n\tlast line without newline\n"
    )
    assert consumed.stderr.decode().strip().endswith("lumber: consumed 5 records from console")

    offsets = lumber(
        "consume",
        "console",
        "--partition",
        "0",
        "--offset",
        "3",
        "--timeout-ms",
        "1500",
        "--print-offset",
        "--bootstrap-server",
        server,
    )
    assert offsets.returncode == 0, offsets.stderr
    assert offsets.stdout == b"0\t3\tempty key\n0\t4\tlast line without newline\n"


def test_console_tools_find_the_cluster_in_zookeeper(broker_cluster: Any, tmp_path: Any) -> None:
    broker_cluster.create_topic("zk-console", 2)
    config = tmp_path / "lumber.toml"
    config.write_text(f'[zookeeper]\nconnect = "{broker_cluster.zk_connect}"\n')
    produced = lumber("--config", str(config), "produce", "zk-console", "--partition", "1", stdin=b"a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = lumber(
        "--config", str(config), "consume", "zk-console", "--from-beginning", "--max", "2", "--print-offset"
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == b"1\t0\ta\n1\t1\tb\n"


def test_console_errors_are_clear(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console", 1)
    server = servers(broker_cluster)[0]
    missing = lumber("consume", "no-such-topic", "--max", "1", "--bootstrap-server", server, timeout_s=60)
    assert missing.returncode == 1
    assert "lumber: error: topic 'no-such-topic' is not in the cluster's metadata" in missing.stderr.decode()
    bad_partition = lumber(
        "consume", "console", "--partition", "5", "--max", "1", "--bootstrap-server", server
    )
    assert bad_partition.returncode == 1
    assert "topic 'console' has partitions 0-0, there is no partition 5" in bad_partition.stderr.decode()
    bad_server = lumber("produce", "console", "--bootstrap-server", "localhost", stdin=b"x\n")
    assert bad_server.returncode == 1
    assert "'localhost' is not host:port" in bad_server.stderr.decode()


def test_produce_with_acks_1_turns_the_idempotent_producer_off(broker_cluster: Any) -> None:
    broker_cluster.create_topic("console1", 1)
    server = servers(broker_cluster)[0]
    produced = lumber("produce", "console1", "--acks", "1", "--bootstrap-server", server, stdin=b"a\nb\n")
    assert produced.returncode == 0, produced.stderr
    with consumer(broker_cluster, TopicPartition("console1", 0)) as c:
        batches = read_batches(c, 2)
        c.seek(TopicPartition("console1", 0), 0)
        records = read_records(c, 2)
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b")]
    assert {b.batch.producer_id for b in batches} == {-1}  # not idempotent
