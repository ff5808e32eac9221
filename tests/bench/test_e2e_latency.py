"""bench/e2e_latency.py: the paced producer and the measuring consumer settle their garbage collectors before
they measure, so that the harness's own full collections (34-110 ms in the consumer at 100,000 msg/s) are not
counted as the broker's latency; and a measurement against a real broker receives every message it sent.

Each check runs in a subprocess, since settling changes the process's collector."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from bench.e2e_latency import Row, pooled_percentiles
from broker.server.garbage_collection import YOUNG_THRESHOLD
from tests.support.broker_cluster import BrokerCluster

CONSUMER = textwrap.dedent(
    """
    import gc, sys
    from multiprocessing import Pipe
    from bench.e2e_latency import consumer_child

    class Ready:
        def set(self):
            print(gc.get_freeze_count() > 0, gc.get_threshold()[0])

    receiver, sender = Pipe(duplex=False)
    consumer_child(sys.argv[1], sys.argv[2], 0, Ready(), sender)
    print(len(receiver.recv_bytes()))
    """
)

PRODUCER = textwrap.dedent(
    """
    import gc, sys
    from bench.e2e_latency import measure

    if __name__ == "__main__":
        row = measure("lumber", sys.argv[1], 200, 0.5, 1)
        print(row.sent, row.received, gc.get_freeze_count() > 0, gc.get_threshold()[0])
    """
)


def run(script: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=180, check=True
    )
    return done.stdout.split()


def test_the_consumer_settles_its_collector_before_it_signals_ready(broker_cluster: BrokerCluster) -> None:
    broker_cluster.create_topic("e2e-settle", 1)
    # frozen at ready, the broker's young threshold; then no pairs (0 messages expected)
    found = run(CONSUMER, broker_cluster.bootstrap_servers, "e2e-settle")
    assert found == ["True", str(YOUNG_THRESHOLD), "0"]


def test_the_producer_settles_its_collector_and_every_message_arrives(broker_cluster: BrokerCluster) -> None:
    # 200 msg/s for 0.5 s measured: 100 sent, 100 received; the producer's process frozen
    assert run(PRODUCER, broker_cluster.bootstrap_servers) == ["100", "100", "True", str(YOUNG_THRESHOLD)]


def test_the_pooled_percentiles_take_every_rounds_messages_together() -> None:
    # round 1: 1..100 ms, round 2: 101..200 ms; a round without messages adds none
    rounds = [
        Row("lumber", 1000, 1, latencies_ms=np.arange(1, 101, dtype=float)),
        Row("lumber", 1000, 2, latencies_ms=np.arange(101, 201, dtype=float)),
        Row("lumber", 1000, 3, latencies_ms=np.array([], dtype=float)),
    ]
    count, p50, p99, p999 = pooled_percentiles(rounds)  # type: ignore[misc]
    assert count == 200
    assert (p50, p99) == (100.5, 198.01)
    assert round(p999, 3) == 199.801
    assert pooled_percentiles([Row("kafka", 1000, 1)]) is None
