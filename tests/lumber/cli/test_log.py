"""``lumber log verify`` and ``lumber broker start --verify-logs`` on the log dir of a real, stopped broker
whose segment files are then damaged by hand."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import crc32c

from broker.client.network.connection import BrokerConnection
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.batch_header import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE
from tests.support.broker_cluster import BrokerCluster, BrokerProcess
from tests.support.poison_batches import forge_batch, records

BATCH = forge_batch(records(5), 5)
SIZE = len(BATCH)
SEGMENT = "00000000000000000000.log"


def lumber(config: Path, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lumber", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def fill(broker: BrokerProcess, topic: str, partitions: int, batches: int) -> None:
    conn = BrokerConnection("127.0.0.1", broker.port, node_id=broker.broker_id)
    conn.connect()
    try:
        for p in range(partitions):
            for i in range(batches):
                body = ProduceRequest(
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[TopicProduceData(topic, [PartitionProduceData(p, BATCH)])],
                )
                answer = conn.request(body).responses[0].partition_responses[0]
                assert (answer.error_code, answer.base_offset) == (0, i * 5)
    finally:
        conn.close()


def rewrite(path: Path, position: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        f.write(data)


def test_verify_reports_each_damage_with_file_position_and_offset(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.brokers[0]
    broker_cluster.create_topic("checked", 3)
    fill(broker, "checked", 3, 10)
    broker.stop()
    config = broker.config_path

    clean = lumber(config, "log", "verify", "checked", "--json")
    assert clean.returncode == 0, clean.stderr
    reports = [json.loads(line) for line in clean.stdout.splitlines()]
    assert [(r["segments"], r["batches"], r["records"], r["next_offset"], r["ok"]) for r in reports] == [
        (1, 10, 50, 50, True)
    ] * 3

    # p0: a record inside batch 3 made garbage, CRC recomputed: only the record walk can see it
    p0 = broker.log_dir / "checked-0" / SEGMENT
    data = bytearray(p0.read_bytes()[3 * SIZE : 4 * SIZE])
    data[HEADER_SIZE] = 0x7E  # the first record's length varint: 63 bytes, more than the record takes
    data[CRC_OFFSET : CRC_OFFSET + 4] = crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    rewrite(p0, 3 * SIZE, bytes(data))
    # p1: one flipped byte in batch 7's last record
    p1 = broker.log_dir / "checked-1" / SEGMENT
    rewrite(p1, 8 * SIZE - 1, bytes([p1.read_bytes()[8 * SIZE - 1] ^ 0x01]))
    # p2: a torn tail, half a batch after the 10 whole ones
    p2 = broker.log_dir / "checked-2" / SEGMENT
    with p2.open("ab") as f:
        f.write(BATCH[: SIZE // 2])

    damaged = lumber(config, "log", "verify", "checked")
    assert damaged.returncode == 1, damaged.stderr
    lines = damaged.stdout.splitlines()
    damage = [line.strip() for line in lines if line.strip().startswith("DAMAGE")]
    assert len(damage) == 3, damaged.stdout
    assert damage[0].startswith(
        f"DAMAGE {p0}: position {3 * SIZE}, offset 15: record #0: record length says 63 bytes"
    )
    assert damage[1].startswith(f"DAMAGE {p1}: position {7 * SIZE}, offset 35: expected CRC")
    assert damage[2] == (
        f"DAMAGE {p2}: position {10 * SIZE}, offset 50: torn tail: batchLength announces {SIZE} bytes, "
        f"only {SIZE // 2} remain in the file"
    )

    one = lumber(config, "log", "verify", "checked", "--partition", "1", "--log-dir", str(broker.log_dir))
    assert one.returncode == 1
    assert one.stdout.count("DAMAGE") == 1
    missing = lumber(config, "log", "verify", "nothing-here")
    assert missing.returncode == 2
    assert "no partition of nothing-here" in missing.stderr

    refused = lumber(config, "broker", "start", "--verify-logs")
    assert refused.returncode == 1
    assert f"DAMAGE {p0}: position {3 * SIZE}, offset 15" in refused.stderr
    assert "broker 0 refuses to start: --verify-logs found damage in 3 of 3 partition(s)" in refused.stderr
    assert "is up" not in refused.stderr


def test_verify_logs_starts_a_broker_whose_logs_are_intact(broker_cluster: BrokerCluster) -> None:
    broker = broker_cluster.brokers[0]
    broker_cluster.create_topic("intact", 2)
    fill(broker, "intact", 2, 4)
    broker.stop()
    argv = [sys.executable, "-m", "lumber", "--config", str(broker.config_path), "broker", "start"]
    log_path = broker.base_dir / "verify-logs.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([*argv, "--verify-logs"], stderr=log)
    try:
        deadline = time.monotonic() + 60
        while "is up" not in log_path.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log_path.read_text()
        assert "--verify-logs checked 2 partition(s), 40 record(s): no damage" in text
        assert "is up" in text
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
