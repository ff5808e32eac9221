"""The broker's per-request cost of Produce and Fetch handling, in-process (no network), before and after a
change, in the same run (issue 18's split of the request handling).

Run from the repository root::

    .venv/bin/python bench/request_path.py --before /path/to/older/checkout [--runs 3]

Each tree is measured in its own process (``PYTHONPATH`` set to it), alternately, ``--runs`` times, so that
both see the same machine load. What a run measures, on a real :class:`~broker.log.log_manager.LogManager`
in a temporary folder (``expose = "appended"``, no flush during the run) and the tree's request handler
(``KafkaApis`` over ``ReplicaManager``; a tree from before issue 18: ``RequestHandler``), with a fixed
cluster view in which this broker leads ``t-0``:

* Produce v7 ``acks=1`` of one batch of 1 and of 50 records of 200 bytes, and ``acks=-1`` of 1 record
  (answered at once: the ISR is the leader);
* Produce v9 ``acks=1`` and ``acks=-1`` of one batch as librdkafka sends at batch 50 (the Kafka
  comparison's producer, issue 39): 50 keyless records of 100-byte values, no headers, timestamps a few
  milliseconds apart (one varint width), so that the validation's one-layout check vouches for the records
  instead of walking them (the 50-record case above has keys of two lengths, which it declines);
* the same ``acks=1`` request with another buffered behind it, as a pipelining client's reach a processor:
  ``handle_run`` offered the two first (it takes neither), then ``handle``;
* eight of the librdkafka ``acks=1`` requests whole in one read: ``handle_run`` offered them (it takes
  none), then ``handle_pipelined`` given them together (issue 39, ``write39``: one write), or on a tree
  without it ``handle`` one at a time (as its processor serves them); per request; and the same read with
  its requests to :data:`SPREAD` partitions in turn (as librdkafka spreads a producer's requests over a
  topic's partitions: one append group per partition, issue 39's "4 partitions at least 1.0x of 1");
* ``handle_run`` of 100 pipelined ``acks=0`` Produce requests (one append), per request;
* Fetch v11 of one partition from offset 0, up to 1 MiB (a file region: nothing is copied).

Each case repeats one request on one connection id, so from this branch on (issue 39, ``fuse39``) every
Produce case but its first request takes the fast path of :mod:`broker.server.produce_fast_path` (recognised,
not decoded; answered from a packed template), as a producer's connection does.

Time is the calling thread's CPU time (``time.thread_time``: every step above completes on it), so that a
shared machine's load disturbs it less than wall time; 7 rounds per case, the fastest counts. It prints
microseconds per request for each tree and the ratio after / before (below 1: the change is cheaper).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ROUNDS = 7
#: The partitions of ``t`` (all led here): the spread read's requests go to them in turn.
SPREAD = 4


def _measure() -> None:
    """One run in this process, on the tree ``PYTHONPATH`` names: prints ``case<TAB>us`` lines."""
    from broker.cluster.broker_info import BrokerInfo  # noqa: PLC0415 - the measured tree is on PYTHONPATH
    from broker.cluster.cluster_view import ClusterView  # noqa: PLC0415
    from broker.config import BrokerConfig, LogConfig  # noqa: PLC0415
    from broker.log.log_manager import LogManager  # noqa: PLC0415
    from broker.network.request_channel import NetworkRequest  # noqa: PLC0415
    from broker.protocol import compile_all, encode_request  # noqa: PLC0415
    from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: PLC0415
    from broker.protocol.messages.produce import (  # noqa: PLC0415
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )
    from broker.record.record_batch_builder import RecordBatchBuilder  # noqa: PLC0415
    from broker.server.purgatory import Purgatory  # noqa: PLC0415

    class Watcher:  # the cluster watcher's two members a request uses, over a fixed view
        def __init__(self, view: ClusterView) -> None:
            self.view = view

        def refresh(self) -> ClusterView:
            return self.view

    class Channel:  # the request channel's one member a handler uses
        def __init__(self) -> None:
            self.out: list[Any] = []

        def send_response(self, response: Any) -> None:
            self.out.append(response)

    compile_all()
    folder = tempfile.mkdtemp(prefix="lumber-request-path-")
    logs = LogManager(LogConfig(log_dirs=[folder], flush_messages=10**9, flush_ms=10**9, expose="appended"))
    for partition in range(SPREAD):
        logs.get_or_create_log("t", partition)
    brokers, topics = {0: BrokerInfo(0, "127.0.0.1", 9092)}, {"t": dict.fromkeys(range(SPREAD), (0,))}
    try:  # a tree with replication: t-0's state names this broker leader, in epoch 0
        from broker.cluster.partition_state import PartitionState  # noqa: PLC0415
        from broker.record.topic_partition import TopicPartition  # noqa: PLC0415

        state = PartitionState(leader=0, leader_epoch=0, isr=(0,), controller_epoch=1, zk_version=0)
        states = {TopicPartition("t", p): state for p in range(SPREAD)}
        view = ClusterView(brokers=brokers, topics=topics, states=states)
    except ImportError:  # before issue 19: the first replica leads
        view = ClusterView(brokers=brokers, topics=topics)
    watcher, channel, purgatory = Watcher(view), Channel(), Purgatory("bench")
    logs.add_listener(purgatory.notify)
    handler: Any
    try:
        from broker.server.kafka_apis import KafkaApis  # noqa: PLC0415
        from broker.server.replica_manager import ReplicaManager  # noqa: PLC0415

        replicas = ReplicaManager(0, logs, watcher, purgatory)  # type: ignore[arg-type]
        extra: dict[str, Any] = {}
        if "group_coordinator" in inspect.signature(KafkaApis).parameters:  # issue 21 on
            extra["group_coordinator"] = None
        handler = KafkaApis(
            config=BrokerConfig(),
            replica_manager=replicas,
            admin_manager=None,  # type: ignore[arg-type]
            cluster=watcher,  # type: ignore[arg-type]
            channel=channel,  # type: ignore[arg-type]
            cluster_id="bench",
            producer_ids=None,  # type: ignore[arg-type]
            **extra,
        )
    except ImportError:  # a tree from before issue 18
        from broker.server import request_handler  # type: ignore[attr-defined]  # noqa: PLC0415

        handler = request_handler.RequestHandler(
            config=BrokerConfig(),
            log_manager=logs,
            cluster=watcher,
            admin=None,
            channel=channel,
            purgatory=purgatory,
            cluster_id="bench",
            producer_ids=None,
        )

    def batch(count: int) -> bytes:
        builder = RecordBatchBuilder()
        for i in range(count):
            builder.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * 200)
        return builder.build()

    def librdkafka_batch() -> bytes:
        builder = RecordBatchBuilder()
        for i in range(50):
            builder.append(1_700_000_000_000 + i // 20, None, b"v" * 100)
        return builder.build()

    def librdkafka_produce(acks: int, partition: int = 0) -> NetworkRequest:
        data = [TopicProduceData("t", [PartitionProduceData(partition, librdkafka_batch())])]
        return request(ProduceRequest(acks=acks, timeout_ms=5000, topic_data=data), 9)

    def request(body: Any, version: int, correlation_id: int = 1) -> NetworkRequest:
        frame = encode_request(version, correlation_id, "bench", body)[4:]
        return NetworkRequest(0, "bench", "bench", frame, 0)

    def produce(acks: int, records: int, correlation_id: int = 1) -> NetworkRequest:
        data = [TopicProduceData("t", [PartitionProduceData(0, batch(records))])]
        return request(ProduceRequest(acks=acks, timeout_ms=5000, topic_data=data), 7, correlation_id)

    def handling(one: NetworkRequest) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                handler.handle(one)
            channel.out.clear()

        return run

    run_of_100 = [produce(0, 1, i) for i in range(100)]
    pipelined = [produce(1, 1, 1), produce(1, 1, 2)]

    def handling_pipelined(n: int) -> None:
        # a processor with a second request buffered behind the first offers the run to handle_run first
        for _ in range(n):
            if handler.handle_run(pipelined) != 0:
                raise RuntimeError("handle_run took an acks=1 request")
            handler.handle(pipelined[0])
        channel.out.clear()

    def handling_read_of_eight(partitions: int) -> Callable[[int], None]:
        read_of_eight = [librdkafka_produce(1, i % partitions) for i in range(8)]

        def run(n: int) -> None:
            # eight requests whole in one read: offered to handle_run (it takes none), then given together
            # (handle_pipelined, from write39 on) or one at a time (before: the processor's pipelining)
            together = getattr(handler, "handle_pipelined", None)
            for _ in range(n // 8):
                if handler.handle_run(read_of_eight) != 0:
                    raise RuntimeError("handle_run took an acks=1 request")
                if together is not None:
                    together(iter(read_of_eight))
                else:
                    for one in read_of_eight:
                        handler.handle(one)
            channel.out.clear()

        return run

    def handling_runs(n: int) -> None:
        for _ in range(n // 100):
            if handler.handle_run(run_of_100) != 100:
                raise RuntimeError("handle_run did not append the whole run")

    one_mib = 1 << 20
    fetch = request(
        FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=one_mib,
            topics=[
                FetchTopic("t", [FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=one_mib)])
            ],
        ),
        11,
    )
    cases = [
        ("produce acks=1, 1 record", handling(produce(1, 1)), 3000),
        ("produce acks=1, 50 records", handling(produce(1, 50)), 1000),
        ("produce v9 acks=1, librdkafka's 50 keyless records", handling(librdkafka_produce(1)), 1000),
        ("produce v9 acks=-1, librdkafka's 50 keyless records", handling(librdkafka_produce(-1)), 1000),
        ("produce acks=1, 1 record, another behind it", handling_pipelined, 3000),
        (
            "produce v9 acks=1, librdkafka's 50 records, 8 in one read (per request)",
            handling_read_of_eight(1),
            1000,
        ),
        (
            f"produce v9 acks=1, librdkafka's 50 records, 8 in one read, {SPREAD} partitions (per request)",
            handling_read_of_eight(SPREAD),
            1000,
        ),
        ("produce acks=-1, 1 record", handling(produce(-1, 1)), 3000),
        ("produce acks=0, run of 100 (per request)", handling_runs, 3000),
        ("fetch 1 partition, 1 MiB", handling(fetch), 3000),
    ]
    try:
        for name, run, n in cases:
            best = float("inf")
            for _ in range(ROUNDS):
                start = time.thread_time()
                run(n)
                best = min(best, (time.thread_time() - start) / n * 1e6)
            print(f"{name}\t{best:.2f}")
    finally:
        purgatory.shutdown()
        logs.close()
        shutil.rmtree(folder, ignore_errors=True)  # each run's log is ~170 MB


def _run(tree: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--measure"],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return {name: float(us) for name, us in (line.split("\t") for line in out.splitlines() if "\t" in line)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", type=Path, required=False, help="the older checkout to compare with")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per tree (default 3)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure()
        return 0
    trees = {"after": REPO} if args.before is None else {"before": args.before.resolve(), "after": REPO}
    best: dict[str, dict[str, float]] = {label: {} for label in trees}
    for _ in range(args.runs):
        for label, tree in trees.items():
            for name, us in _run(tree).items():
                best[label][name] = min(us, best[label].get(name, float("inf")))
    print(f"load average {os.getloadavg()}; CPU us per request, best of {args.runs} runs x {ROUNDS} rounds")
    print("| case | " + " | ".join(trees) + (" | after / before |" if "before" in trees else " |"))
    print("| --- |" + " ---: |" * (len(trees) + ("before" in trees)))
    for name, us in best["after"].items():
        cells = [f"{best[label][name]:.1f}" for label in trees]
        if "before" in trees:
            cells.append(f"{us / best['before'][name]:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
