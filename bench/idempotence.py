"""What the idempotent producer costs: Lumber's producer at ``acks=all``, idempotence on against off, one run.

Run from the repository root::

    .venv/bin/python bench/idempotence.py [--messages 100000] [--rounds 3]

It starts a real ZooKeeper and one real Lumber broker process on 127.0.0.1
(``tests/support/broker_cluster.py``, which flushes every 20 ms) and produces 200-byte values to a
one-partition topic per case, with ``acks=all``, ``linger_ms`` 5 and ``batch_size`` 128 KiB: batch size 1
(one ``send()`` per message) and batch size 50 (``send_many()`` per 50), each with ``enable_idempotence``
true (InitProducerId, sequences stamped, checked by the broker, one batch in flight per partition) and
false (up to 5 in flight). The cases alternate within a round so that all see the same machine load; the
best of ``--rounds`` counts. It prints messages/s and the ratio on / off.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clients import values
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from tests.support.broker_cluster import bench_cluster


def produce(servers: list[str], topic: str, payload: list[bytes], *, idempotent: bool, batch: int) -> float:
    config = ProducerConfig(
        bootstrap_servers=servers,
        acks="all",
        enable_idempotence=idempotent,
        linger_ms=5,
        batch_size=128 * 1024,
        buffer_memory=64 * 1024 * 1024,
        host_name="bench-host",
    )
    with Producer(config) as producer:
        producer.partitions_for(topic)
        started = time.perf_counter()
        if batch == 1:
            send = producer.send
            for value in payload:
                send(topic, value, partition=0)
        else:
            send_many = producer.send_many
            for i in range(0, len(payload), batch):
                send_many(topic, payload[i : i + batch], partition=0)
        producer.flush()
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    payload = values(args.messages)
    cases: list[tuple[str, Callable[[list[str], str], float]]] = []
    for batch in (1, 50):
        for idempotent in (True, False):

            def run(servers: list[str], topic: str, b: int = batch, i: bool = idempotent) -> float:
                return produce(servers, topic, payload, idempotent=i, batch=b)

            cases.append((f"batch {batch:2d}, idempotence {'on ' if idempotent else 'off'}", run))
    rates: dict[str, list[float]] = {name: [] for name, _ in cases}
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-idem-") as base,
        bench_cluster(Path(base)) as cluster,
    ):
        servers = [b.address for b in cluster.brokers]
        for round_number in range(args.rounds):
            for number, (name, run) in enumerate(cases):
                topic = f"idem-r{round_number}-c{number}"
                cluster.create_topic(topic, 1)
                elapsed = run(servers, topic)
                rates[name].append(args.messages / elapsed)
                print(f"round {round_number + 1}: {name}: {args.messages / elapsed:10,.0f} msg/s", flush=True)
    print(f"\nbest of {args.rounds} rounds, {args.messages:,} messages of 200 bytes, acks=all:")
    for batch in (1, 50):
        on = max(rates[f"batch {batch:2d}, idempotence on "])
        off = max(rates[f"batch {batch:2d}, idempotence off"])
        ratio = on / off
        print(
            f"  batch {batch:2d}: on {on:9,.0f} msg/s, off {off:9,.0f} msg/s, on/off {ratio:.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
