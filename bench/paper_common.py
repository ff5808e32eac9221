"""The paper's Section 5 experiment (:mod:`bench.paper`): its settings, result records, meters and probes,
and the :class:`Target` protocol every system under test implements (:mod:`bench.paper_targets`)."""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rich.progress import Progress

from bench.peers import (
    disk_bytes_by_kind,
)

REPO = Path(__file__).resolve().parent.parent
VALUE_BYTES = 200
PREFETCH_MESSAGES = 1000
PREFETCH_BYTES = 200 * 1024
LUMBER_FLUSH_MESSAGES = 10_000  # the paper's M
LUMBER_FLUSH_MS = 1000  # the paper's S
PHASE_TIMEOUT_S = 600.0
SETTLE_TIMEOUT_S = 15.0
LATENCY_GRACE_S = 10.0
#: traffic that keeps flowing after the measured window at the same rate (longer than Lumber's S = 1 s,
#: so that no message of the window waits for a flush that only a finite run's end would delay)
LATENCY_TAIL_S = 1.5
MB = 1_000_000
MIB = 1024 * 1024

LUMBER_B1 = "Lumber, batch 1"
LUMBER_B50 = "Lumber, batch 50"
RABBITMQ = "RabbitMQ"
ACTIVEMQ = "ActiveMQ"
LUMBER_LAT_FLUSHED = "Lumber (exposed after flush, M=10k / S=1 s)"
LUMBER_LAT_APPENDED = "Lumber (expose = appended)"

#: The paper's figures (Section 5) and issue 9's targets (x RabbitMQ).
PAPER_MSGS = {"produce, batch 1": 50_000, "produce, batch 50": 400_000, "consume": 22_000}
TARGETS = {"produce, batch 1": 2.5, "produce, batch 50": 25.0, "consume": 20.0}
TARGET_OVERHEAD_BYTES = 9.0


# ------------------------------------------------------------------------------------------ results


@dataclass
class PhaseRun:
    """One produce or consume run of one system."""

    messages: int
    seconds: float
    #: when the client had handed every message over (the broker may still be catching up)
    handed_s: float
    client_cpu_s: float
    server_cpu_s: float
    #: (seconds since the start, messages done so far): producing, what the broker holds (sampled by a
    #: probe every 50 ms); consuming, what the consumer received
    samples: list[tuple[float, int]]

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


@dataclass
class SystemResult:
    name: str
    produce: list[PhaseRun] = field(default_factory=list)
    consume: list[PhaseRun] = field(default_factory=list)
    disk_bytes_per_message: float | None = None
    #: round 1's bytes on disk per message by kind of file
    disk_by_kind: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class LatencyResult:
    system: str
    rate: int
    sent: int = 0
    received: int = 0
    achieved_rate: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    #: median latency of the window's last fifth minus that of its first fifth (by send time)
    growth_ms: float | None = None
    sustained: bool = False
    verdict: str = ""


@dataclass
class Limits:
    append_mbps: list[float] = field(default_factory=list)
    sendfile_mbps: list[float] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


# ------------------------------------------------------------------------------------------ helpers


def make_values(count: int) -> list[bytes]:
    """``count`` 200-byte log-line-like values (1000 distinct ones, cycled)."""
    distinct = [
        (b"%08d GET /api/v1/items?id=%d HTTP/1.1 200 user=%d " % (i, i * 7919, i % 97)).ljust(
            VALUE_BYTES, b"x"
        )
        for i in range(1000)
    ]
    return [distinct[i % 1000] for i in range(count)]


_STAMP_PAD = b"." * (VALUE_BYTES - 16)


def stamped(t_ns: int) -> bytes:
    """A 200-byte value carrying ``t_ns`` as 16 hex digits (ASCII: safe in every protocol)."""
    return b"%016x" % t_ns + _STAMP_PAD


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def disk_by_kind(path: Path) -> dict[str, int]:
    """Bytes on disk below ``path`` per kind of file, once two readings 0.25 s apart agree (the stores
    write behind), bounded in time; {} if ``path`` does not exist yet."""
    if not path.exists():
        return {}
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    last = disk_bytes_by_kind(path)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = disk_bytes_by_kind(path)
        if now == last:
            return now
        last = now
    return last


def wait_for(
    predicate: Callable[[], bool], what: str, timeout_s: float = PHASE_TIMEOUT_S, pause_s: float = 0.005
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(pause_s)


def load_note() -> str:
    one, five, fifteen = os.getloadavg()
    pressure = ""
    with contextlib.suppress(OSError):
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        pressure = ", CPU pressure " + " ".join(some.split()[1:3])
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min){pressure}"


class Meter:
    """A progress bar for one phase that also keeps (time, done) samples for the chart."""

    def __init__(self, progress: Progress, description: str, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task(description, total=total, rate="")
        self.total = total
        self.step = max(50, (total // 200) // 50 * 50)  # a multiple of 50: batch-50 chunks stay whole
        self.samples: list[tuple[float, int]] = [(0.0, 0)]
        self.started = time.perf_counter()

    def start(self) -> None:
        self.started = time.perf_counter()
        self.samples = [(0.0, 0)]

    def update(self, done: int) -> None:
        elapsed = time.perf_counter() - self.started
        self.samples.append((elapsed, done))
        rate = f"{done / elapsed:>10,.0f} msg/s" if elapsed > 0 else ""
        self._progress.update(self._task, completed=done, rate=rate)

    def close(self) -> None:
        self._progress.remove_task(self._task)


class BrokerProbe:
    """Samples how far a broker has got, every 50 ms in a thread of its own, while a producer runs: the
    producer's own count shows only what it handed to its socket, which says little for a producer that
    does not wait for acknowledgements. ``read`` returns progress in any unit that grows linearly with the
    messages the broker holds (queue depth, bytes written); :meth:`samples` scales the readings so that the
    last one, taken when the phase ended, is all ``messages``."""

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read
        self._readings: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._started = 0.0
        self._thread = threading.Thread(target=self._run, name="broker-probe", daemon=True)

    def start(self, started: float) -> None:
        self._started = started
        self._thread.start()

    def _run(self) -> None:
        baseline = self._read()
        while not self._stop.wait(0.05):
            self._readings.append((time.perf_counter() - self._started, self._read() - baseline))
        self._readings.append((time.perf_counter() - self._started, self._read() - baseline))

    def samples(self, messages: int, seconds: float) -> list[tuple[float, int]]:
        self._stop.set()
        self._thread.join(10)
        final = self._readings[-1][1] if self._readings else 0.0
        points = [(0.0, 0)]
        if final > 0:
            points += [
                (t, min(messages, max(0, round(units / final * messages))))
                for t, units in self._readings
                if t < seconds
            ]
        points.append((seconds, messages))
        return points


class Target(Protocol):
    """One system under test, as the rounds drive it."""

    name: str

    def produce(self, round_number: int, values: list[bytes], meter: Meter) -> PhaseRun: ...

    def consume(self, round_number: int, count: int, meter: Meter) -> PhaseRun: ...

    def data_dir(self, round_number: int) -> Path:
        """The folder whose growth while producing round ``round_number`` is the messages' disk use."""
        ...

    def close(self) -> None: ...
