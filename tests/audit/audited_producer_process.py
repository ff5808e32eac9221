"""A helper process for ``test_audit_outbox``: an audited producer with a persistent outbox, to be killed.

``python -m tests.audit.audited_producer_process --servers S --registry URL --state-dir D --client-id C
--topic T --window-ms W --base-ms B --ack-log F --start N``: an idempotent ``acks=all`` producer
(:func:`audit.audited_producer.audited_producer`, ``audit_state_dir`` D, audit every 300 ms) sends record
N, N+1, ... to T, record n stamped ``B + (n * 7919) % (4 * W)`` (spread over four windows), never more
than 20 unacknowledged. Each acknowledged record gets one line ``A <n> <timestamp>`` in the ack log,
written (one ``write``) by its delivery callback, which the producer calls after its delivery listener,
the audit's counter, has journaled the batch. It runs until killed; on SIGTERM it stops sending, closes
the producer (which publishes its last counts) and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading

from audit.audited_producer import audited_producer
from broker.client.producer.producer_batch import DeliveryCallback, RecordMetadata
from broker.client.producer.producer_config import ProducerConfig
from schemas.registry.config import RegistryConfig


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("--servers", "--registry", "--state-dir", "--client-id", "--topic", "--ack-log"):
        parser.add_argument(flag, required=True)
    for flag in ("--window-ms", "--base-ms", "--start"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config = ProducerConfig(
        bootstrap_servers=args.servers.split(","),
        client_id=args.client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        host_name="web-1",
        audit_interval_ms=300,
        audit_window_ms=args.window_ms,
        audit_registry_url=args.registry,
        audit_state_dir=args.state_dir,
    )
    ack_fd = os.open(args.ack_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    window = threading.Semaphore(20)
    producer = audited_producer(config, registry=RegistryConfig(url=args.registry))

    def on_delivery(n: int, ts: int) -> DeliveryCallback:
        def done(_metadata: RecordMetadata | None, error: BaseException | None) -> None:
            if error is None:
                os.write(ack_fd, f"A {n} {ts}\n".encode())
            window.release()

        return done

    n = args.start
    while not stop.is_set():
        if not window.acquire(timeout=0.1):
            continue
        ts = args.base_ms + (n * 7919) % (4 * args.window_ms)
        producer.send(args.topic, b"v%d" % n, timestamp_ms=ts, on_delivery=on_delivery(n, ts))
        n += 1
    producer.close()
    os.close(ack_fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
