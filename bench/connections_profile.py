"""Where a Lumber broker's time goes as producer connections grow (issue 39's connections phase), with py-spy.

Run from the repository root (under the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/connections_profile.py [--records 200000] [--rounds 3]
                                                                         [--clients 1,10] [--profile DIR]

One Lumber broker with its defaults on a ZooKeeper of its own (``tests/support/broker_cluster.py``); for
each client count ``N``, in turn, ``--rounds`` times: a new one-partition topic and ``N`` confluent-kafka
producers at batch 50, ``acks=1`` (:mod:`bench.paper_kafka_connections`' producers: each its own
connection, the records shared among them, released together), every record acknowledged and the high
watermark checked. Printed: records/s and the broker's CPU seconds per million records. ``--profile DIR``
runs ``py-spy record`` on the broker during each count's last round (:class:`bench.partitions.PySpy`; raw
collapsed stacks into ``DIR``, kept out of the repository) and prints the functions with the largest
shares of the broker's busy samples, inclusive: relative costs, meaningful on a busy machine. py-spy
samples threads waiting for the GIL as busy, so a share that grows with the threads at work is GIL
contention as much as work.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.broker_cpu import BrokerCpu, per_million
from bench.paper_kafka import LUMBER_DEFAULTS, make_records
from bench.paper_kafka_clients import ConfluentProducer, high_watermarks
from bench.paper_kafka_connections import Crowd, shares
from bench.partitions import PySpy, top_functions
from bench.spread import Spread
from tests.support.broker_cluster import bench_cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="1,10", help="producer connection counts (1,10)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy's raw stacks into this folder")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",") if c]
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    values = make_records(args.records)
    rates = {clients: Spread() for clients in counts}
    cpu = {clients: Spread() for clients in counts}
    failed = False
    with (
        tempfile.TemporaryDirectory(prefix="lumber-connections-") as scratch,
        bench_cluster(Path(scratch), 0) as cluster,
    ):
        broker = cluster.add_broker(LUMBER_DEFAULTS)
        if broker.popen is None:
            raise RuntimeError("the broker did not start")
        pid = broker.popen.pid
        for round_number in range(1, args.rounds + 1):
            for clients in counts:
                topic = f"c{clients}-r{round_number}"
                cluster.create_topic(topic, 1, assignment={0: [broker.broker_id]})
                producers = [ConfluentProducer(broker.address, topic, 50, "1") for _ in range(clients)]
                bodies = [
                    lambda p=producer, r=share: p.send(values[r[0] : r[1]], 0)
                    for producer, share in zip(producers, shares(args.records, clients), strict=True)
                ]
                crowd = Crowd(bodies)
                profile = args.profile is not None and round_number == args.rounds
                spy = (
                    PySpy(pid, args.profile / f"broker-c{clients}.txt") if profile and args.profile else None
                )
                try:
                    with BrokerCpu(pid).phase() as spent:
                        started = time.perf_counter()
                        crowd.run()
                        seconds = time.perf_counter() - started
                finally:
                    if spy is not None:
                        spy.stop()
                held = high_watermarks(broker.address, topic, 1)
                if held != args.records:
                    print(f"{topic}: the high watermark is {held}, {args.records} were acknowledged")
                    failed = True
                    continue
                rates[clients].add(args.records / seconds)
                cpu[clients].add(per_million(spent.seconds, args.records))
                print(
                    f"round {round_number} {clients:4} connection(s): {args.records / seconds:10,.0f} rec/s, "
                    f"broker CPU {per_million(spent.seconds, args.records):5.2f} s per million",
                    flush=True,
                )
    print(
        f"\n{args.records:,} records of 100 bytes, batch 50, acks=1, {args.rounds} rounds, median [min - max]"
    )
    for clients in counts:
        rate, cost = rates[clients].text(), cpu[clients].text(2)
        print(f"  {clients:4} connection(s): {rate} rec/s, broker CPU {cost} s per million")
    if args.profile is not None:
        for clients in counts:
            print(f"\n{clients} connection(s): the broker's busy samples, inclusive (py-spy)")
            for name, share in top_functions(args.profile / f"broker-c{clients}.txt", 20):
                print(f"  {share:6.1%}  {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
