"""A broker process's CPU per request at batch 1, over real sockets: confluent-kafka producing one 100-byte
record per Produce request, and a client fetching one partition request after request (issue 39).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/batch_one.py --before /path/to/older/checkout [--runs 3]
    .venv/bin/python bench/batch_one.py --records 20000 --profile /tmp/prof    # this tree, py-spy on

``bench/request_path.py`` measures the handler in-process; this measures the whole broker: the processor's
loop, the socket reads and writes, framing, the handler, the append, every other thread the process runs.
Each tree (``--before`` and this one, alternately, ``--runs`` times, so that both see the same machine load)
is measured in its own process with ``PYTHONPATH`` set to it; that process starts a ZooKeeper and one broker
of the tree (``tests/support/broker_cluster.bench_cluster``, the Kafka comparison's settings: ``flush_ms``
1000, four handler threads), creates a one-partition topic, warms the broker up with ``--records`` / 10
records, then measures, each from the broker's ``/proc/<pid>/stat`` (utime + stime, all its threads):

* **produce acks=1**: confluent-kafka, ``linger.ms=0``, ``batch.num.messages=1`` (one record per request,
  as the Kafka comparison's batch 1), ``--records`` records, until each is acknowledged;
* **produce acks=0**: the same producer settings with ``acks=0``, ten times ``--records`` records (each
  costs the broker a tenth as much: the CPU clock ticks at 10 ms), until the partition's log end offset
  (ListOffsets, asked every 50 ms) counts every record;
* **fetch**: ``--records`` Fetch v11 requests on one connection, one at a time (each answer read before
  the next is sent), of the partition's last 100 records (``max_wait_ms`` 0, up to 1 MiB), encoded once
  with the tree's own codec.

It prints the broker's CPU microseconds per request for each case and tree (the best of the runs) and the
ratio after / before. ``--profile DIR`` records py-spy (``.venv/bin/py-spy``, raw collapsed stacks, 200
samples per second) on the broker during each case of the last run of this tree: ``DIR/<case>.txt``.
py-spy's sampling costs the broker CPU too, so a profiled run's figures are not to be compared.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPIC = "batch-one"
VALUE = b"v" * 100
#: The Kafka comparison's Lumber broker (``bench/paper_kafka.py``'s ``LUMBER_DEFAULTS``).
BROKER_SETTINGS = {"flush_ms": 1000, "num_io_threads": 4}
CASES = ("produce acks=1", "produce acks=0", "fetch, last 100 records")


def _produce(bootstrap: str, acks: str, count: int) -> None:
    from confluent_kafka import Producer  # noqa: PLC0415

    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": False,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "queue.buffering.max.messages": 2_000_000,
            "on_delivery": lambda err, _msg: errors.append(str(err)) if err is not None else None,
        }
    )
    producer.list_topics(TOPIC, timeout=30)
    for i in range(count):
        producer.produce(TOPIC, VALUE, partition=0)
        if not i % 5000:
            producer.poll(0)
    left = producer.flush(300)
    if left or errors:
        raise RuntimeError(f"acks={acks}: {left} records unacknowledged, errors: {errors[:3]}")


def _log_end(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "batch-one-probe"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1])
    finally:
        consumer.close()


def _wait_log_end(bootstrap: str, expected: int) -> None:
    deadline = time.monotonic() + 300
    while (end := _log_end(bootstrap)) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{TOPIC}-0: log end offset {end} after 300 s, expected {expected}")
        time.sleep(0.05)
    if end != expected:
        raise RuntimeError(f"{TOPIC}-0: log end offset {end}, expected {expected}")


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise RuntimeError(f"the broker closed the connection after {got} of {size} bytes")
        got += n
    return bytes(buffer)


def _fetch(address: str, log_end: int, count: int) -> None:
    from broker.protocol import compile_all, encode_request  # noqa: PLC0415
    from broker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: PLC0415

    compile_all()
    one_mib = 1 << 20
    partition = FetchPartition(partition=0, fetch_offset=log_end - 100, partition_max_bytes=one_mib)
    body = FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=one_mib, topics=[FetchTopic(TOPIC, [partition])]
    )
    frame = encode_request(11, 1, "batch-one", body)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            answer = _recv_exact(sock, size)
            if len(answer) < 100 * 100:
                raise RuntimeError(f"a Fetch of the last 100 records answered {len(answer)} bytes")


def _measure(records: int, profile: Path | None) -> None:
    """One run in this process, on the tree ``PYTHONPATH`` names: prints ``case<TAB>us`` lines."""
    from bench.broker_cpu import BrokerCpu  # noqa: PLC0415 - the measured tree is on PYTHONPATH
    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415

    with (
        tempfile.TemporaryDirectory(prefix="lumber-batch-one-") as scratch,
        bench_cluster(Path(scratch), 0) as cluster,
    ):
        broker = cluster.add_broker(BROKER_SETTINGS)
        assert broker.popen is not None
        pid = broker.popen.pid
        cluster.create_topic(TOPIC, 1)
        bootstrap = broker.address
        _produce(bootstrap, "1", records // 10)  # warm-up: connections, first appends, compiled kernels
        written = records // 10
        cpu = BrokerCpu(pid)

        def measured(case: str, run: Callable[[], None], requests: int) -> None:
            name = case.split(",", maxsplit=1)[0].replace(" ", "-").replace("=", "")
            spy = None if profile is None else start_spy(pid, profile / f"{name}.txt")
            with cpu.phase() as spent:
                run()
            stop_spy(spy)
            print(f"{case}\t{spent.seconds / requests * 1e6:.2f}", flush=True)

        measured(CASES[0], lambda: _produce(bootstrap, "1", records), records)
        written += records + 10 * records  # after the acks=0 case

        def acks_zero() -> None:
            _produce(bootstrap, "0", 10 * records)
            _wait_log_end(bootstrap, written)

        measured(CASES[1], acks_zero, 10 * records)
        measured(CASES[2], lambda: _fetch(broker.address, written, records), records)


def start_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy recording process ``pid`` (raw collapsed stacks, 200 samples per second) into ``out``."""
    argv = [str(REPO / ".venv/bin/py-spy"), "record", "-r", "200", "-f", "raw", "-o", str(out)]
    spy = subprocess.Popen([*argv, "--pid", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    return spy


def stop_spy(spy: subprocess.Popen[bytes] | None) -> None:
    """Stop a :func:`start_spy` recording (it writes its file on SIGINT)."""
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def tree_rows(
    script: str, tree: Path, records: int, profile: Path | None, extra: Sequence[str] = ()
) -> list[list[str]]:
    """Run ``script --measure`` on ``tree`` (``PYTHONPATH`` set to it), with the script's own ``extra``
    arguments, and return its tab-separated output lines, split."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, script, "--measure", "--records", str(records), *extra]
    if profile is not None:
        argv += ["--profile", str(profile)]
    out = subprocess.run(
        argv, cwd=tree, env=env, check=True, capture_output=True, text=True, timeout=1800
    ).stdout
    return [line.split("\t") for line in out.splitlines() if "\t" in line]


def tree_arguments(
    description: str, records: int, more: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The command line of a bench that measures ``--before`` and this tree alternately in processes of
    their own (``--measure``: one such run), its profile folder made; ``more`` adds the bench's own
    options."""
    parser = argparse.ArgumentParser(description=description)
    if more is not None:
        more(parser)
    parser.add_argument("--before", type=Path, help="the older checkout to compare with")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs per tree (default 3)")
    parser.add_argument("--records", type=int, default=records, help=f"records per case ({records:,})")
    parser.add_argument("--profile", type=Path, help="record py-spy on this tree's last run into this folder")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    return args


def _run(tree: Path, records: int, profile: Path | None) -> dict[str, float]:
    rows = tree_rows(str(Path(__file__).resolve()), tree, records, profile)
    return {name: float(us) for name, us in rows}


def main() -> int:
    args = tree_arguments(__doc__.split("\n", 1)[0], 20_000)
    if args.measure:
        _measure(args.records, args.profile)
        return 0
    trees = {"after": REPO} if args.before is None else {"before": args.before.resolve(), "after": REPO}
    best: dict[str, dict[str, float]] = {label: {} for label in trees}
    loads = [os.getloadavg()[0]]
    for run in range(args.runs):
        for label, tree in trees.items():
            profile = args.profile if label == "after" and run == args.runs - 1 else None
            for name, us in _run(tree, args.records, profile).items():
                best[label][name] = min(us, best[label].get(name, float("inf")))
            loads.append(os.getloadavg()[0])
    print(
        f"load average (1 min) {min(loads):.2f}-{max(loads):.2f}; broker CPU us per request, "
        f"{args.records:,} requests a case, best of {args.runs} runs"
    )
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
