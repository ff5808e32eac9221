"""A producer's delivery listener, against a real broker process: told of every batch once it is done (its
records, offsets or error) before the batch's futures, raw batches flagged, and closed last."""

from __future__ import annotations

import threading
from typing import Any

from broker.client.errors import BrokerResponseError
from broker.client.producer.producer import Producer
from broker.client.producer.producer_batch import ProducerBatch, RecordRun
from broker.client.producer.producer_config import ProducerConfig
from broker.protocol.error_code import ErrorCode
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.broker.client.helpers import HOST
from tests.support.broker_cluster import servers


class Recorder:
    """A listener that writes down what it was told, and whether anyone could see the outcome first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, int, int, bool, list[RecordRun], str | None, bool]] = []
        self.closed: list[tuple[float | None, int]] = []

    def on_completion(self, batch: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
        with self.lock:
            self.seen.append(
                (
                    batch.topic,
                    batch.partition,
                    base_offset if error is None else -2,
                    batch.is_raw,
                    list(batch.record_runs()),
                    None if error is None else type(error).__name__,
                    batch.done,  # the futures are completed after the listener returns
                )
            )

    def close(self, timeout_s: float | None) -> None:
        with self.lock:
            self.closed.append((timeout_s, len(self.seen)))


def test_the_listener_sees_every_batch_before_its_futures_then_is_closed_last(broker_cluster: Any) -> None:
    broker_cluster.create_topic("heard", 2)
    recorder = Recorder()
    config = ProducerConfig(
        bootstrap_servers=servers(broker_cluster),
        host_name=HOST,
        linger_ms=0,
        max_request_size=4 << 20,
        batch_size=4 << 20,
        request_timeout_ms=10_000,
    )
    raw = RecordBatchBuilder(base_offset=500)
    for i in range(4):
        raw.append(2_000 + i, None, b"r%d" % i, [])
    producer = Producer(config, delivery_listener=recorder)
    try:
        first = producer.send("heard", b"abcd", partition=0, timestamp_ms=1_000)
        assert first.result(10).offset == 0
        assert recorder.seen == [("heard", 0, 0, False, [RecordRun(1_000, 1, 4)], None, False)]
        many = producer.send_many("heard", [b"x" * 10, None, b"yy"], partition=1, timestamp_ms=1_500)
        assert [r.next_offset for r in many.result(10)] == [3]
        refused = producer.send("heard", b"z" * (2 << 20), partition=0, timestamp_ms=1_700)  # > 1 MiB + 12
        assert isinstance(refused.exception(10), BrokerResponseError)
        assert refused.exception(0).error_code == ErrorCode.MESSAGE_TOO_LARGE  # type: ignore[union-attr]
        assert producer.send_batch("heard", 0, raw.build()).result(10)[0].base_offset == 1
        producer.send("heard", b"last", partition=1, timestamp_ms=1_800)  # done by close()
    finally:
        producer.close()
    assert recorder.seen == [
        ("heard", 0, 0, False, [RecordRun(1_000, 1, 4)], None, False),
        ("heard", 1, 0, False, [RecordRun(1_500, 3, 12)], None, False),
        ("heard", 0, -2, False, [RecordRun(1_700, 1, 2 << 20)], "BrokerResponseError", False),
        ("heard", 0, 1, True, [], None, False),
        ("heard", 1, 3, False, [RecordRun(1_800, 1, 4)], None, False),
    ]
    assert recorder.closed == [(None, 5)]  # once, after the last batch was reported
    producer.close()  # idempotent: the listener is not closed twice
    assert recorder.closed == [(None, 5)]
