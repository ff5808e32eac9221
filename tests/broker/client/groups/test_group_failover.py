"""Four consumer processes share a 12-partition stream; one is SIGKILLed while it streams (issue 5).

The survivors take its partitions once its session expires (not before: that would be two owners), every
produced offset is consumed at least once, and the only duplicates are the records the killed member had
consumed after its last commit, which its successors consume again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from broker.cluster import zk_paths
from tests.broker.client.helpers import producer

TOPIC = "stream"
PARTITIONS = 12
GROUP = "workers"
SESSION_TIMEOUT_MS = 3000
ROOT = Path(__file__).resolve().parents[4]


def owners(zk: Any) -> dict[int, str]:
    found = {}
    for p in range(PARTITIONS):
        try:
            found[p] = json.loads(zk.get(zk_paths.group_owner_path(GROUP, TOPIC, p))[0])["owner"]
        except NoNodeError:
            continue
    return found


def committed(zk: Any, partition: int) -> int:
    path = zk_paths.group_offset_path(GROUP, TOPIC, partition)
    return int(json.loads(zk.get(path)[0])["offset"]) if zk.exists(path) is not None else 0


def wait(predicate: Any, timeout_s: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout_s, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)
    return time.monotonic()


def read_output(path: Path) -> list[tuple[int, int]]:
    lines = path.read_bytes().split(b"\n") if path.exists() else []
    return [(int(p), int(o)) for p, o in (line.split() for line in lines if line.count(b" ") == 1)]


def test_survivors_take_over_a_killed_member_with_duplicates_only_in_its_uncommitted_window(
    broker_cluster: Any, tmp_path: Path
) -> None:
    broker_cluster.create_topic(TOPIC, PARTITIONS)
    zk = broker_cluster.zk
    produced = Counter[int]()
    stop_producing = threading.Event()

    def produce() -> None:
        with producer(broker_cluster) as p:
            while not stop_producing.is_set():
                for partition in range(PARTITIONS):
                    p.send(TOPIC, value=b"%d" % produced[partition], partition=partition)
                    produced[partition] += 1
                p.flush()
                time.sleep(0.02)

    outputs = [tmp_path / f"member-{i}.out" for i in range(4)]
    logs = [(tmp_path / f"member-{i}.log").open("wb") for i in range(4)]
    processes = [
        subprocess.Popen(
            [
                sys.executable, "-m", "tests.broker.client.groups.group_member_process",
                "--zookeeper", broker_cluster.zk_connect, "--servers", broker_cluster.bootstrap_servers,
                "--group", GROUP, "--topic", TOPIC, "--prefix", f"proc{i}", "--out", str(outputs[i]),
                "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            ],
            cwd=ROOT,
            stderr=logs[i],
        )
        for i in range(4)
    ]  # fmt: skip
    feeder = threading.Thread(target=produce, daemon=True)
    try:
        wait(lambda: len(set(owners(zk).values())) == 4 and len(owners(zk)) == PARTITIONS, 60, "4 owners")
        feeder.start()
        wait(lambda: all(len(read_output(out)) > 50 for out in outputs), 30, "every member to stream")
        victim_prefix = owners(zk)[0].split("-")[0]
        victim = int(victim_prefix.removeprefix("proc"))
        victim_partitions = sorted(
            p for p, owner in owners(zk).items() if owner.startswith(victim_prefix + "-")
        )
        assert len(victim_partitions) == 3
        os.kill(processes[victim].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        processes[victim].wait(10)
        time.sleep(0.2)  # a commit already on the wire lands; after this nobody commits for the victim
        at_kill = {p: committed(zk, p) for p in victim_partitions}
        taken_at = wait(
            lambda: (
                len(owners(zk)) == PARTITIONS
                and not any(o.startswith(victim_prefix + "-") for o in owners(zk).values())
            ),
            SESSION_TIMEOUT_MS / 1000 + 15,
            "the survivors to take over",
        )
        time.sleep(0.5)
        stop_producing.set()
        feeder.join(10)
        survivors = [out for i, out in enumerate(outputs) if i != victim]
        everything = {(p, o) for p in range(PARTITIONS) for o in range(produced[p])}
        wait(
            lambda: (
                everything
                <= {r for out in survivors for r in read_output(out)} | set(read_output(outputs[victim]))
            ),
            30,
            "every produced record to be consumed",
        )
        for i, process in enumerate(processes):
            if i != victim:
                process.send_signal(signal.SIGTERM)
        for i, process in enumerate(processes):
            if i != victim:
                assert process.wait(30) == 0
    finally:
        stop_producing.set()
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        for log in logs:
            log.close()

    # not before its session expired (that would be two owners), and soon after
    takeover_s = taken_at - killed_at
    assert SESSION_TIMEOUT_MS / 1000 * 0.5 <= takeover_s <= SESSION_TIMEOUT_MS / 1000 + 10
    records = [r for out in outputs for r in read_output(out)]
    assert set(records) == everything  # every produced offset consumed at least once
    duplicates = {r for r, n in Counter(records).items() if n > 1}
    assert all(n == 2 for n in Counter(records).values() if n > 1)
    victim_records = read_output(outputs[victim])
    uncommitted = {(p, o) for p, o in victim_records if p in at_kill and o >= at_kill[p]}
    assert duplicates == uncommitted
