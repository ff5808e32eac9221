"""The commit half of ``bench/rebalance.py`` (``--commits-only`` runs it alone): one confluent-kafka consumer
committing after every poll, synchronously then asynchronously, against the same consumer's OffsetFetch
round trips, with the brokers' CPU time per request. The run, its settings and the goal (5,000 commits per
second on one coordinator) are described in ``bench/rebalance.py``'s docstring.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

COMMIT_GOAL = 5000
COMMIT_TOPIC = "commits"
#: Asynchronous commits: after this many commits sent, the consumer waits until the on_commit callbacks
#: of all of them have come (so at most this many are in flight; librdkafka queues them otherwise).
ASYNC_WINDOW = 1000


def _cpu_s(pids: list[int]) -> float:
    """The CPU time (user + system) the processes ``pids`` have used, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / ticks


def kafka_commits(args: argparse.Namespace) -> bool:
    """One confluent-kafka consumer committing after every poll (see the module docstring): synchronous,
    then asynchronous with at most ``--async-window`` in flight, then OffsetFetch round trips as the baseline,
    for ``--commit-seconds`` each, on ``--commit-brokers`` brokers (the offsets topic's replication factor);
    True if a commit rate reaches the goal."""
    from confluent_kafka import Consumer, KafkaException, Producer  # noqa: PLC0415
    from confluent_kafka import TopicPartition as ConfluentPartition  # noqa: PLC0415

    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    brokers = args.commit_brokers
    seconds = args.commit_seconds
    window = args.async_window
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-commits-") as folder,
        bench_cluster(
            Path(folder), brokers, offsets_topic_replication_factor=brokers, offsets_topic_partitions=4
        ) as cluster,
    ):
        cluster.create_topic(COMMIT_TOPIC, 1, replication_factor=brokers)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20})
        for _ in range(args.commit_records):
            while True:
                try:
                    producer.produce(COMMIT_TOPIC, value=b"x", partition=0)
                    break
                except BufferError:
                    producer.poll(0.1)
        if producer.flush(60) != 0:
            raise RuntimeError("the commit benchmark's records were not all acknowledged")
        del producer  # destroyed now, not after the brokers stop (it would try to reconnect)

        def consumer(group: str, **extra: Any) -> Any:
            found = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "group.id": group,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    **extra,
                }
            )
            found.assign([ConfluentPartition(COMMIT_TOPIC, 0, 0)])
            return found

        def next_record(c: Any) -> Any:
            for _ in range(100):
                msg = c.poll(1.0)
                if msg is not None:
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    return msg
            raise TimeoutError("no record within 100 s")

        def first_commit(c: Any) -> None:
            """A synchronous commit of the first record, retried while the coordinator is being set up
            (the offsets topic created and loaded); not counted."""
            msg = next_record(c)
            deadline = time.monotonic() + 30
            while True:
                try:
                    c.commit(message=msg, asynchronous=False)
                except KafkaException as exc:
                    if not exc.args[0].retriable() or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
                else:
                    return

        def committed_offset(c: Any) -> int:
            found = c.committed([ConfluentPartition(COMMIT_TOPIC, 0)], timeout=10)[0]
            if found.error is not None:
                raise KafkaException(found.error)
            return int(found.offset)

        # synchronous: commit(asynchronous=False) after every poll
        sync = consumer("bench-commits-sync")
        first_commit(sync)
        print(f"commits: synchronous for {seconds:.0f} s", flush=True)
        brokers_pids = [b.popen.pid for b in cluster.brokers if b.popen is not None]
        sync_commits = 0
        last = -1
        cpu_s = _cpu_s(brokers_pids)
        started_s = time.monotonic()
        while time.monotonic() - started_s < seconds:
            msg = next_record(sync)
            for tp in sync.commit(message=msg, asynchronous=False):
                if tp.error is not None:
                    raise KafkaException(tp.error)
            last = msg.offset()
            sync_commits += 1
        sync_rate = sync_commits / (time.monotonic() - started_s)
        sync_cpu_us = (_cpu_s(brokers_pids) - cpu_s) / sync_commits * 1e6
        sync_committed = committed_offset(sync)
        sync.close()

        # asynchronous: commit() after every poll, every `window` commits wait for their callbacks
        acked = [0, 0]  # acknowledged commits, failed commits

        def on_commit(err: Any, partitions: Any) -> None:
            ok = err is None and all(p.error is None for p in partitions)
            acked[0 if ok else 1] += 1

        aio = consumer("bench-commits-async", on_commit=on_commit)
        first_commit(aio)
        backlog: list[Any] = []  # records polled while waiting for callbacks, consumed next

        def catch_up(sent: int) -> None:
            deadline = time.monotonic() + 30
            while acked[0] + acked[1] < sent:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{sent - acked[0] - acked[1]} commit callbacks missing after 30 s")
                msg = aio.poll(0.01)  # serves the callbacks
                if msg is not None:
                    backlog.append(msg)

        print(f"commits: asynchronous for {seconds:.0f} s", flush=True)
        sent = 0
        async_last = -1
        cpu_s = _cpu_s(brokers_pids)
        started_s = time.monotonic()
        while time.monotonic() - started_s < seconds:
            msg = backlog.pop(0) if backlog else next_record(aio)
            aio.commit(message=msg)
            async_last = msg.offset()
            sent += 1
            if sent % window == 0:
                catch_up(sent)
        catch_up(sent)
        async_rate = acked[0] / (time.monotonic() - started_s)
        async_cpu_us = (_cpu_s(brokers_pids) - cpu_s) / acked[0] * 1e6
        async_committed = committed_offset(aio)

        # the baseline: the same consumer's OffsetFetch round trips (the coordinator without the write)
        print(f"commits: OffsetFetch round trips for {seconds:.0f} s", flush=True)
        fetches = 0
        cpu_s = _cpu_s(brokers_pids)
        started_s = time.monotonic()
        while time.monotonic() - started_s < seconds:
            committed_offset(aio)
            fetches += 1
        fetch_rate = fetches / (time.monotonic() - started_s)
        fetch_cpu_us = (_cpu_s(brokers_pids) - cpu_s) / fetches * 1e6
        aio.close()
    print()
    print(f"commits, one confluent-kafka consumer, {brokers} broker(s), __consumer_offsets RF {brokers}:")
    print(
        f"  synchronous:  {sync_commits} in {seconds:.0f} s = {sync_rate:,.0f}/s (goal {COMMIT_GOAL:,}/s); "
        f"committed {sync_committed}, last consumed + 1 = {last + 1}; broker CPU {sync_cpu_us:.0f} us each"
    )
    print(
        f"  asynchronous, at most {window} in flight: {acked[0]} acknowledged, {acked[1]} failed = "
        f"{async_rate:,.0f}/s; committed {async_committed}, last consumed + 1 = {async_last + 1}; "
        f"broker CPU {async_cpu_us:.0f} us each"
    )
    print(
        f"  baseline, OffsetFetch round trips: {fetch_rate:,.0f}/s (broker CPU {fetch_cpu_us:.0f} us each); "
        "synchronous / fetches = "
        f"{sync_rate / fetch_rate:.2f}, asynchronous / fetches = {async_rate / fetch_rate:.2f}"
    )
    return (
        sync_committed == last + 1
        and async_committed == async_last + 1
        and acked[1] == 0
        and max(sync_rate, async_rate) >= COMMIT_GOAL
    )
