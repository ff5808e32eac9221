"""What the broker's Prometheus metrics cost the Section 5 produce and consume figures (issue 23; goal <= 3%).

Run from the repository root::

    .venv/bin/python bench/metrics_cost.py            # --messages 200000 --rounds 10
    .venv/bin/python bench/metrics_cost.py --quick    # smoke run: 20,000 messages, 2 rounds

One ZooKeeper and two Lumber broker processes on 127.0.0.1 (``tests/support/broker_cluster.py``), the same
but for ``[broker] metrics_port``: broker 0 has no metrics, broker 1 serves them and a thread of this
process scrapes its ``/metrics`` every second (``--scrape-interval``; Prometheus scrapes every 15 s by
default: 1 s is harsher).
Both use ``bench/paper.py``'s Lumber settings and phases (its ``LumberTarget``): the paper's flush policy
with ``expose = "appended"``, 200-byte messages, ``acks=0`` batches of 50 (``send_many``), the clock
stopping when ListOffsets shows all N; the consumer reads them with 200 KiB of prefetch (``poll_values``).
Each round runs the four phases (off/on x produce/consume), the order of off and on alternating between
rounds, so that both see the same machine load; halfway, both brokers restart with the metrics moved to
the other one, so that a difference between the two broker processes cancels out. Printed: the medians and
their ratio on/off, and, the figure to read on a shared machine, the median of the rounds' paired ratios
(each round's on over its off, run back to back), with a Markdown line for ``BENCHMARKS.md``.

On a shared machine the end-to-end ratios carry a few percent of noise, so the script also times, in this
process, what the metrics add where they sit on a request's path: one
:meth:`~broker.server.broker_metrics.MeteredRequestChannel.send_response` bookkeeping (an answered request
and the log region of a Fetch answer), per answer, against the time of the answers themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from rich.progress import Progress

from bench.paper_common import LUMBER_FLUSH_MESSAGES, LUMBER_FLUSH_MS, Meter, make_values
from bench.paper_targets import LumberTarget
from broker.log.file_handle import FileHandle
from broker.log.file_region import FileRegion
from broker.server.broker_metrics import BrokerMetrics
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import BrokerCluster
from tests.support.zookeeper import make_chroot


@contextlib.contextmanager
def two_brokers(base: Path, metrics_port: int) -> Iterator[BrokerCluster]:
    zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
    zookeeper.start()
    try:
        cluster = BrokerCluster(make_chroot(zookeeper.connect, "metrics_cost"), base / "brokers")
        try:
            common = {
                "flush_messages": LUMBER_FLUSH_MESSAGES,
                "flush_ms": LUMBER_FLUSH_MS,
                "expose": "appended",
            }
            cluster.add_broker({**common, "metrics_port": 0})
            cluster.add_broker({**common, "metrics_port": metrics_port})
            yield cluster
        finally:
            cluster.stop()
    finally:
        zookeeper.stop()


class Scraper(threading.Thread):
    """GET /metrics every ``interval_s`` for the whole run, until stopped; counts the scrapes and times
    them (a scrape that finds no server, while the brokers restart halfway, is skipped)."""

    def __init__(self, url: str, interval_s: float) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.interval_s = interval_s
        self.scrapes = 0
        self.bytes = 0
        self.seconds: list[float] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop_event.wait(self.interval_s):
                started = time.perf_counter()
                try:
                    answer = client.get(self.url)
                except httpx.TransportError:
                    continue  # the brokers are restarting with the metrics moved
                answer.raise_for_status()
                self.seconds.append(time.perf_counter() - started)
                self.scrapes += 1
                self.bytes = len(answer.content)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


def bookkeeping_us(count: int = 200_000) -> float:
    """Microseconds one answered Fetch adds in :class:`MeteredRequestChannel` (its counting alone)."""
    metrics = BrokerMetrics()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "events-0"
        folder.mkdir()
        path = folder / "00000000000000000000.log"
        path.write_bytes(b"x" * 4096)
        handle = FileHandle.open(path)
        try:
            region = FileRegion(handle, 0, 4096, 0, 10)
            frame = (1).to_bytes(2, "big") + b"\x00" * 30
            started = time.perf_counter()
            for _ in range(count):
                metrics.answered(int.from_bytes(frame[:2], "big", signed=True), 0.001)
                metrics.sent_region(region)
            return (time.perf_counter() - started) / count * 1e6
        finally:
            handle.close()


def paired_ratios(on: list[float], off: list[float]) -> list[float]:
    """Each round's on/off ratio: the two ran back to back, so a load that changes between rounds cancels
    out of the ratio (the median of these is the figure to read on a shared machine)."""
    return [a / b for a, b in zip(on, off, strict=True)]


def quartiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return cuts[0], cuts[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--scrape-interval",
        type=float,
        default=1.0,
        help="seconds between scrapes of /metrics (default 1; Prometheus scrapes every 15 by default)",
    )
    args = parser.parse_args()
    if args.quick:
        args.messages, args.rounds = 20_000, 2
    logging.basicConfig(level=logging.WARNING)
    values = make_values(args.messages)
    port = free_port()
    rates: dict[str, list[float]] = {"produce off": [], "produce on": [], "consume off": [], "consume on": []}
    #: the broker's and the client's CPU seconds per phase, summed over the rounds (the broker's CPU is read
    #: from /proc in ticks of 10 ms: one phase's figure is coarse, the sum over many rounds is not)
    server_cpu = dict.fromkeys(rates, 0.0)
    client_cpu = dict.fromkeys(rates, 0.0)
    with (
        tempfile.TemporaryDirectory(prefix="lumber-metrics-cost-") as tmp,
        two_brokers(Path(tmp), port) as cluster,
    ):
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics", args.scrape_interval)
        scraper.start()
        with Progress(transient=True) as progress:
            for round_number in range(1, args.rounds + 1):
                metered = 1 if round_number <= args.rounds // 2 else 0
                if round_number == args.rounds // 2 + 1:  # move the metrics to the other broker
                    for broker in cluster.brokers:  # both down first: broker 1 holds the port
                        broker.stop()
                    for broker in cluster.brokers:
                        broker.settings = {
                            **broker.settings,
                            "metrics_port": port if broker.broker_id == 0 else 0,
                        }
                        broker.start()
                targets = {
                    "off": LumberTarget("off", cluster, 50, 1 - metered),
                    "on": LumberTarget("on", cluster, 50, metered),
                }
                order = ("off", "on") if round_number % 2 else ("on", "off")
                for phase in ("produce", "consume"):
                    for which in order:
                        meter = Meter(
                            progress, f"round {round_number} {phase} metrics {which}", args.messages
                        )
                        target = targets[which]
                        key = 2 * round_number + (which == "on")  # a topic of its own per broker
                        run = (
                            target.produce(key, values, meter)
                            if phase == "produce"
                            else target.consume(key, args.messages, meter)
                        )
                        meter.close()
                        rates[f"{phase} {which}"].append(run.rate)
                        server_cpu[f"{phase} {which}"] += run.server_cpu_s
                        client_cpu[f"{phase} {which}"] += run.client_cpu_s
        scraper.stop()
        took = (
            f", {statistics.median(scraper.seconds) * 1000:.1f} ms each (median)" if scraper.seconds else ""
        )
        print(
            f"{scraper.scrapes} scrapes of /metrics during the run ({scraper.bytes:,} bytes at the end){took}"
        )
    per_answer_us = bookkeeping_us()
    print(f"metrics bookkeeping per answered request (in-process): {per_answer_us:.2f} us")
    medians = {name: statistics.median(found) for name, found in rates.items()}
    for name, found in rates.items():
        print(
            f"{name:12} median {medians[name]:>10,.0f} msg/s  (min {min(found):,.0f}, max {max(found):,.0f})"
        )
    produce = medians["produce on"] / medians["produce off"]
    consume = medians["consume on"] / medians["consume off"]
    print(f"ratio of the medians on/off: produce {produce:.3f}, consume {consume:.3f}")
    paired = {
        phase: paired_ratios(rates[f"{phase} on"], rates[f"{phase} off"]) for phase in ("produce", "consume")
    }
    for phase, ratios in paired.items():
        low, high = quartiles(ratios)
        print(
            f"{phase}: median of the {len(ratios)} rounds' on/off ratios {statistics.median(ratios):.3f} "
            f"(quartiles {low:.3f} - {high:.3f}; rounds with metrics slower: "
            f"{sum(r < 1 for r in ratios)} of {len(ratios)})"
        )
    total = args.messages * args.rounds  # messages of one phase on one side, over the run
    for phase in ("produce", "consume"):
        off, on = server_cpu[f"{phase} off"], server_cpu[f"{phase} on"]
        client_off, client_on = client_cpu[f"{phase} off"], client_cpu[f"{phase} on"]
        print(
            f"{phase}: broker CPU per message off {off / total * 1e6:.3f} us, on {on / total * 1e6:.3f} us "
            f"(on/off {on / off if off else float('nan'):.3f}); client CPU per message off "
            f"{client_off / total * 1e6:.3f} us, on {client_on / total * 1e6:.3f} us"
        )
    print(
        f"| {args.messages:,} msgs x {args.rounds} rounds, a scrape every {args.scrape_interval:g} s | "
        f"{medians['produce off']:,.0f} | "
        f"{medians['produce on']:,.0f} | {produce:.3f} | {statistics.median(paired['produce']):.3f} | "
        f"{medians['consume off']:,.0f} | {medians['consume on']:,.0f} | {consume:.3f} | "
        f"{statistics.median(paired['consume']):.3f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
