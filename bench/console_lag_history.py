"""What the group page's lag history costs (issue 23): a kafka group's page with its commits read from
``__consumer_offsets``, against the same page reading none, in the same run.

Run from the repository root::

    .venv/bin/python bench/console_lag_history.py           # --commits 2000 --noise 20000 --rounds 20
    .venv/bin/python bench/console_lag_history.py --layout group-first   # the group's commits all older
    .venv/bin/python bench/console_lag_history.py --quick   # smoke run: 200 commits, 2,000 noise, 4 rounds

One ZooKeeper and one Lumber broker on 127.0.0.1 (``tests/support/broker_cluster.py``) whose offsets topic
has one partition, so that the group shares it with another group's commits (the page reads and skips
those too, as it would any group hashing to its partition); a topic of 4 partitions. A confluent-kafka
member of group ``bench-history`` commits ``--commits`` times (all 4 partitions each time: 4 records of the
offsets topic per commit), and a member of ``bench-noise`` commits ``--noise`` times (one partition each),
the group's commits spread evenly through the other's (``--layout interleaved``, the page finds its 60
commit times in the last records) or all before them (``group-first``: the page reads back through the
other group's commits, up to its budget of 50,000 records).
Then ``lumber console`` runs as a process, and each round GETs ``/groups/bench-history?kind=kafka&format=
json`` with ``history=1h`` (the page reads the group's partition of the offsets topic, up to its last
50,000 records, and draws the last 60 commit times, one ListOffsets each) and with ``history=1ms`` (the
baseline: the same page, the range found empty, nothing read), in alternating order. Printed: each page's
median time, the median of the rounds' paired ratios (history over baseline, back to back) with its
quartiles, and a Markdown line for ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from broker.client.consumer.consumer_config import ConsumerConfig
from lumber.config import ConsoleConfig, LumberConfig, ZooKeeperConfig, dump_config
from lumber.dev.process import free_port, start_and_wait, stop
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import BrokerCluster
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as ConfluentPartition

TOPIC = "bench_lagged"
PARTITIONS = 4
GROUP = "bench-history"
NOISE = "bench-noise"


def produce(servers: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "all"})
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(TOPIC, value=b"x%d" % i, partition=partition)
            producer.poll(0)
    if producer.flush(60) != 0:
        raise SystemExit("the producer did not deliver every record")


def member(servers: str, group: str) -> Any:
    """A confluent-kafka member of ``group`` holding all of the topic's partitions."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "max.poll.interval.ms": 3_600_000,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while len(consumer.assignment()) < PARTITIONS:
        if time.monotonic() > deadline:
            raise SystemExit(f"{group}: no assignment")
        consumer.poll(0.2)
    return consumer


def commit(consumer: Any, n: int, partitions: int, *, wait: bool = False) -> None:
    offsets = [ConfluentPartition(TOPIC, p, n) for p in range(partitions)]
    if wait:
        consumer.commit(offsets=offsets, asynchronous=False)
    else:
        consumer.commit(offsets=offsets, asynchronous=True)
    if n % 500 == 0:
        consumer.poll(0)  # serve the commit callbacks


def commit_all(servers: str, commits: int, noise: int, layout: str) -> float:
    """The group's ``commits`` (all partitions each) and the other group's ``noise`` (one partition each):
    the group's first and the noise after them (``group-first``; asynchronous, the last of each
    synchronous so that all are in the log), or spread evenly through the noise (``interleaved``; each of
    the group's synchronous, then the noise's share, its last synchronous). Returns the seconds they
    took."""
    group, other = member(servers, GROUP), member(servers, NOISE)
    try:
        started = time.perf_counter()
        if layout == "group-first":
            for n in range(1, commits + 1):
                commit(group, n, PARTITIONS, wait=n == commits)
            for n in range(1, noise + 1):
                commit(other, n, 1, wait=n == noise)
        else:
            done = 0
            for n in range(1, commits + 1):  # each one acknowledged before the next group's: in log order
                commit(group, n, PARTITIONS, wait=True)
                until = noise * n // commits
                for m in range(done + 1, until + 1):
                    commit(other, m, 1, wait=m == until)
                done = until
        return time.perf_counter() - started
    finally:
        group.close()
        other.close()


def page_seconds(client: httpx.Client, url: str, history: str) -> tuple[float, int, str | None]:
    """The page's time, its moments and its note."""
    started = time.perf_counter()
    answer = client.get(url, params={"kind": "kafka", "format": "json", "history": history})
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    found = answer.json()["lag_history"]
    return seconds, len(found["total"]), found["note"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--noise", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--layout",
        choices=("interleaved", "group-first"),
        default="interleaved",
        help="the group's commits spread through the other group's (default), or all before them",
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.commits, args.noise, args.rounds = 200, 2000, 4
    with tempfile.TemporaryDirectory(prefix="lumber-bench-history-") as tmp:
        base = Path(tmp)
        zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
        zookeeper.start()
        cluster = BrokerCluster(make_chroot(zookeeper.connect, "console_lag_history"), base / "brokers")
        console = None
        try:
            cluster.add_broker({"offsets_topic_partitions": 1, "group_initial_rebalance_delay_ms": 0})
            cluster.create_topic(TOPIC, PARTITIONS)
            servers = cluster.bootstrap_servers
            produce(servers, args.commits)
            seconds = commit_all(servers, args.commits, args.noise, args.layout)
            records = args.commits * PARTITIONS + args.noise
            print(
                f"commits ({args.layout}): {args.commits} x {PARTITIONS} partitions and {args.noise} of "
                f"another group in {seconds:.1f} s: about {records:,} records in __consumer_offsets-0"
            )
            port = free_port()
            config = LumberConfig().replace(
                zookeeper=ZooKeeperConfig(connect=cluster.zk_connect),
                consumer=ConsumerConfig(bootstrap_servers=servers.split(",")),
                console=ConsoleConfig(port=port, request_timeout_ms=60_000),
            )
            config_path = base / "console.toml"
            config_path.write_text(dump_config(config))
            url = f"http://127.0.0.1:{port}"

            def answers() -> bool:
                try:
                    return httpx.get(f"{url}/groups", timeout=5).status_code == 200
                except httpx.HTTPError:
                    return False

            argv = [sys.executable, "-m", "lumber", "--config", str(config_path), "console"]
            console = start_and_wait("console", argv, base / "console.log", answers, timeout_s=60)
            page = f"{url}/groups/{GROUP}"
            with_history: list[float] = []
            without: list[float] = []
            ratios: list[float] = []
            drawn: dict[str, int] = {}
            notes: dict[str, str | None] = {}
            with httpx.Client(timeout=120) as client:
                page_seconds(client, page, "1h")  # warm: imports, connections
                for round_number in range(args.rounds):
                    order = ("1h", "1ms") if round_number % 2 == 0 else ("1ms", "1h")
                    timed = {}
                    for history in order:
                        seconds, points, note = page_seconds(client, page, history)
                        timed[history] = seconds
                        # commits of one millisecond are one moment: up to 60 with history, none without;
                        # none either when the other group's commits fill the budget (the note says so)
                        if (history == "1ms" and points != 0) or not 0 <= points <= 60:
                            raise SystemExit(f"history={history}: {points} points")
                        drawn[history] = points
                        notes[history] = note
                    with_history.append(timed["1h"])
                    without.append(timed["1ms"])
                    ratios.append(timed["1h"] / timed["1ms"])
            quartiles = statistics.quantiles(ratios, n=4)
            print(
                f"page with history (1h, {drawn['1h']} moments): median "
                f"{statistics.median(with_history) * 1000:.0f} ms"
            )
            print(f"page without (1ms):     median {statistics.median(without) * 1000:.0f} ms")
            print(f"the note with history: {notes['1h']}")
            print(
                f"paired ratio: median {statistics.median(ratios):.2f} "
                f"[{quartiles[0]:.2f} - {quartiles[2]:.2f}] over {args.rounds} rounds"
            )
            print(
                f"| `bench/console_lag_history.py --commits {args.commits} --noise {args.noise} --rounds "
                f"{args.rounds} --layout {args.layout}` | {records:,} | {drawn['1h']} | "
                f"{statistics.median(with_history) * 1000:.0f} | {statistics.median(without) * 1000:.0f} | "
                f"{statistics.median(ratios):.2f} "
                f"[{quartiles[0]:.2f} - {quartiles[2]:.2f}] |"
            )
        finally:
            if console is not None:
                stop(console[0], popen=console[1])
            cluster.stop()
            zookeeper.stop()


if __name__ == "__main__":
    main()
