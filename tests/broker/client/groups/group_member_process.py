"""A consumer group member as its own process, for the failure tests (run with ``sys.executable -m``).

    python -m tests.broker.client.groups.group_member_process --zookeeper CONNECT --servers HOST:PORT \\
        --group G --topic T --prefix NAME --out FILE [--protocol kafka]

It polls the topic and appends ``<partition> <offset>\\n`` to FILE for every record, with one ``write``
per poll (so a SIGKILL leaves whole lines, perhaps without the last poll's). The records of a poll count
as consumed when it polls again, after writing them, so a crash never commits an unwritten record.
SIGTERM makes it leave cleanly: close() commits what it wrote and releases its partitions.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import GroupClosedError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--zookeeper", "--servers", "--group", "--topic", "--prefix", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument("--protocol", choices=["zookeeper", "kafka"], default="zookeeper")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    member = GroupConsumer(
        args.group,
        zookeeper_connect=args.zookeeper,
        config=GroupConfig(
            protocol=args.protocol,
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=min(500, args.session_timeout_ms // 3),
            auto_commit_interval_ms=200,
            release_timeout_ms=10_000,
            retry_backoff_ms=20,
            retry_backoff_max_ms=500,
            member_id_prefix=args.prefix,
        ),
        consumer_config=ConsumerConfig(
            bootstrap_servers=args.servers.split(","),
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=5000,
            retry_backoff_ms=50,
        ),
    )
    out = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        member.subscribe(args.topic)
        while not stop.is_set():
            records = member.poll(timeout_ms=100)
            if records:
                os.write(out, b"".join(b"%d %d\n" % (r.partition, r.offset) for r in records))
    except GroupClosedError:
        pass
    finally:
        member.close()
        os.close(out)


if __name__ == "__main__":
    main()
