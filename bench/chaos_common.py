"""The chaos run's settings, small helpers and its record of one fault (:mod:`bench.chaos`).

The settings fix the system under test (topics, partitions, producers, brokers, the broker whose log dir is a
tmpfs, session timeouts, the consumer groups, the full-disk probes' topic); :class:`Fault` is what the
report tells of each fault.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent

HOUR_MS = 3_600_000
TOPICS = ("page_view", "click")
PARTITIONS = 3
PRODUCERS = 4
BROKERS = 3
#: the broker whose log dir is a small tmpfs (the full-disk fault)
DISK_BROKER = 2
TMPFS_BYTES = 256 * 1024 * 1024
SESSION_TIMEOUT_MS = 6000
GROUP_SESSION_TIMEOUT_MS = 4000
CONSUMER_GROUP = "chaos-readers"
#: the Kafka-protocol group; its session is the brokers' group_min_session_timeout_ms (6 s, Kafka's)
KAFKA_GROUP = "chaos-kafka-readers"
KAFKA_GROUP_SESSION_TIMEOUT_MS = 6000
#: the consumer processes (the consumer faults pick one): name -> (group, protocol, session timeout ms)
READERS = {
    "consumer": (CONSUMER_GROUP, "zookeeper", GROUP_SESSION_TIMEOUT_MS),
    "kconsumer": (KAFKA_GROUP, "kafka", KAFKA_GROUP_SESSION_TIMEOUT_MS),
}
#: a topic only the full-disk fault's probes write to (never loaded, mirrored or audited): produced to
#: before the faults, read back from broker 2 while its log dir is full, and produced to while full
PROBE_TOPIC = "chaos-probe"
PROBE_RECORDS = 20
#: larger than a page: a "full" filesystem still takes a small write into the free tail of the last page
#: its segment file holds (seen: a 16-byte record accepted on the full tmpfs)
PROBE_FULL_VALUE = b"x" * 65536
PY = sys.executable
ROLES = str(REPO / "bench" / "chaos_roles.py")


def say(line: str = "") -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}" if line else "", flush=True)


def hour_text(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H", time.gmtime(ms / 1000))


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if predicate():
                return True
        time.sleep(interval_s)
    return False


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclasses.dataclass
class Fault:
    kind: str
    target: str
    started_s: float
    detail: str = ""
    held_s: float = 0.0
    recovery_s: float | None = None
    ok: bool = True
